import Core
import Database
import Foundation
import FoundationNetworking
import Outbound
import Runtime
import Telemetry

#if canImport(FoundationNetworking)
#endif

/// RevenueCat's receipts API for Stripe (docs/stripe.md): `POST {base}/v1/receipts` with
/// `{"app_user_id", "fetch_token": <subscription id>}`, the header `X-Platform: stripe`, and
/// the RevenueCat Stripe app's public key as the bearer (the project's: the environment's for the
/// default app, another app's from its `revenuecat` settings). RevenueCat then reads the subscription
/// from Stripe and gives its entitlements to the app user on every platform. Sending the same
/// subscription again is a repeat RevenueCat answers as the first.
struct RevenueCatStripeReceipts: Sendable {
    let base: URL
    let timeout: TimeInterval
    let session: URLSession

    init(base: URL, timeout: TimeInterval) {
        self.base = base
        self.timeout = timeout
        session = .outbound(timeout: timeout, connectionsPerHost: 8)
    }

    func send(subscriptionId: String, appUserId: String, key: String) async -> ProviderAnswer {
        let text = base.absoluteString.trimmingCharacters(in: CharacterSet(charactersIn: "/")) + "/v1/receipts"
        guard let url = URL(string: text),
            let body = try? JSONSerialization.data(
                withJSONObject: ["app_user_id": appUserId, "fetch_token": subscriptionId], options: [.sortedKeys])
        else { return .badURL }
        var req = URLRequest(url: url, timeoutInterval: timeout)
        req.httpMethod = "POST"
        req.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization")
        req.setValue("stripe", forHTTPHeaderField: "X-Platform")
        req.setValue("application/json", forHTTPHeaderField: "Content-Type")
        req.httpBody = body
        do {
            let (data, resp) = try await session.outboundData(for: req, dependency: "revenuecat")
            guard let http = resp as? HTTPURLResponse else { return .notHTTP }
            return .http(status: http.statusCode, retryAfter: http.value(forHTTPHeaderField: "Retry-After"), body: data)
        } catch {
            return .unreachable
        }
    }
}

/// Sends the receipts of completed Stripe checkouts (`grants.stripe_receipts`, and another app's
/// `grants.stripe_app_receipts`) to RevenueCat:
/// stored in the transaction that takes coupons' completion notice (so once per subscription,
/// whatever coupons' outbox sends again), then claimed with a lease, sent, and settled as grants
/// are (`GrantDecision`: retried with backoff on 429, 5xx and no answer). A grants killed between
/// the notice and the call finds the receipt due again after its restart.
final class StripeReceiptWorker: Sendable {
    struct Receipt: Sendable, Equatable {
        let subscriptionId: String
        let appUserId: String
        let attempts: Int
        var app: UUID = DefaultApp.id
        var mode: Mode = .live
    }

    let pool: PGPool
    let logger: Logger
    let receipts: RevenueCatStripeReceipts
    /// The default app's RevenueCat Stripe key (`REDEEM_REVENUECAT_STRIPE_PUBLIC_KEY`).
    let defaultKey: String?
    let retry: RetryPolicy
    let lease: TimeInterval
    private let bell = Doorbell()

    init(
        pool: PGPool, logger: Logger, receipts: RevenueCatStripeReceipts, defaultKey: String?, retry: RetryPolicy,
        lease: TimeInterval
    ) {
        self.pool = pool
        self.logger = logger
        self.receipts = receipts
        self.defaultKey = defaultKey
        self.retry = retry
        self.lease = lease
    }

    func nudge() { bell.ring() }

    /// Stores the receipt of a completed checkout; a repeat changes nothing. Without the
    /// RevenueCat Stripe key there is nobody to tell, and nothing is stored: the environment's for
    /// the default app, for another app the `stripePublicKey` of its `revenuecat` settings of
    /// the coupon's mode (docs/apps.md).
    func store(_ tx: PGConnection, _ receipt: StripeReceipt, redemption: UUID, mode: Mode, app: UUID) throws {
        if app == DefaultApp.id {
            guard defaultKey != nil else { return }
        } else {
            guard try Self.appKey(tx, app: app, mode: mode) != nil else { return }
        }
        if app == DefaultApp.id {
            try tx.query(
                """
                INSERT INTO grants.stripe_receipts (subscription_id, redemption_id, app_user_id, mode)
                VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING
                """, [receipt.subscriptionId, redemption, receipt.appUserId, mode.rawValue])
        } else {
            try tx.query(
                """
                INSERT INTO grants.stripe_app_receipts (subscription_id, redemption_id, app_user_id, mode, app_id)
                VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING
                """, [receipt.subscriptionId, redemption, receipt.appUserId, mode.rawValue, app])
        }
    }

