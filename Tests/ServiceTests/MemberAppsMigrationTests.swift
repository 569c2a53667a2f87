import Foundation
import TestSupport
import Testing

@testable import AccountsService
@testable import Core
@testable import Database

/// Members made before a member had a role per app (accounts migration 19): each one's role becomes
/// their role in the default app, so a deployment with one app changes nothing; a pending
/// invitation is the default app's; and the database holds one role per member and app.
@Suite struct MemberAppsMigrationTests {
    @Test func aMembersRoleBecomesTheirDefaultAppRole() async throws {
        let url = try await TestPostgres.shared().freshDatabase()
        let pool = PGPool(url: url, maxConnections: 1)
        defer { pool.close() }
        try await Migrator(schema: "accounts", migrations: AccountsMigrations.all.filter { $0.version < 19 })
            .apply(on: pool)
        let admin = UUID.random(), support = UUID.random(), invite = UUID.random()
        try await pool.withConnection { c in
            for (id, role) in [(admin, "admin"), (support, "support")] {
                try c.query(
                    "INSERT INTO accounts.accounts (id, email, app_user_id) VALUES ($1, $2, $3)",
                    [id, "\(role)@example.com", id.lowercasedString])
                try c.query("INSERT INTO accounts.members (account_id, role) VALUES ($1, $2)", [id, role])
            }
            try c.query(
                """
                INSERT INTO accounts.member_invites (id, token_hash, email, role, expires_at)
                VALUES ($1, '\\x00'::bytea, 'new@example.com', 'readonly', now() + interval '1 day')
                """, [invite])
        }

        #expect(try await AccountsService.migrator.apply(on: pool).first == 19)
        let (roles, inviteApp, twice) = try await pool.withConnection { c -> ([UUID: String], UUID, PGError?) in
            var roles: [UUID: String] = [:]
            for row in try c.query("SELECT account_id, app_id, role FROM accounts.member_apps").rows {
                #expect(try row.decode("app_id", as: UUID.self) == DefaultApp.id)
                roles[try row.decode("account_id")] = try row.decode("role", as: String.self)
            }
            let inviteApp = try c.query("SELECT app_id FROM accounts.member_invites WHERE id = $1", [invite]).first!
                .decode("app_id", as: UUID.self)
            var twice: PGError?
            do {
                try c.query(
                    "INSERT INTO accounts.member_apps (account_id, app_id, role) VALUES ($1, $2, 'readonly')",
                    [admin, DefaultApp.id])
            } catch let e as PGError { twice = e }
            return (roles, inviteApp, twice)
        }
        #expect(roles == [admin: "admin", support: "support"])
        #expect(inviteApp == DefaultApp.id)
        #expect(twice?.isUniqueViolation == true, "one role per member and app")
    }
}
