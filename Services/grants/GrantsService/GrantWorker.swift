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
    /// Rung when there is work: grants handed over, a call ended, a stop.
    private let bell = Doorbell()
    /// Grants stored leased to this worker, to call without claiming them from the table.
    private let handed = Mutex<[Grant]>([])
    /// Provider calls under way, and the decisions on those that have ended but are not recorded
    /// yet. A pass does not wait for a slow call: it records what has ended and goes on.
    private let calls = Mutex<(running: Set<UUID>, ended: [(Grant, GrantDecision)])>(([], []))
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
        bell.ring()
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
            await Periodic(every: .milliseconds(500), doorbell: bell).poll { () async -> Periodic.Next in
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
                let decisions = calls.withLock { c in defer { c.ended.removeAll() }; return c.ended }
                // Recorded first, then told. A crash in between leaves the settled grants unnotified:
                // they are claimed again once their 5 s notification lease ends, and coupons is told
                // again (a repeated completion answers the first completion time).
                let settled = await record(decisions)
                let confirmed = Set(await confirmCompleted(settled.filter { $0.status == .succeeded }).map(\.redemptionId))
                let told = settled.filter { !confirmed.contains($0.redemptionId) } + unnotified
                await telling?.value
                telling = told.isEmpty ? nil : Task { await self.notifyCoupons(told) }
                return due.isEmpty && unnotified.isEmpty && decisions.isEmpty ? .pause : .again
            }
        }
    }

    /// A call has ended: the rules decide what comes of it (`GrantDecision.decide`), to be recorded
    /// by the pass.
    private func ended(_ g: Grant, _ answer: ProviderAnswer) {
        let decision = GrantDecision.decide(answer, attempt: g.attempts, policy: retry, random: Double.random(in: 0..<1))
        if decision == .leave {
            logger.error("grant names an unknown provider", ["redemption.id": g.redemptionId.lowercasedString, "provider": g.provider])
        }
        let wake = calls.withLock { c in
            c.running.remove(g.redemptionId)
            if decision != .leave { c.ended.append((g, decision)) }
            return c.running.isEmpty || !gathering.load(ordering: .acquiring)
        }
        if wake { nudge() }
    }

    /// Waits until every call under way has ended, or `gatherWindow` has passed.
    private func gather() async {
        gathering.store(true, ordering: .releasing)
        defer { gathering.store(false, ordering: .releasing) }
        let deadline = ContinuousClock.now + Self.gatherWindow
        while !calls.withLock({ $0.running.isEmpty }) {
            let left = deadline - ContinuousClock.now
            guard left > .zero, !Task.isCancelled else { return }
            await bell.wait(timeout: left)
        }
    }

    /// Calls the grant's provider (after waiting for its rate limiter).
    func call(_ g: Grant) async -> ProviderAnswer {
        guard let provider = providers[g.provider] else { return .unknownProvider }
        await limiters[g.provider]?.acquire()
        return await LogContext.$trace.withValue(g.traceparent.flatMap(TraceContext.init(traceparent:))) {
            await provider.grant(appUserId: g.appUserId, entitlementId: g.entitlementId, endTimeMs: g.endTimeMs)
        }
    }

    /// Records decisions in one transaction: successes and permanent failures settle (failures with
    /// their webhook deliveries), the rest are scheduled again. Answers the grants it settled, none
    /// of them told to coupons yet. If the transaction fails, nothing is recorded and the leases
    /// expire, so the grants are retried with the same `end_time_ms`.
    func record(_ decisions: [(Grant, GrantDecision)]) async -> [Grant] {
        guard !decisions.isEmpty else { return [] }
        do {
            let (settled, retried) = try await pool.transaction { tx -> ([Grant], Int) in
                var settled: [Grant] = []
                var retried = 0
                let succeeded = decisions.filter { $0.1 == .succeed }.map(\.0)
                let done = try GrantLedger.settleSucceeded(tx, succeeded.map(\.redemptionId))
                for g in succeeded where done.contains(g.redemptionId) {
                    settled.append(g.settled(status: .succeeded, reason: nil))
                }
                for (g, decision) in decisions {
                    switch decision {
                    case .succeed, .leave:
                        continue
                    case .fail(let reason):
                        guard try GrantLedger.settle(tx, g, succeeded: false, reason: reason) else { continue }
                        try Webhooks.enqueue(
                            tx, type: .redemptionFailed, redemption: g.redemptionId,
                            data: WebhookData(g, status: .failed, reason: reason), mode: g.command.couponMode,
                            app: DefaultApp.of(g.command.app))
                        settled.append(g.settled(status: .failed, reason: reason))
                    case .retry(let after, let reason):
                        try GrantLedger.retryLater(tx, g, after: after, reason: reason)
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
                    try Webhooks.enqueue(
                        tx, type: .couponRedeemed, redemption: g.redemptionId,
                        data: WebhookData(
                            g, status: .completed, reason: nil,
                            completedAt: completedAt[g.redemptionId.uppercasedString] ?? Date()),
                        mode: g.command.couponMode, app: DefaultApp.of(g.command.app))
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

/// Webhook `data` of a redemption (`RedemptionEventData`): the redemption (with who made it) plus
/// the public coupon.
typealias WebhookData = RedemptionEventData

extension RedemptionEventData {
    init(_ g: Grant, status: RedemptionStatus, reason: String?, completedAt: Date? = nil) {
        let c = g.command
        self.init(
            RedemptionView(
                redemptionId: c.redemptionId, code: c.coupon.code, status: status, platform: c.platform,
                productId: c.productId, pricePaid: nil, sandbox: c.sandbox, reservedAt: c.reservedAt,
                completedAt: status == .completed ? completedAt ?? Date() : nil, failureReason: reason,
                entitlement: status == .completed ? .init(entitlementId: g.entitlementId, expiresAt: g.endTime) : nil,
                accountId: c.accountId, appUserId: c.appUserId),
            coupon: c.coupon)
    }
}