    /// Where an app's receipts are kept: the default app's in `stripe_receipts`, another app's in
    /// `stripe_app_receipts` (which the previous release's pods do not read).
    static func table(_ app: UUID) -> String {
        app == DefaultApp.id ? "grants.stripe_receipts" : "grants.stripe_app_receipts"
    }

    /// Another app's RevenueCat Stripe key in a mode: the `stripePublicKey` of its `revenuecat`
    /// settings (not secret: nothing is opened); nil when it has none.
    static func appKey(_ c: PGConnection, app: UUID, mode: Mode) throws -> String? {
        try AppCredentials.list(c, app: app, mode: mode).first { $0.provider == .revenueCat }?.stripePublicKey
    }

    func run() async {
        await Periodic(every: .seconds(1), doorbell: bell).poll { () async -> Periodic.Next in
            let due: [Receipt]
            do {
                due = try await pool.withConnection { [lease] in try Self.claim($0, limit: 50, lease: lease) }
            } catch {
                logger.warning("claiming Stripe receipts failed", ["error": String(describing: error)])
                return .pause
            }
            for r in due {
                let decision: GrantDecision
                if let key = await key(of: r) {
                    let answer = await receipts.send(subscriptionId: r.subscriptionId, appUserId: r.appUserId, key: key)
                    decision = GrantDecision.decide(
                        answer, attempt: r.attempts, policy: retry, random: Double.random(in: 0..<1))
                } else {
                    // The key was removed since: the receipt waits until it is set again.
                    decision = .retry(after: lease, reason: "no RevenueCat Stripe key is set for this app and mode")
                }
                do {
                    try await pool.withConnection { try Self.record($0, r, decision) }
                } catch {
                    logger.warning(
                        "a Stripe receipt's outcome was not recorded; it is sent again",
                        ["error": String(describing: error)])
                }
                if case .fail(let reason) = decision {
                    logger.warning("RevenueCat refused a Stripe receipt", ["reason": reason])
                }
            }
            return due.isEmpty ? .pause : .again
        }
    }

    /// The bearer of a receipt: the environment's key for the default app, the app's own otherwise.
    private func key(of r: Receipt) async -> String? {
        guard r.app != DefaultApp.id else { return defaultKey }
        return try? await pool.withConnection { c in try Self.appKey(c, app: r.app, mode: r.mode) }
    }

    /// Leases the receipts due, the default app's then other apps': `next_attempt_at` moves past
    /// the lease, so another instance (or this one after a restart) takes one only once its lease
    /// has run out.
    static func claim(_ c: PGConnection, limit: Int, lease: TimeInterval) throws -> [Receipt] {
        var due: [Receipt] = []
        for table in ["grants.stripe_receipts", "grants.stripe_app_receipts"] where due.count < limit {
            let app = table == "grants.stripe_receipts" ? "NULL::uuid" : "app_id"
            due += try c.query(
                """
                UPDATE \(table) SET attempts = attempts + 1, next_attempt_at = now() + make_interval(secs => $2)
                WHERE subscription_id IN (
                    SELECT subscription_id FROM \(table) WHERE status = 'pending' AND next_attempt_at <= now()
                    ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED
                )
                RETURNING subscription_id, app_user_id, attempts, \(app) AS app_id, mode
                """, [limit - due.count, lease]
            ).rows.map {
                Receipt(
                    subscriptionId: try $0.decode("subscription_id"), appUserId: try $0.decode("app_user_id"),
                    attempts: try $0.decode("attempts"), app: try $0.decodeIfPresent("app_id") ?? DefaultApp.id,
                    mode: Mode(rawValue: try $0.decode("mode")) ?? .live)
            }
        }
        return due
    }

    static func record(_ c: PGConnection, _ r: Receipt, _ decision: GrantDecision) throws {
        switch decision {
        case .succeed:
            try c.query(
                """
                UPDATE \(table(r.app)) SET status = 'sent', settled_at = now(), last_error = NULL WHERE subscription_id = $1
                """, [r.subscriptionId])
        case .fail(let reason):
            try c.query(
                """
                UPDATE \(table(r.app)) SET status = 'failed', settled_at = now(), last_error = $2 WHERE subscription_id = $1
                """, [r.subscriptionId, reason])
        case .retry(let after, let reason):
            try c.query(
                """
                UPDATE \(table(r.app)) SET next_attempt_at = now() + make_interval(secs => $2), last_error = $3
                WHERE subscription_id = $1
                """, [r.subscriptionId, after, reason])
        case .leave:
            break
        }
    }
}
