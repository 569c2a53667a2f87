import Foundation
import TestSupport
import Testing
@testable import AccountsService
@testable import Core
@testable import Cryptography
@testable import Database
@testable import Runtime

/// Mailed codes and the mail outbox against a real PostgreSQL: a code and its mail
/// are written together, a code is spent once, two senders never claim one mail, and rows naming
/// an email go with the account and after the retention.
@Suite struct MailOutboxTests {
    static func pool() async throws -> PGPool {
        let pool = PGPool(url: try await TestPostgres.shared().freshDatabase(), maxConnections: 4)
        _ = try await AccountsService.migrator.apply(on: pool)
        return pool
    }

    static func account(_ c: PGConnection, email: String) throws -> UUID {
        try AccountStore.create(c, email: email, emailVerified: false, passwordHash: "$argon2id$x", recordName: nil)
    }

    /// The code in a message.
    static func code(in message: [UInt8]) throws -> String {
        let text = String(decoding: message, as: UTF8.self)
        return try #require(text.components(separatedBy: "\r\n").first { $0.hasPrefix("    ") }).trimmingCharacters(in: .whitespaces)
    }

    @Test func aCodeAndItsMailAreWrittenTogetherAndTheCodeIsSpentOnce() async throws {
        let pool = try await Self.pool()
        defer { pool.close() }
        let keyring = SecretKeyring.random()
        let (account, claimed) = try await pool.transaction { tx in
            let account = try Self.account(tx, email: "pilot@example.com")
            try EmailTokens.issue(tx, .verifyEmail, account: account, email: "pilot@example.com", keyring: keyring, from: "no-reply@example.com")
            return (account, try MailOutbox.claimDue(tx, limit: 10, lease: 60, keyring: keyring))
        }
        let mail = try #require(claimed.first)
        #expect(claimed.count == 1 && mail.kind == .verifyEmail && mail.recipient == "pilot@example.com" && mail.attempts == 1)
        let code = try Self.code(in: mail.message)
        #expect(code.hasPrefix("ev_"))
        let stored = try await pool.query("SELECT body FROM accounts.mail_outbox").rows.first?.decode("body", as: PGBytes.self)
        #expect(stored.map { !String(decoding: $0.data, as: UTF8.self).contains(code) } == true, "the waiting message is sealed")
        let (otherPurpose, first, second, sent, body) = try await pool.withConnection { c throws in
            (try EmailTokens.spend(c, .resetPassword, token: code)?.account, try EmailTokens.spend(c, .verifyEmail, token: code)?.account,
             try EmailTokens.spend(c, .verifyEmail, token: code)?.account, try MailOutbox.sent(c, mail),
             try c.query("SELECT body FROM accounts.mail_outbox").rows.first?.decodeIfPresent("body", as: PGBytes.self))
        }
        #expect(otherPurpose == nil, "another purpose's code")
        #expect(first == account)
        #expect(second == nil, "once")
        #expect(sent)
        #expect(body == nil, "a sent mail's message is cleared")
    }

