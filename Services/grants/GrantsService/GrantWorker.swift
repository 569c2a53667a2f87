import Foundation
import Shared
import Synchronization

/// Turns stored grants into provider calls and outcomes: calls the provider (at its rate),
/// records success or permanent failure with its webhooks in one transaction, tells coupons
/// (retrying until it confirms), publishes the event; retries the rest with backoff.
final class GrantWorker: Sendable {
    let pool: PGPool
    let logger: Logger
    let metrics: MetricsRegistry
    let coupons: BusClient
    let events: EventPublisher
    let providers: [String: any EntitlementProvider]
    let limiters: [String: RateLimiter]
    let retry: RetryPolicy
    private let wake = Mutex<CheckedContinuation<Void, Never>?>(nil)
    private let nudged = Atomic<Bool>(false)
    /// How long a claimed grant stays leased to this worker (longer than one provider call).
    let lease: TimeInterval

    init(pool: PGPool, logger: Logger, metrics: MetricsRegistry, coupons: BusClient, events: EventPublisher,
         providers: [String: any EntitlementProvider], limiters: [String: RateLimiter], retry: RetryPolicy, lease: TimeInterval) {
        self.pool = pool
        self.logger = logger
        self.metrics = metrics
        self.coupons = coupons
        self.events = events
        self.providers = providers
        self.limiters = limiters
        self.retry = retry
        self.lease = lease
    }

    func nudge() {
        nudged.store(true, ordering: .releasing)
        wake.withLock { w in
            w?.resume()
            w = nil
        }
    }

    func run() async {
        while !Task.isCancelled {
            nudged.store(false, ordering: .releasing)
            var worked = 0
            do {
                let due = try await pool.withConnection { [lease] in try GrantLedger.claimDue($0, limit: 200, lease: lease) }
                let unnotified = try await pool.withConnection { try GrantLedger.claimUnnotified($0, limit: 200, lease: 5) }
                worked = due.count + unnotified.count
                await withTaskGroup(of: Void.self) { group in
                    for g in due { group.addTask { await self.process(g) } }
                    for g in unnotified { group.addTask { await self.notifyCoupons(g) } }
                }
            } catch {
                logger.warning("grant pass failed", ["error": String(describing: error)])
            }
            if worked == 0 { await sleep(.milliseconds(500)) }
        }
    }

