import Bus
import Core
import Database
import Foundation
import Runtime
import Synchronization
import Telemetry

/// Coupons, validation, reservations, redemptions and caps (SPEC §4.2, §4.3). Owns schema `coupons`.
public final class CouponsService: BackendService {
    public static let name = "coupons"
    public static let migrator = Migrator(schema: "coupons", migrations: CouponsMigrations.all, functions: CouponsFunctions.all)

    let runtime: ServiceRuntime
    let config: CouponsConfig
    let relay: OutboxRelay
    /// Set once in init, after the closures it needs exist.
    private let batcherBox = Mutex<ReservationBatcher?>(nil)
    private let pusher: Pusher
    /// Read coalescing: concurrent validations of one code share one query.
    private let validations: Coalescer<Coupons.Validate, Coupons.Validate.Response>
    private let workers = Mutex<[Task<Void, Never>]>([])

    var pool: PGPool { runtime.pool }
    var logger: Logger { runtime.logger }

    public init(runtime: ServiceRuntime, env: Environment) throws {
        self.runtime = runtime
        config = try CouponsConfig(env: env)
        pusher = try Pusher(context: runtime.context, connect: config.grantCommands, logger: runtime.logger)
        relay = OutboxRelay(pool: runtime.pool, pusher: pusher, logger: runtime.logger)
        let pool = runtime.pool
        let metrics = runtime.metrics
        validations = Coalescer(maxBatch: 256) { requests in
            metrics.observe("redeem_validation_batch_size", help: "Validations answered together by one query.",
                            Double(requests.count), buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256])
            do {
                return try await pool.withConnection { try RedemptionStore.validateBatch($0, requests, now: Date()) }.map { .success($0) }
            } catch {
                return requests.map { _ in .failure(error) }
            }
        }
        let batcher = ReservationBatcher(pool: runtime.pool, reservationTTL: config.reservationTTL, logger: runtime.logger, metrics: runtime.metrics,
                                         resendAfter: relay.resendAfter, granted: { [relay] in relay.send($0) },
                                         single: { [weak self] req in
                                             guard let self else { throw ServiceError.unavailable }
                                             return try await self.redeemOne(req)
                                         })
        batcherBox.withLock { $0 = batcher }
        let depth = Mutex<Double>(0)
        runtime.metrics.gauge("redeem_outbox_depth", help: "Outbox messages not yet acknowledged by grants.") {
            [([:], depth.withLock { $0 })]
        }
        // Read by a background task, so a metrics scrape never waits on the database.
        let sampler = Task {
            while !Task.isCancelled {
                if let n = try? await pool.withConnection({ try Outbox.depth($0) }) { depth.withLock { $0 = Double(n) } }
                try? await Task.sleep(for: .seconds(2))
            }
        }
        workers.withLock { $0.append(sampler) }
    }

    public func start() async throws {
        let sweeper = Task { [self] in
            while !Task.isCancelled {
                do {
                    let n = try await pool.withConnection { try RedemptionStore.releaseExpired($0) }
                    if n > 0 { logger.info("released expired reservations", ["coupons.released": n]) }
                } catch {
                    logger.warning("reservation sweep failed", ["error": String(describing: error)])
                }
                try? await Task.sleep(for: config.sweepInterval)
            }
        }
        let relayTask = Task { [relay] in await relay.run() }
        workers.withLock { $0 += [sweeper, relayTask] }
    }

    public func stop() async {
        workers.withLock { $0.forEach { $0.cancel() } }
        relay.nudge()
        pusher.stop()
    }

    public func router() -> BusRouter {
        var r = BusRouter(logger: logger)
        r.on(Coupons.Create.self) { [self] req, _ in try await create(req) }
        r.on(Coupons.List.self) { [self] req, _ in
            try await pool.withConnection { try CouponStore.list($0, mode: Mode.of(req.mode), active: req.active, limit: req.limit, cursor: req.cursor) }
        }
        r.on(Coupons.Get.self) { [self] req, _ in try await pool.withConnection { try CouponStore.get($0, code: req.code, mode: Mode.of(req.mode)) } }
        r.on(Coupons.Patch.self) { [self] req, _ in try await pool.transaction { try CouponStore.patch($0, req, now: Date()) } }
        r.on(Coupons.Redemptions.self) { [self] req, _ in try await pool.withConnection { try RedemptionStore.page($0, req) } }
        r.on(Coupons.Validate.self) { [self] req, _ in try await validations.submit(req, key: Self.batchKey(req)) }
        r.on(Coupons.ValidateMany.self) { [self] req, _ in
            let validations = self.validations
            let results = await Self.perKey(req.items, key: Self.batchKey) { key, items in await validations.submitAll(items, key: key) }
            return .init(answers: try results.map { try $0.get() })
        }
        r.on(Coupons.RedeemMany.self) { [self] req, _ in .init(answers: await redeemMany(req.items)) }
        r.on(Coupons.Redeem.self) { [self] req, _ in try await redeem(req) }
        r.on(Coupons.GetRedemption.self) { [self] req, _ in
            // An end user reads their own redemptions of both modes; an operator its key's mode's.
            let mode = req.accountId == nil ? Mode.of(req.mode) : nil
            return try await pool.withConnection { try RedemptionStore.get($0, id: req.id, account: req.accountId, mode: mode) }
        }
        r.on(Coupons.MyRedemptions.self) { [self] req, _ in try await pool.withConnection { try RedemptionStore.forAccount($0, req) } }
        r.on(Coupons.Purchase.self) { [self] req, _ in
            let done = try await pool.transaction { try RedemptionStore.purchase($0, req) }
            relay.nudge()
            return done
        }
        r.on(OutboxAck.self) { [self] req, _ in
            try await pool.withConnection { try Outbox.ack($0, redemptions: req.redemptionIds, type: req.type) }
            return Empty()
        }
        r.on(Coupons.Release.self) { [self] req, _ in
            _ = try await pool.withConnection { try RedemptionStore.end($0, id: req.redemptionId, status: "failed", reason: req.reason) }
            return Empty()
        }
        r.on(Coupons.CompleteMany.self) { [self] req, _ in
            .init(completedAt: try await pool.withConnection { try RedemptionStore.completeMany($0, req.items) })
        }
        return r
    }

    func create(_ req: Coupons.Create) async throws -> CouponView {
        let now = Date()
        let d = try CouponRules.definition(req.input, defaultEntitlement: config.defaultEntitlement, now: now)
        try CouponRules.checkStoreLimits(d, now: now)
        let active = req.input.active ?? true
        if req.dryRun {
            // Everything a real creation checks, then rolled back.
            struct DryRun: Error {}
            do {
                try await pool.transaction { tx in
                    _ = try CouponStore.insert(tx, d, mode: req.mode, active: active, now: now)
                    throw DryRun()
                }
            } catch is DryRun {}
            return CouponStore.preview(d, mode: req.mode, active: active, now: now)
        }
        return try await pool.transaction { tx in
            _ = try CouponStore.insert(tx, d, mode: req.mode, active: active, now: now)
            return try CouponStore.get(tx, code: d.code, mode: req.mode)
        }
    }

    func redeem(_ req: Coupons.Redeem) async throws -> Coupons.Redeem.Response {
        guard let batcher = batcherBox.withLock({ $0 }) else { return try await redeemOne(req).response() }
        return try await batcher.redeem(req).response()
    }

    /// Reservations that came in one message: each code's join that code's queue together.
    func redeemMany(_ items: [Coupons.Redeem]) async -> [BatchAnswer<Coupons.Redeem.Response>] {
        guard let batcher = batcherBox.withLock({ $0 }) else {
            var answers: [BatchAnswer<Coupons.Redeem.Response>] = []
            for req in items {
                do { answers.append(BatchAnswer(.success(try await redeem(req)))) } catch { answers.append(BatchAnswer(.failure(error))) }
            }
            return answers
        }
        let results = await Self.perKey(items, key: Self.batchKey) { key, items -> [Result<Coupons.Redeem.Response, any Error>] in
            var outcomes = await batcher.redeemAll(items, key: key).makeIterator()
            return items.map { _ in
                let outcome = outcomes.next() ?? .failure(ServiceError.internal)  // one per request, by `submitAll`
                return outcome.flatMap { outcome in Result { try outcome.response() } }
            }
        }
        for case .failure(let error) in results where !(error is ServiceError) {
            // Answered as `internal`, like a single request's unexpected failure, and logged as one.
            logger.error("reservation failed", ["bus.type": Coupons.RedeemMany.type, "error": String(describing: error)])
        }
        return results.map { BatchAnswer($0) }
    }

    /// The batch a validation or reservation joins: its code and environment, which pick one coupon.
    static func batchKey(_ v: Coupons.Validate) -> String { Coupons.batchKey(code: v.code, sandbox: v.sandbox ?? false) }
    static func batchKey(_ r: Coupons.Redeem) -> String { Coupons.batchKey(code: r.code, sandbox: r.sandbox) }

    /// Runs `work` once per batch key over that key's items, in parallel when there are several,
    /// and answers each item's result in its place.
    static func perKey<Item: Sendable, Output: Sendable>(
        _ items: [Item], key: (Item) -> String,
        _ work: @escaping @Sendable (String, [Item]) async -> [Result<Output, any Error>]
    ) async -> [Result<Output, any Error>] {
        var positions: [String: [Int]] = [:]
        for (i, item) in items.enumerated() { positions[key(item), default: []].append(i) }
        if positions.count == 1, let code = positions.keys.first { return await work(code, items) }
        var results = [Result<Output, any Error>](repeating: .failure(ServiceError.internal), count: items.count)
        await withTaskGroup(of: ([Int], [Result<Output, any Error>]).self) { group in
            for (code, indices) in positions {
                let mine = indices.map { items[$0] }
                group.addTask { (indices, await work(code, mine)) }
            }
            for await (indices, answers) in group {
                for (i, answer) in zip(indices, answers) { results[i] = answer }
            }
        }
        return results
    }

    /// One reservation in its own transaction (the batcher's fallback).
    func redeemOne(_ req: Coupons.Redeem) async throws -> RedemptionStore.Outcome {
        let ttl = config.reservationTTL
        // A concurrent twin of this request (same account and coupon) may win the unique index;
        // the loser's transaction rolls back whole and the retry answers the twin's redemption.
        for attempt in 0..<3 {
            do {
                let reservation = try await pool.transaction { tx in try RedemptionStore.redeem(tx, req, reservationTTL: ttl, now: Date()) }
                if reservation.grant != nil { relay.nudge() }
                return .init(redemption: reservation.redemption, created: reservation.created)
            } catch let r as RedemptionStore.Refusal {
                return .init(redemption: nil, created: false, refusal: r.reason)
            } catch let e as PGError where e.isUniqueViolation && e.constraint == "redemptions_one_active" && attempt < 2 {
                continue
            }
        }
        throw ServiceError.internal
    }
}