    @Test func twoSendersClaimingAtOnceNeverShareAMailAndALostLeaseRecordsNothing() async throws {
        let pool = try await Self.pool()
        defer { pool.close() }
        let keyring = SecretKeyring.random()
        try await pool.transaction { tx in
            for i in 0..<40 {
                let email = "p\(i)@example.com"
                try EmailTokens.issue(tx, .resetPassword, account: try Self.account(tx, email: email), email: email, keyring: keyring, from: "n@example.com")
            }
        }
        let claims = try await withThrowingTaskGroup(of: [UUID].self) { group in
            for _ in 0..<4 {
                group.addTask { try await pool.withConnection { try MailOutbox.claimDue($0, limit: 15, lease: 60, keyring: keyring).map(\.id) } }
            }
            return try await group.reduce(into: [UUID]()) { $0 += $1 }
        }
        #expect(claims.count == 40 && Set(claims).count == 40, "every mail claimed once (\(claims.count) claims)")
        let again = try await pool.withConnection { try MailOutbox.claimDue($0, limit: 50, lease: 60, keyring: keyring) }
        #expect(again.isEmpty, "a leased mail is not due")
        // A lease run out: the mail is claimed again, and the first claim's verdict is refused.
        try await pool.query("UPDATE accounts.mail_outbox SET next_attempt_at = now() WHERE id = $1", [claims[0]])
        let first = try await pool.withConnection { try MailOutbox.claimDue($0, limit: 50, lease: 60, keyring: keyring) }
        #expect(first.map(\.id) == [claims[0]] && first[0].attempts == 2)
        var stale = first[0]
        stale.lease = UUID.random()
        let staleMail = stale
        let recorded = try await pool.withConnection { try MailOutbox.sent($0, staleMail) }
        #expect(recorded == false)
        try await pool.withConnection { try MailOutbox.failed($0, first[0], error: "refused", after: 0) }
        let retried = try await pool.withConnection { try MailOutbox.claimDue($0, limit: 50, lease: 60, keyring: keyring) }
        #expect(retried.map(\.id) == [claims[0]] && retried[0].attempts == 3, "due again after its pause")
    }

    @Test func mailAndCodesGoWithTheAccountAndAfterTheRetention() async throws {
        let pool = try await Self.pool()
        defer { pool.close() }
        let keyring = SecretKeyring.random()
        let issuer = SessionIssuer(config: try AccountsConfig(env: Environment([:])), keyring: keyring)
        let (gone, kept) = try await pool.transaction { tx in
            let gone = try Self.account(tx, email: "gone@example.com"), kept = try Self.account(tx, email: "kept@example.com")
            for (a, e) in [(gone, "gone@example.com"), (kept, "kept@example.com"), (kept, "kept@example.com")] {
                try EmailTokens.issue(tx, .resetPassword, account: a, email: e, keyring: keyring, from: "n@example.com")
            }
            return (gone, kept)
        }
        _ = try await pool.transaction { tx in try AccountStore.delete(tx, account: gone, sessions: issuer) }
        func rows(_ table: String, _ account: UUID) async throws -> Int {
            try await pool.query("SELECT count(*)::int AS n FROM accounts.\(table) WHERE account_id = $1", [account]).rows.first!.decode("n")
        }
        let (goneCodes, goneMail) = (try await rows("email_tokens", gone), try await rows("mail_outbox", gone))
        #expect(goneCodes == 0 && goneMail == 0, "a deleted account's email is nowhere")
        let (keptCodes, keptMail) = (try await rows("email_tokens", kept), try await rows("mail_outbox", kept))
        #expect(keptCodes == 2 && keptMail == 2)
        // One mail sent and one code expired, both past the retention; the others are recent or unsent.
        try await pool.query("""
            UPDATE accounts.mail_outbox SET sent_at = now() - interval '8 days', body = NULL, created_at = now() - interval '8 days'
            WHERE id = (SELECT id FROM accounts.mail_outbox WHERE account_id = $1 LIMIT 1)
            """, [kept])
        try await pool.query("""
            UPDATE accounts.email_tokens SET expires_at = now() - interval '8 days'
            WHERE token_hash = (SELECT token_hash FROM accounts.email_tokens WHERE account_id = $1 LIMIT 1)
            """, [kept])
        try await pool.query("UPDATE accounts.mail_outbox SET created_at = now() - interval '8 days' WHERE account_id = $1 AND sent_at IS NULL", [kept])
        let pruned = try await pool.withConnection { try MailOutbox.prune($0) }
        #expect(pruned == 2)
        let (leftCodes, leftMail) = (try await rows("email_tokens", kept), try await rows("mail_outbox", kept))
        #expect(leftCodes == 1 && leftMail == 1, "an unsent mail with its message stays")
    }
}
