import Foundation
import TestSupport
import Testing
@testable import AccountsService
@testable import Core
@testable import Database
@testable import Runtime

/// The accounts schema and the refresh rules (docs/security.md) against a real PostgreSQL: what the
/// tables keep, and the grace window moved by rewriting the rotation time instead of sleeping.
@Suite struct SessionStoreTests {
    static func pool() async throws -> PGPool {
        PGPool(url: try await TestPostgres.shared().freshDatabase(), maxConnections: 2)
    }

    @Test func migrationThreeCountsOnlyAppleVouchedEmailsAsProven() async throws {
        let pool = try await Self.pool()
        defer { pool.close() }
        _ = try await Migrator(schema: "accounts", migrations: AccountsMigrations.all.filter { $0.version <= 2 }).apply(on: pool)
        let (password, apple, joined, noEmail) = (UUID.random(), UUID.random(), UUID.random(), UUID.random())
        try await pool.withConnection { c in
            for (id, email, hash) in [(password, "typed@example.com", "$argon2id$x"), (apple, "apple@example.com", nil),
                                      (joined, "joined@example.com", "$argon2id$y"), (noEmail, nil, nil)] as [(UUID, String?, String?)] {
                try c.query("INSERT INTO accounts.accounts (id, email, password_hash, app_user_id) VALUES ($1, $2, $3, $4)",
                            [id, email, hash, id.lowercasedString])
            }
            for (sub, id) in [("s.apple", apple), ("s.joined", joined), ("s.none", noEmail)] {
                try c.query("INSERT INTO accounts.apple_identities (subject, account_id) VALUES ($1, $2)", [sub, id])
            }
        }
        #expect(try await AccountsService.migrator.apply(on: pool).first == 3, "3 and the migrations after it")
        let verified = try await pool.withConnection { c in
            try c.query("SELECT id, email_verified FROM accounts.accounts").rows.reduce(into: [UUID: Bool]()) {
                $0[try $1.decode("id", as: UUID.self)] = try $1.decode("email_verified", as: Bool.self)
            }
        }
        #expect(verified[password] == false, "an email typed at sign-up was never proven")
        #expect(verified[apple] == true)
        #expect(verified[joined] == true, "joined earlier on Apple's verified email")
        #expect(verified[noEmail] == false)
        // The database refuses a proven email where there is none.
        await #expect(throws: PGError.self) {
            try await pool.query("UPDATE accounts.accounts SET email_verified = true WHERE id = $1", [noEmail])
        }
    }

    /// The service's refresh against the database: a retry is answered the same pair, nothing
    /// stored reads as a token, and the window, a used successor and a revocation each end it.
    @Test func refreshRetriesAreAnsweredFromTheSealedPairOnlyWhileTheyMay() async throws {
        let pool = try await Self.pool()
        defer { pool.close() }
        _ = try await AccountsService.migrator.apply(on: pool)
        let issuer = SessionIssuer(config: try AccountsConfig(env: Environment(["REDEEM_REFRESH_GRACE": "10"])), keyring: .random())
        try await issuer.loadSigningKey(pool)
        func refresh(_ token: String) async throws -> SessionIssuer.RefreshOutcome {
            try await pool.transaction { tx in try issuer.refresh(tx, token: token) }
        }
        func signIn() async throws -> (UUID, SessionTokens) {
            try await pool.transaction { tx in
                let account = try AccountStore.create(tx, email: nil, emailVerified: false, passwordHash: nil, recordName: nil)
                return (account, try issuer.open(tx, account: account))
            }
        }

        let (account, first) = try await signIn()
        guard case .rotated(account, let second) = try await refresh(first.refreshToken) else { Issue.record("no rotation"); return }
        guard case .retried(account, let again) = try await refresh(first.refreshToken) else { Issue.record("the retry was not answered"); return }
        #expect(again.accessToken == second.accessToken && again.refreshToken == second.refreshToken && again.expiresAt == second.expiresAt)
        let stored = try await pool.query("SELECT encode(retry_pair, 'escape') AS pair FROM accounts.spent_refresh_tokens WHERE retry_pair IS NOT NULL")
        #expect(stored.rows.count == 1)
        #expect(try !stored.rows[0].decode("pair", as: String.self).contains(second.refreshToken), "the new token is stored sealed")

        // The successor is used: the first token's pair is dropped, and presenting it revokes.
        guard case .rotated(_, let third) = try await refresh(second.refreshToken) else { Issue.record("no second rotation"); return }
        #expect(try await pool.query("SELECT 1 FROM accounts.spent_refresh_tokens WHERE retry_pair IS NOT NULL").rows.count == 1)
        guard case .replayed(_?) = try await refresh(first.refreshToken) else { Issue.record("the stale retry did not revoke"); return }
        #expect(try await refresh(third.refreshToken).isInvalid, "the session is revoked")
        #expect(try await pool.query("SELECT 1 FROM accounts.spent_refresh_tokens WHERE retry_pair IS NOT NULL").rows.isEmpty,
                "a revoked session keeps no pair")

        // Past the window (the rotation moved 11 s into the past): the retry revokes.
        let (_, other) = try await signIn()
        guard case .rotated = try await refresh(other.refreshToken) else { Issue.record("no rotation"); return }
        _ = try await pool.query("UPDATE accounts.spent_refresh_tokens SET spent_at = spent_at - interval '11 seconds' WHERE retry_pair IS NOT NULL")
        guard case .replayed(_?) = try await refresh(other.refreshToken) else { Issue.record("a late retry did not revoke"); return }
        #expect(try await refresh("rt_never_issued").isInvalid)
    }
}

extension SessionIssuer.RefreshOutcome {
    var isInvalid: Bool { if case .invalid = self { true } else { false } }
}