    private func sleep(_ d: Duration) async {
        if nudged.load(ordering: .acquiring) { return }
        let timer = Task {
            guard (try? await Task.sleep(for: d)) != nil else { return }
            self.nudge()
        }
        await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
            let now = wake.withLock { w -> Bool in
                if nudged.load(ordering: .acquiring) { return true }
                w = cont
                return false
            }
            if now { cont.resume() }
        }
        timer.cancel()
    }

    func process(_ g: Grant) async {
        guard let provider = providers[g.provider] else {
            logger.error("grant names an unknown provider", ["redemption.id": g.redemptionId.uuidString.lowercased(), "provider": g.provider])
            return
        }
        await limiters[g.provider]?.acquire()
        let outcome = await provider.grant(appUserId: g.appUserId, entitlementId: g.entitlementId, endTimeMs: g.endTimeMs)
        let id = g.redemptionId.uuidString.lowercased()
        do {
            switch outcome {
            case .granted:
                let settled = try await pool.transaction { tx in
                    guard try GrantLedger.settle(tx, g, succeeded: true, reason: nil) else { return false }
                    try Webhooks.enqueue(tx, type: "coupon.redeemed", redemption: g.redemptionId, data: WebhookData(g, status: "completed", reason: nil), sandbox: g.command.sandbox)
                    return true
                }
                if settled {
                    metrics.increment("redeem_grants_total", help: "Grant attempts by outcome.", labels: ["outcome": "succeeded"])
                    logger.info("grant succeeded", ["redemption.id": id, "provider": g.provider])
                }
                await notifyCoupons(g.settled(status: "succeeded", reason: nil))
            case .fail(let reason):
                let settled = try await pool.transaction { tx in
                    guard try GrantLedger.settle(tx, g, succeeded: false, reason: reason) else { return false }
                    try Webhooks.enqueue(tx, type: "redemption.failed", redemption: g.redemptionId, data: WebhookData(g, status: "failed", reason: reason), sandbox: g.command.sandbox)
                    return true
                }
                if settled {
                    metrics.increment("redeem_grants_total", help: "Grant attempts by outcome.", labels: ["outcome": "failed"])
                    logger.warning("grant failed for good", ["redemption.id": id, "provider": g.provider, "reason": reason])
                }
                await notifyCoupons(g.settled(status: "failed", reason: reason))
            case .retry(let after, let reason):
                let delay = retry.delay(afterAttempt: g.attempts, retryAfter: after, random: Double.random(in: 0..<1))
                try await pool.withConnection { try GrantLedger.retryLater($0, g, after: delay, reason: reason) }
                metrics.increment("redeem_grants_total", help: "Grant attempts by outcome.", labels: ["outcome": "retried"])
                logger.info("grant will be retried", ["redemption.id": id, "reason": reason, "retry.seconds": delay])
            }
        } catch {
            logger.warning("grant outcome not recorded; the lease will expire and it is retried", ["redemption.id": id, "error": String(describing: error)])
        }
    }

    /// Tells coupons the outcome (complete, or fail and give the use back), then wakes waiters.
    func notifyCoupons(_ g: Grant) async {
        do {
            if g.status == "succeeded" {
                _ = try await coupons.request(Coupons.Complete(redemptionId: g.redemptionId,
                                                               entitlement: .init(entitlementId: g.entitlementId, expiresAt: g.endTime)))
            } else {
                _ = try await coupons.request(Coupons.Release(redemptionId: g.redemptionId, reason: g.failureReason ?? "the grant failed"))
            }
            try await pool.withConnection { try GrantLedger.markNotified($0, g.redemptionId) }
            events.publish(RedemptionSettled(redemptionId: g.redemptionId, status: g.status == "succeeded" ? "completed" : "failed"))
        } catch {
            logger.info("coupons not told yet; will retry", ["redemption.id": g.redemptionId.uuidString.lowercased(), "error": String(describing: error)])
        }
    }
}

extension Grant {
    func settled(status: String, reason: String?) -> Grant {
        Grant(redemptionId: redemptionId, appUserId: appUserId, entitlementId: entitlementId, provider: provider, endTime: endTime,
              status: status, attempts: attempts, failureReason: reason, command: command)
    }
}

/// Webhook `data`: the redemption (SPEC §4.3) plus who made it and the public coupon.
struct WebhookData: Encodable {
    var redemptionId: UUID
    var code: String
    var status: String
    var platform: String
    var productId: String?
    var pricePaid: Money?
    var sandbox: Bool
    var reservedAt: Date
    var completedAt: Date?
    var failureReason: String?
    var entitlement: RedemptionView.Entitlement?
    var accountId: UUID
    var appUserId: String
    var coupon: PublicCoupon

    init(_ g: Grant, status: String, reason: String?) {
        let c = g.command
        redemptionId = c.redemptionId
        code = c.coupon.code
        self.status = status
        platform = c.platform
        productId = c.productId
        pricePaid = nil
        sandbox = c.sandbox
        reservedAt = c.reservedAt
        completedAt = status == "completed" ? Date() : nil
        failureReason = reason
        entitlement = status == "completed" ? .init(entitlementId: g.entitlementId, expiresAt: g.endTime) : nil
        accountId = c.accountId
        appUserId = c.appUserId
        coupon = c.coupon
    }

    init(_ r: RedemptionView, coupon: PublicCoupon) {
        redemptionId = r.redemptionId; code = r.code; status = r.status; platform = r.platform; productId = r.productId
        pricePaid = r.pricePaid; sandbox = r.sandbox; reservedAt = r.reservedAt; completedAt = r.completedAt
        failureReason = r.failureReason; entitlement = r.entitlement; accountId = r.accountId; appUserId = r.appUserId
        self.coupon = coupon
    }
}
