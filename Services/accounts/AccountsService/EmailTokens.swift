import Core
import Cryptography
import Database
import Foundation

/// Tokens that prove an email address: made for an account and the address they are
/// mailed to, random (256 bits), stored as their SHA-256 only, used once, and expiring. A token
/// proves the address only while it is still the account's email.
enum EmailTokens {
    enum Purpose: String, PGTextEnum, Sendable {
        case verifyEmail, resetPassword

        /// How long a token of this purpose works.
        var lifetime: TimeInterval {
            switch self {
            case .verifyEmail: 24 * 3600
            case .resetPassword: 3600
            }
        }

        /// The token's visible prefix, which tells a support person which mail it came from.
        var prefix: String {
            switch self {
            case .verifyEmail: "ev_"
            case .resetPassword: "pr_"
            }
        }
    }

    /// What a spent token stood for.
    struct Spent: Sendable {
        var account: UUID
        var email: String
    }

    static func hash(_ token: String) -> PGBytes { PGBytes(Data(Crypto.sha256(Array(token.utf8)))) }

    /// Makes a token for `account` and `email`, and writes the mail that carries it to the outbox,
    /// in the caller's transaction: the mail exists exactly when the token does.
    static func issue(_ tx: PGConnection, _ purpose: Purpose, account: UUID, email: String, keyring: SecretKeyring, from: String) throws {
        let token = purpose.prefix + Crypto.randomToken(bytes: 32)
        let row = try tx.query("""
            INSERT INTO accounts.email_tokens (token_hash, account_id, purpose, email, expires_at)
            VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5)) RETURNING expires_at
            """, [hash(token), account, purpose, email, purpose.lifetime]).first!
        let message = MailMessage.carrying(token, purpose: purpose, to: email, from: from)
        try MailOutbox.enqueue(
            tx, account: account, kind: .init(purpose), recipient: email, message: message,
            expiresAt: try row.decode("expires_at"), keyring: keyring)
    }

    /// Spends a token of `purpose`: the account and email it was made for, when it is unused,
    /// unexpired, and its email is still the account's (a deleted account has none). Answers nil
    /// otherwise, and a token found but no longer matching stays spent.
    static func spend(_ tx: PGConnection, _ purpose: Purpose, token: String) throws -> Spent? {
        guard let row = try tx.query("""
            UPDATE accounts.email_tokens t SET used_at = now()
            WHERE t.token_hash = $1 AND t.purpose = $2 AND t.used_at IS NULL AND t.expires_at > now()
            RETURNING t.account_id, t.email,
                EXISTS (SELECT 1 FROM accounts.accounts a WHERE a.id = t.account_id AND a.deleted_at IS NULL AND lower(a.email) = lower(t.email)) AS current
            """, [hash(token), purpose]).first, try row.decode("current", as: Bool.self) else { return nil }
        return Spent(account: try row.decode("account_id"), email: try row.decode("email"))
    }

    /// Whether a token of `purpose` is unused and unexpired (without spending it).
    static func usable(_ c: PGConnection, _ purpose: Purpose, token: String) throws -> Bool {
        try c.query("""
            SELECT 1 FROM accounts.email_tokens WHERE token_hash = $1 AND purpose = $2 AND used_at IS NULL AND expires_at > now()
            """, [hash(token), purpose]).first != nil
    }

    /// Every other unused token of `purpose` of the account stops working (a reset was done).
    static func retire(_ tx: PGConnection, _ purpose: Purpose, account: UUID) throws {
        try tx.query("UPDATE accounts.email_tokens SET used_at = now() WHERE account_id = $1 AND purpose = $2 AND used_at IS NULL",
                     [account, purpose])
    }
}
