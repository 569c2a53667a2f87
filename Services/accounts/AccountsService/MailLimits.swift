import Core
import Cryptography
import Database
import Foundation
import Runtime

/// How much verification and reset mail one mailbox, and one client address, can cause
/// (docs/security.md, "Mail"). Kept in the database (`accounts.mail_limits`), so every gateway and
/// every accounts instance draws on one budget: a token bucket per key, refilled continuously,
/// taken from under the row's lock, so concurrent requests can't both take the last token.
struct MailLimits: Sendable {
    /// Mails per hour to one email address (the bucket holds as many).
    var perEmailPerHour: Int
    /// Mail requests per hour from one client address, to any addresses.
    var perClientPerHour: Int
    /// Off with `REDEEM_RATE_LIMITS=off`, like the gateway's limits.
    var enabled: Bool

    init(perEmailPerHour: Int = 5, perClientPerHour: Int = 20, enabled: Bool = true) {
        self.perEmailPerHour = perEmailPerHour
        self.perClientPerHour = perClientPerHour
        self.enabled = enabled
    }

    init(env: Environment) throws {
        enabled = try env.flag("REDEEM_RATE_LIMITS", default: true)
        perEmailPerHour = try env.int("REDEEM_LIMIT_MAIL_PER_HOUR", default: 5, range: 1...10_000)
        perClientPerHour = try env.int("REDEEM_LIMIT_MAIL_PER_ADDRESS_PER_HOUR", default: 20, range: 1...100_000)
    }

    /// The keys a mail request draws on: its recipient (lowercased, as emails are unique) and the
    /// client that asked. Stored as SHA-256, so the table does not list who asked for what.
    static func keys(email: String, client: String?) -> (email: PGBytes, client: PGBytes?) {
        func key(_ text: String) -> PGBytes { PGBytes(Data(Crypto.sha256(Array(text.utf8)))) }
        return (key("email:" + email.lowercased()), client.map { key("client:" + $0) })
    }

    /// Takes one mail from the email's and the client's budgets, in the caller's transaction; throws
    /// `rateLimited` with the seconds until the emptier one has a mail again (the transaction
    /// then rolls back, so neither is spent).
    func take(_ tx: PGConnection, email: String, client: String?) throws {
        guard enabled else { return }
        let keys = Self.keys(email: email, client: client)
        var waits: [Double] = []
        for (key, perHour) in [(keys.email, perEmailPerHour), (keys.client, perClientPerHour)] {
            guard let key else { continue }
            if let wait = try Self.take(tx, key: key, capacity: Double(perHour), perSecond: Double(perHour) / 3600) { waits.append(wait) }
        }
        if let wait = waits.max() {
            let seconds = max(1, Int(wait.rounded(.up)))
            throw ServiceError(.rateLimited, "too much mail asked for this address; try again in \(seconds) s", retryAfter: seconds)
        }
    }

    /// One bucket: nil if a token was taken, else the seconds until one is there.
    static func take(_ tx: PGConnection, key: PGBytes, capacity: Double, perSecond: Double) throws -> Double? {
        // `now()` is the transaction's start; one that waited for the row lock may start before the
        // holder's update, so time never runs backwards (greatest).
        let taken = try tx.query("""
            INSERT INTO accounts.mail_limits AS l (key, tokens, updated_at) VALUES ($1, $2::float8 - 1, now())
            ON CONFLICT (key) DO UPDATE
                SET tokens = least($2::float8, l.tokens + greatest(0, extract(epoch FROM now() - l.updated_at)::float8) * $3::float8) - 1,
                    updated_at = greatest(l.updated_at, now())
                WHERE least($2::float8, l.tokens + greatest(0, extract(epoch FROM now() - l.updated_at)::float8) * $3::float8) >= 1
            RETURNING tokens
            """, [key, capacity, perSecond])
        if taken.first != nil { return nil }
        let row = try tx.query("""
            SELECT (1 - least($2::float8, tokens + greatest(0, extract(epoch FROM now() - updated_at)::float8) * $3::float8)) / $3::float8 AS wait
            FROM accounts.mail_limits WHERE key = $1
            """, [key, capacity, perSecond]).first
        return try row?.decode("wait", as: Double.self) ?? 1
    }

    /// Forgets buckets untouched for a day (full again long since).
    static func prune(_ c: PGConnection) throws -> Int {
        try c.query("DELETE FROM accounts.mail_limits WHERE updated_at < now() - interval '1 day' RETURNING key").rows.count
    }
}
