import Bus
import Core
import Database
import Foundation
import Runtime
import Synchronization
import Telemetry

/// Turns stored grants into provider calls and outcomes: calls the provider (at its rate), records
/// outcomes in one transaction, then tells coupons (retrying until it confirms) and queues the
/// completions' webhooks, publishes the events; retries the rest with backoff.
///
/// An outcome is recorded before coupons hears of it. A client that reads a redemption `completed`
/// (from coupons) and then its entitlements (from this ledger) must find the grant there: told the
/// other way round, the entitlement was missing in 2 of 5 runs of exactly that sequence.
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
    /// Grants stored leased to this worker, to call without claiming them from the table.
    private let handed = Mutex<[Grant]>([])
    private let nudged = Atomic<Bool>(false)
    /// Provider calls under way, and the outcomes of those that have ended but are not recorded
    /// yet. A pass does not wait for a slow call: it records what has ended and goes on.
    private let calls = Mutex<(running: Set<UUID>, ended: [(Grant, ProviderOutcome)])>(([], []))
    /// Whether the pass is gathering the outcomes of the calls it started (only the last of them
    /// needs to wake it) rather than sleeping (every outcome wakes it).
    private let gathering = Atomic<Bool>(false)
    /// How long a pass waits for the calls it started before recording what has ended; slower
    /// calls are recorded by a later pass.
    static let gatherWindow = Duration.milliseconds(250)
    /// How long a claimed grant stays leased to this worker (longer than one provider call); a
    /// worker that dies leaves its grants to others once the lease is over.
    let lease: TimeInterval
    /// Grants claimed per pass: with a rate-limited provider, no more than the limiter lets through
    /// well within the lease (the rest stay unclaimed for other workers).
    let claimLimit: Int

    init(pool: PGPool, logger: Logger, metrics: MetricsRegistry, coupons: BusClient, events: EventPublisher,
         providers: [String: any EntitlementProvider], limiters: [String: RateLimiter], retry: RetryPolicy, lease: TimeInterval,
         claimLimit: Int) {
        self.pool = pool
        self.logger = logger
        self.metrics = metrics
        self.coupons = coupons
        self.events = events
        self.providers = providers
        self.limiters = limiters
        self.retry = retry
        self.lease = lease
        self.claimLimit = claimLimit
    }

    /// The lease a new grant of `provider` is stored with when this worker takes it at once: only
    /// for providers without a rate limit (a limited one could not be called before the lease ends).
    func leaseAtBirth(_ provider: String) -> TimeInterval? {
        limiters[provider] == nil && providers[provider] != nil ? lease : nil
    }

    /// Grants just stored, leased to this worker (see `leaseAtBirth`).
    func take(_ grants: [Grant]) {
        guard !grants.isEmpty else { return }
        handed.withLock { $0 += grants }
        nudge()
    }

    func nudge() {
        nudged.store(true, ordering: .releasing)
        wake.withLock { w in
            w?.resume()
            w = nil
        }
    }

    /// One pass: claim due grants and start their provider calls (concurrently, each at its
    /// rate); gather the outcomes that end within `gatherWindow` (all of them, when the provider
    /// answers in time), tell coupons of the completions (one request per batch), then record the
    /// outcomes in one transaction. A call still running after the window (a provider that hangs
    /// until its timeout) goes on and is recorded by a later pass, so it holds up no other grant.
    /// Failures, and completions coupons did not confirm, are told while the next pass runs (at
    /// most one batch is being told at a time).
    func run() async {
        await withDiscardingTaskGroup { group in
            var lastClaim = ContinuousClock.now
            var telling: Task<Void, Never>?
            defer { telling?.cancel() }
            while !Task.isCancelled {
                nudged.store(false, ordering: .releasing)
                // While grants are handed over, the table (retries, leases run out, other instances'
                // leftovers, unconfirmed notifications) is claimed from twice a second.
                let mine = handed.withLock { h in defer { h.removeAll() }; return h }
                var due = mine
                var unnotified: [Grant] = []
                if mine.isEmpty || ContinuousClock.now - lastClaim > .milliseconds(500) {
                    lastClaim = .now
                    do {
                        due += try await pool.withConnection { [lease, claimLimit] in try GrantLedger.claimDue($0, limit: claimLimit, lease: lease) }
                        unnotified = try await pool.withConnection { try GrantLedger.claimUnnotified($0, limit: 500, lease: 5) }
                    } catch {
                        // The grants handed over are still called; the table is tried again next pass.
                        logger.warning("claiming grants failed", ["error": String(describing: error)])
                    }
                }
                // A grant whose lease ran out while its call is still under way is not called twice.
                due = calls.withLock { c in due.filter { c.running.insert($0.redemptionId).inserted } }
                for g in due {
                    group.addTask { self.ended(g, await self.call(g)) }
                }
                if !due.isEmpty { await gather() }
                let outcomes = calls.withLock { c in defer { c.ended.removeAll() }; return c.ended }
                // Recorded first, then told. A crash in between leaves the settled grants unnotified:
                // they are claimed again once their 5 s notification lease ends, and coupons is told
                // again (a repeated completion answers the first completion time).
                let settled = await record(outcomes)
                let confirmed = Set(await confirmCompleted(settled.filter { $0.status == .succeeded }).map(\.redemptionId))
                let told = settled.filter { !confirmed.contains($0.redemptionId) } + unnotified
                await telling?.value
                telling = told.isEmpty ? nil : Task { await self.notifyCoupons(told) }
                if due.isEmpty && unnotified.isEmpty && outcomes.isEmpty { await sleep(.milliseconds(500)) }
            }
        }
    }

    /// A call has ended (nil: the grant names no provider this instance knows, and stays pending).
    private func ended(_ g: Grant, _ outcome: (Grant, ProviderOutcome)?) {
        let wake = calls.withLock { c in
            c.running.remove(g.redemptionId)
            if let outcome { c.ended.append(outcome) }
            return c.running.isEmpty || !gathering.load(ordering: .acquiring)
        }
        if wake { nudge() }
    }

    /// Waits until every call under way has ended, or `gatherWindow` has passed.
    private func gather() async {
        gathering.store(true, ordering: .releasing)
        defer { gathering.store(false, ordering: .releasing) }
        let deadline = ContinuousClock.now + Self.gatherWindow
        while true {
            nudged.store(false, ordering: .releasing)
            let now = ContinuousClock.now
            if now >= deadline || calls.withLock({ $0.running.isEmpty }) { return }
            await sleep(deadline - now)
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

    /// Calls the grant's provider (after waiting for its rate limiter).
    func call(_ g: Grant) async -> (Grant, ProviderOutcome)? {
        guard let provider = providers[g.provider] else {
            logger.error("grant names an unknown provider", ["redemption.id": g.redemptionId.lowercasedString, "provider": g.provider])
            return nil
        }
        await limiters[g.provider]?.acquire()
        return (g, await provider.grant(appUserId: g.appUserId, entitlementId: g.entitlementId, endTimeMs: g.endTimeMs))
    }

    /// Records outcomes in one transaction: successes and permanent failures settle (failures with
    /// their webhook deliveries), the rest are scheduled again. Answers the grants it settled, none
    /// of them told to coupons yet. If the transaction fails, nothing is recorded and the leases
    /// expire, so the grants are retried with the same `end_time_ms`.
    func record(_ outcomes: [(Grant, ProviderOutcome)]) async -> [Grant] {
        guard !outcomes.isEmpty else { return [] }
        let retry = self.retry
        do {
            let (settled, retried) = try await pool.transaction { tx -> ([Grant], Int) in
                var settled: [Grant] = []
                var retried = 0
                let succeeded = outcomes.filter { $0.1 == .granted }.map(\.0)
                let done = try GrantLedger.settleSucceeded(tx, succeeded.map(\.redemptionId))
                for g in succeeded where done.contains(g.redemptionId) {
                    settled.append(g.settled(status: .succeeded, reason: nil))
                }
                for (g, outcome) in outcomes {
                    switch outcome {
                    case .granted:
                        continue
                    case .fail(let reason):
                        guard try GrantLedger.settle(tx, g, succeeded: false, reason: reason) else { continue }
                        try Webhooks.enqueue(tx, type: .redemptionFailed, redemption: g.redemptionId,
                                             data: WebhookData(g, status: .failed, reason: reason), mode: g.command.couponMode)
                        settled.append(g.settled(status: .failed, reason: reason))
                    case .retry(let after, let reason):
                        try GrantLedger.retryLater(tx, g, after: retry.delay(afterAttempt: g.attempts, retryAfter: after, random: Double.random(in: 0..<1)), reason: reason)
                        retried += 1
                    }
                }
                return (settled, retried)
            }
            for g in settled {
                metrics.increment("redeem_grants_total", help: "Grant attempts by outcome.", labels: ["outcome": g.status == .succeeded ? "succeeded" : "failed"])
                if g.status != .succeeded {
                    logger.warning("grant failed for good", ["redemption.id": g.redemptionId.lowercasedString, "reason": g.failureReason ?? ""])
                }
            }
            if retried > 0 {
                metrics.increment("redeem_grants_total", help: "Grant attempts by outcome.", labels: ["outcome": "retried"], by: Double(retried))
                logger.info("grants will be retried", ["grants.retried": retried])
            }
            return settled
        } catch {
            logger.warning("grant outcomes not recorded; the leases will expire and they are retried", ["error": String(describing: error)])
            return []
        }
    }

    /// Tells coupons of completions, in one request per 500; answers the grants it confirmed and
    /// when coupons recorded each (by id, upper-case).
    func tellCompleted(_ grants: [Grant]) async -> (told: [Grant], completedAt: [String: Date]) {
        var told: [Grant] = []
        var completedAt: [String: Date] = [:]
        var start = 0
        while start < grants.count {
            let chunk = Array(grants[start..<min(start + 500, grants.count)])
            start += chunk.count
            do {
                let answer = try await coupons.request(Coupons.CompleteMany(items: chunk.map {
                    .init(redemptionId: $0.redemptionId, entitlement: .init(entitlementId: $0.entitlementId, expiresAt: $0.endTime))
                }))
                completedAt.merge(answer.completedAt ?? [:]) { first, _ in first }
                told += chunk
            } catch {
                logger.info("coupons not told yet; will retry", ["grants.count": chunk.count, "error": String(describing: error)])
            }
        }
        return (told, completedAt)
    }

    /// Tells coupons of settled completions, then, in one transaction, marks them told and queues
    /// their `coupon.redeemed` webhooks, which carry the `completedAt` coupons recorded so they match
    /// what the API shows (a repeat is queued once: the event's id is fixed). Publishes the events
    /// and answers the grants it confirmed; the others stay unnotified and are told again.
    @discardableResult
    func confirmCompleted(_ grants: [Grant]) async -> [Grant] {
        let (told, completedAt) = await tellCompleted(grants)
        guard !told.isEmpty else { return [] }
        do {
            try await pool.transaction { tx in
                try GrantLedger.markNotified(tx, told.map(\.redemptionId))
                guard try Webhooks.anyEndpoint(tx, type: .couponRedeemed) else { return }
                for g in told {
                    try Webhooks.enqueue(tx, type: .couponRedeemed, redemption: g.redemptionId,
                                         data: WebhookData(g, status: .completed, reason: nil,
                                                           completedAt: completedAt[g.redemptionId.uppercasedString] ?? Date()),
                                         mode: g.command.couponMode)
                }
            }
        } catch {
            logger.info("completions not marked told; coupons will be told again (harmless)", ["error": String(describing: error)])
            return []
        }
        publishSettled(told)
        return told
    }

    /// Tells coupons the outcomes of settled grants not told yet (completions as `confirmCompleted`
    /// does, failures one by one, which gives their uses back), marks them told, and publishes the
    /// events.
    func notifyCoupons(_ grants: [Grant]) async {
        await confirmCompleted(grants.filter { $0.status == .succeeded })
        var told: [Grant] = []
        for g in grants where g.status != .succeeded {
            do {
                _ = try await coupons.request(Coupons.Release(redemptionId: g.redemptionId, reason: g.failureReason ?? "the grant failed"))
                told.append(g)
            } catch {
                logger.info("coupons not told yet; will retry", ["redemption.id": g.redemptionId.lowercasedString, "error": String(describing: error)])
            }
        }
        guard !told.isEmpty else { return }
        let ids = told.map(\.redemptionId)
        do {
            try await pool.withConnection { try GrantLedger.markNotified($0, ids) }
        } catch {
            logger.info("notifications not marked; coupons will be told again (harmless)", ["error": String(describing: error)])
        }
        publishSettled(told)
    }

    /// The events that wake long polls, once coupons knows the outcome.
    func publishSettled(_ grants: [Grant]) {
        guard !grants.isEmpty else { return }
        events.publish(RedemptionsSettled(grants.map {
            RedemptionSettled(redemptionId: $0.redemptionId, status: $0.status == .succeeded ? .completed : .failed)
        }))
    }
}

extension Grant {
    func settled(status: GrantStatus, reason: String?) -> Grant {
        Grant(redemptionId: redemptionId, appUserId: appUserId, entitlementId: entitlementId, provider: provider, endTime: endTime,
              status: status, attempts: attempts, failureReason: reason, command: command)
    }
}

/// Webhook `data`: the redemption (SPEC §4.3, with who made it) plus the public coupon.
struct WebhookData: Encodable {
    var redemption: RedemptionView
    var coupon: PublicCoupon

    init(_ g: Grant, status: RedemptionStatus, reason: String?, completedAt: Date? = nil) {
        let c = g.command
        redemption = RedemptionView(
            redemptionId: c.redemptionId, code: c.coupon.code, status: status, platform: c.platform, productId: c.productId,
            pricePaid: nil, sandbox: c.sandbox, reservedAt: c.reservedAt, completedAt: status == .completed ? completedAt ?? Date() : nil,
            failureReason: reason, entitlement: status == .completed ? .init(entitlementId: g.entitlementId, expiresAt: g.endTime) : nil,
            accountId: c.accountId, appUserId: c.appUserId)
        coupon = c.coupon
    }

    init(_ r: RedemptionView, coupon: PublicCoupon) {
        redemption = r
        self.coupon = coupon
    }

    private enum Keys: String, CodingKey { case coupon }

    /// The redemption's own fields, and `coupon` beside them in the same object.
    func encode(to encoder: any Encoder) throws {
        try redemption.encode(to: encoder)
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(coupon, forKey: .coupon)
    }
}
