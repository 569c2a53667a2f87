import Core
import Cryptography
import Database
import Foundation
import Runtime

/// The mail outbox (`accounts.mail_outbox`): a mail is written in the transaction that makes the
/// token it carries, then sent by `MailSender`. A mail is claimed under a lease with
/// `FOR UPDATE SKIP LOCKED`, so of several accounts instances one sends it; a claim that ends
/// without a verdict (an instance killed mid-send) lets the mail be claimed again once the lease
/// runs out. Delivery is at least once only across that window: an instance killed after the
/// server took the mail but before recording it sends the mail again after the lease.
///
/// The message is sealed under `REDEEM_SECRET_KEY` (it holds a token in the clear), and cleared
/// once sent, or once its token has expired unsent (the mail is then given up).
enum MailOutbox {
    /// What a mail is for: a code of `EmailTokens`, or a member's invitation.
    enum Kind: String, PGTextEnum, Sendable {
        case verifyEmail, resetPassword, memberInvite

        init(_ purpose: EmailTokens.Purpose) {
            switch purpose {
            case .verifyEmail: self = .verifyEmail
            case .resetPassword: self = .resetPassword
            }
        }
    }

    /// A mail claimed for one attempt.
    struct Claimed: Sendable {
        var id: UUID
        var kind: Kind
        var recipient: String
        var message: [UInt8]
        /// Attempts so far, this one included.
        var attempts: Int
        var lease: UUID
    }

    private static func context(_ id: UUID) -> String { "accounts.mail_outbox/\(id.lowercasedString)" }

    /// Writes a mail to the outbox; `account` is nil for an invitation's recipient, who may have none.
    static func enqueue(
        _ tx: PGConnection, account: UUID?, kind: Kind, recipient: String, message: [UInt8], expiresAt: Date,
        keyring: SecretKeyring
    ) throws {
        let id = UUID.random()
        let (sealed, keyId) = keyring.seal(message, context: context(id))
        try tx.query("""
            INSERT INTO accounts.mail_outbox (id, account_id, kind, recipient, body, body_key_id, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
            """, [id, account, kind, recipient, PGBytes(Data(sealed)), keyId, expiresAt])
    }

    /// How long mail and codes are kept once of no more use (sent, given up, spent or expired),
    /// for an operator looking into a complaint; then their rows, and the email they name, go.
    static let retention: TimeInterval = 7 * 86_400

    /// Deletes the mail and codes kept past `retention`; answers how many rows went.
    static func prune(_ c: PGConnection) throws -> Int {
        let mail = try c.query("""
            DELETE FROM accounts.mail_outbox WHERE created_at < now() - make_interval(secs => $1)
                AND (sent_at IS NOT NULL OR body IS NULL) RETURNING id
            """, [retention]).rows.count
        let codes = try c.query("""
            DELETE FROM accounts.email_tokens WHERE expires_at < now() - make_interval(secs => $1) RETURNING token_hash
            """, [retention]).rows.count
        return mail + codes
    }

    /// Claims up to `limit` due mails for `lease` seconds (each counts an attempt). A mail that
    /// does not open (sealed under a key no longer held) is given up.
    static func claimDue(_ c: PGConnection, limit: Int, lease: TimeInterval, keyring: SecretKeyring) throws -> [Claimed] {
        let rows = try c.query("""
            UPDATE accounts.mail_outbox m SET attempts = m.attempts + 1, next_attempt_at = now() + make_interval(secs => $2),
                lease_token = gen_random_uuid()
            WHERE m.id IN (
                SELECT o.id FROM accounts.mail_outbox o
                WHERE o.sent_at IS NULL AND o.body IS NOT NULL AND o.next_attempt_at <= now() AND o.expires_at > now()
                ORDER BY o.next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED
            )
            RETURNING m.id, m.kind, m.recipient, m.body, m.body_key_id, m.attempts, m.lease_token
            """, [limit, lease]).rows
        var claimed: [Claimed] = []
        for row in rows {
            let id = try row.decode("id", as: UUID.self)
            let kind = try row.decode("kind", as: Kind.self)
            guard let message = try? keyring.open(Array(try row.decode("body", as: PGBytes.self).data), keyId: try row.decodeIfPresent("body_key_id"),
                                                  context: context(id)) else {
                try c.query("UPDATE accounts.mail_outbox SET body = NULL, last_error = 'the mail does not open under the secret keys held' WHERE id = $1", [id])
                continue
            }
            claimed.append(Claimed(id: id, kind: kind, recipient: try row.decode("recipient"), message: message,
                                   attempts: try row.decode("attempts"), lease: try row.decode("lease_token")))
        }
        return claimed
    }

    /// The server took the mail: it is sent, and its message cleared. False when the lease was
    /// lost meanwhile (another claim holds the mail).
    @discardableResult
    static func sent(_ c: PGConnection, _ mail: Claimed) throws -> Bool {
        try c.query("""
            UPDATE accounts.mail_outbox SET sent_at = now(), body = NULL, lease_token = NULL, last_error = NULL
            WHERE id = $1 AND lease_token = $2 AND sent_at IS NULL RETURNING id
            """, [mail.id, mail.lease]).first != nil
    }

    /// The attempt failed: due again after `after` seconds.
    static func failed(_ c: PGConnection, _ mail: Claimed, error: String, after: TimeInterval) throws {
        try c.query("""
            UPDATE accounts.mail_outbox SET next_attempt_at = now() + make_interval(secs => $3), lease_token = NULL, last_error = $4
            WHERE id = $1 AND lease_token = $2 AND sent_at IS NULL
            """, [mail.id, mail.lease, after, String(error.prefix(500))])
    }

    /// Unsent mails whose token has expired are given up: their message (and token) is cleared.
    static func giveUpExpired(_ c: PGConnection) throws -> Int {
        try c.query("""
            UPDATE accounts.mail_outbox SET body = NULL, last_error = COALESCE(last_error, '') || ' (given up: its code expired unsent)'
            WHERE sent_at IS NULL AND body IS NOT NULL AND expires_at <= now() RETURNING id
            """).rows.count
    }

    /// The pause before attempt `attempts + 1`: 1 s doubling to 5 minutes, ±20 %.
    static func retryDelay(afterAttempts attempts: Int, random: Double) -> TimeInterval {
        Backoff(initial: 1, max: 300, jitter: 0.2).delay(afterFailures: attempts, random: random)
    }
}
