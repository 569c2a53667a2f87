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

        // The previous release's pods read `members.role` at every sign-in during a rolling
        // upgrade: it stays each member's default-app role as `member_apps` changes.
        let other = UUID.random()
        let seen = try await pool.withConnection { c -> [String?] in
            try c.query("INSERT INTO accounts.apps (id, name) VALUES ($1, 'Other')", [other])
            func role() throws -> String? {
                try c.query("SELECT role FROM accounts.members WHERE account_id = $1", [support]).first!
                    .decodeIfPresent("role", as: String.self)
            }
            var seen = [try role()]
            try c.query(
                "UPDATE accounts.member_apps SET role = 'readonly' WHERE account_id = $1 AND app_id = $2",
                [support, DefaultApp.id])
            seen.append(try role())
            try c.query(
                "INSERT INTO accounts.member_apps (account_id, app_id, role) VALUES ($1, $2, 'admin')", [support, other]
            )
            seen.append(try role())
            try c.query(
                "DELETE FROM accounts.member_apps WHERE account_id = $1 AND app_id = $2", [support, DefaultApp.id])
            seen.append(try role())
            return seen
        }
        #expect(
            seen == ["support", "readonly", "readonly", nil], "an admin role in another app is not the default app's")
    }
}
