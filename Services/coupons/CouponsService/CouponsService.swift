import Backend
import Bus
import Core
import Cryptography
import Database
import Foundation
import Runtime
import Synchronization
import Telemetry

/// Coupons, validation, reservations, redemptions and caps. Owns schema `coupons`.
public final class CouponsService: BackendService {
    public static let name = "coupons"
    public static let migrator = Migrator(schema: "coupons", migrations: CouponsMigrations.all, functions: CouponsFunctions.all)

    let runtime: ServiceRuntime
    let config: CouponsConfig
    let relay: OutboxRelay
    /// Seals the CSV of new unique codes until its download, under `REDEEM_SECRET_KEY`.
    let keyring: SecretKeyring
    private let batcher: ReservationBatcher
    private let pusher: Pusher
    /// Grants' requests: which store settings another app has (`AppStores.List`).
    private let grants: BusClient
    /// Read coalescing: concurrent validations of one code share one query.
    private let validations: Coalescer<Coupons.Validate, Coupons.Validate.Response>
    /// Outbox messages not yet acknowledged, as last sampled (`redeem_outbox_depth`).
    private let outboxDepth = Mutex<Outbox.Backlog>(.init(depth: 0, oldestSeconds: 0))
    /// Store offers by store and state, and redemptions by status and platform, as last sampled.
    private let figures = Mutex<Figures>(([], []))
    typealias Figures = (offers: [(MetricsRegistry.Labels, Double)], redemptions: [(MetricsRegistry.Labels, Double)])

    var pool: PGPool { runtime.pool }
    var logger: Logger { runtime.logger }

    public init(runtime: ServiceRuntime, env: Environment) throws {
        self.runtime = runtime
        config = try CouponsConfig(env: env)
        keyring = try SecretKeyring(env: env)
        pusher = try Pusher(bus: runtime.bus, service: "grants", connect: config.grantCommands, logger: runtime.logger)
        grants = try BusClient(bus: runtime.bus, service: "grants", connect: config.grantsBus, metrics: runtime.metrics)
        relay = OutboxRelay(pool: runtime.pool, pusher: pusher, logger: runtime.logger)
        let pool = runtime.pool
        let metrics = runtime.metrics
        let stores = config.stores
        let appleAppIds = AppleAppIds(grants: grants, logger: runtime.logger)
        validations = Coalescer(maxBatch: 256) { requests in
            metrics.observe("redeem_validation_batch_size", help: "Validations answered together by one query.",
                            Double(requests.count), buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256])
            do {
                return try await appleAppIds.running(app: requests[0].app, stores) { stores in
                    try await pool.withConnection {
                        try RedemptionStore.validateBatch($0, requests, stores: stores, now: Date())
                    }
                }.map { .success($0) }
            } catch {
                return requests.map { _ in .failure(error) }
            }
        }
        batcher = ReservationBatcher(
            pool: runtime.pool, reservationTTL: config.reservationTTL, stores: stores, appleAppIds: appleAppIds,
            logger: runtime.logger, metrics: runtime.metrics, resendAfter: relay.resendAfter,
            granted: { [relay] in relay.send($0) })
        runtime.metrics.gauge("redeem_outbox_depth", help: "Outbox messages not yet acknowledged by grants.") { [self] in
            [([:], Double(outboxDepth.withLock { $0.depth }))]
        }
        runtime.metrics.gauge(
            "redeem_outbox_oldest_age_seconds",
            help: "Age of the oldest outbox message grants has not acknowledged (0: none)."
        ) { [self] in
            [([:], outboxDepth.withLock { $0.oldestSeconds })]
        }
        runtime.metrics.gauge("redeem_store_offers", help: "Store offers (App Store, Google Play) by store and state.") { [self] in
            figures.withLock { $0.offers }
        }
        runtime.metrics.gauge(
            "redeem_redemptions", help: "Redemptions in the database by status and platform (each instance counts all)."
        ) {
            [self] in figures.withLock { $0.redemptions }
        }
    }

    public func workers() -> [any Service] {
        let relay = self.relay
        // Read by a worker of its own, so a metrics scrape never waits on the database.
        let sampler = Worker("outbox depth") { [self] in
            await Periodic(every: .seconds(2)).run {
                if let backlog = try? await pool.withConnection({ try Outbox.backlog($0) }) {
                    outboxDepth.withLock { $0 = backlog }
                }
            }
        }
        let figures = Worker("business figures") { [self] in
            await Periodic(every: .seconds(15)).run {
                guard let sampled = try? await pool.withConnection({ try Self.figures($0) }) else { return }
                self.figures.withLock { $0 = sampled }
            }
        }
        let sweeper = Worker("reservation sweeper") { [self] in
            await Periodic(every: config.sweepInterval).run {
                do {
                    let n = try await pool.withConnection { try RedemptionStore.releaseExpired($0) }
                    if n > 0 { logger.info("released expired reservations", ["coupons.released": n]) }
                    let off = try await pool.withConnection { try StoreOffers.switchOffExpired($0) }
                    if off > 0 { logger.info("switching off the store offers of expired coupons", ["coupons.offers": off]) }
                    let on = try await pool.withConnection { try StoreOffers.switchOnReopened($0) }
                    if on > 0 { logger.info("switching back on the store offers of coupons that take uses again", ["coupons.offers": on]) }
                    if off + on > 0 { relay.nudge() }
                    _ = try await pool.withConnection { try StorePurchases.forgetOldNotifications($0) }
                    _ = try await pool.withConnection { try UniqueCodeStore.forgetExpired($0) }
                    _ = try await pool.withConnection { try RedemptionExportStore.forgetExpired($0) }
                } catch {
                    logger.warning("reservation sweep failed", ["error": String(describing: error)])
                }
            }
        }
        return [sampler, figures, sweeper, Worker("outbox relay") { await relay.run() }]
    }

    /// What `redeem_store_offers` and `redeem_redemptions` show: a grouped count of the offers, and
    /// the redemptions' counts as they are kept.
    static func figures(_ c: PGConnection) throws -> Figures {
        let offers = try c.query("SELECT store, state, count(*) AS n FROM coupons.store_offers GROUP BY store, state").rows.map { row in
            (
                ["store": try row.decode("store", as: String.self),
                 "state": try row.decode("state", as: String.self)],
             Double(try row.decode("n", as: Int.self)))
        }
        // Kept as redemptions change (migration 027), not counted anew: the table only grows.
        let redemptions = try c.query("SELECT status, platform, n FROM coupons.fold_redemption_counts()").rows.map { row in
            (
                ["status": try row.decode("status", as: String.self),
                 "platform": try row.decode("platform", as: String.self)],
             Double(try row.decode("n", as: Int.self)))
        }
        return (offers, redemptions)
    }

    public func stop() async {
        pusher.stop()
    }

    public func router() -> BusRouter {
        var r = BusRouter(logger: logger)
        r.on(Coupons.Create.self) { [self] req, context in try await create(req, context) }
        r.on(Coupons.ForgetAccount.self) { [self] req, _ in
            .init(anonymised: try await pool.transaction { try RedemptionStore.forget($0, account: req.accountId) })
        }
        let stores = config.stores
        r.on(Coupons.List.self) { [self] req, _ in
            try await pool.withConnection {
                try CouponStore.list(
                    $0, mode: Mode.of(req.mode), app: DefaultApp.of(req.app), active: req.active,
                    limit: req.limit, cursor: req.cursor, stores: stores, now: Date())
            }
        }
        r.on(Coupons.Stats.self) { [self] req, _ in
            try await pool.withConnection {
                try RedemptionStatsReport.query(
                    $0, mode: req.mode, app: DefaultApp.of(req.app), days: req.days,
                    now: Date())
            }
        }
        r.on(Coupons.Get.self) { [self] req, _ in
            try await pool.withConnection { try CouponStore.get($0, code: req.code, mode: Mode.of(req.mode),
                app: DefaultApp.of(req.app), stores: stores, now: Date()) }
        }
        r.on(Coupons.Patch.self) { [self] req, context in
            let view = try await pool.transaction { tx in
                let mode = Mode.of(req.mode)
                let app = DefaultApp.of(req.app)
                guard try CouponStore.find(tx, code: req.code, mode: mode, app: app, lock: true) != nil else { throw CouponStore.notFound }
                let before = try CouponStore.get(tx, code: req.code, mode: mode, app: app, stores: stores, now: Date())
                let after = try CouponStore.patch(tx, req, stores: stores, now: Date())
                let deactivating = req.active == false && req.maxRedemptions == nil && req.expiresAt == nil && (req.removing ?? []).isEmpty
                    && req.name == nil && req.metadata == nil
                try Self.audit(
                    tx, req.actor, deactivating ? .couponDeactivate : .couponUpdate, after.code,
                    before: before, after: after, context, mode,
                               app: app)
                return after
            }
            if view.storeOffers != nil { relay.nudge() }  // switch-off commands, if it wrote any
            return view
        }
        addStoreRoutes(to: &r)
        addUniqueCodeRoutes(to: &r)
        r.on(Audit.ReadCoupons.self) { [self] req, _ in try await pool.withConnection { try AuditTable.read($0, schema: "coupons", req.query) } }
        r.on(Coupons.Redemptions.self) { [self] req, _ in try await pool.withConnection { try RedemptionStore.page($0, req) } }
        // One way in for each: a single request is a batch of one.
        r.on(Coupons.ValidateMany.self) { [self] req, _ in .init(answers: try await validate(req.items).map { try $0.get() }) }
        r.on(Coupons.Validate.self) { [self] req, _ in try await validate([req])[0].get() }
        r.on(Coupons.RedeemMany.self) { [self] req, context in .init(answers: await redeem(req.items, type: context.type).map(BatchAnswer.init)) }
        r.on(Coupons.Redeem.self) { [self] req, context in try await redeem([req], type: context.type)[0].get() }
        r.on(Coupons.GetRedemption.self) { [self] req, _ in
            // An end user reads their own redemptions of both modes; an operator its key's mode's.
            let mode = req.accountId == nil ? Mode.of(req.mode) : nil
            let app = req.accountId == nil ? DefaultApp.of(req.app) : nil
            return try await pool.withConnection {
                try RedemptionStore.get(
                    $0, id: req.id, account: req.accountId,
                    mode: mode, app: app)
            }
        }
        r.on(Coupons.MyRedemptions.self) { [self] req, _ in try await pool.withConnection { try RedemptionStore.forAccount($0, req) } }
        r.on(Coupons.Purchase.self) { [self] req, context in
            let done = try await pool.transaction { tx in
                let mode = Mode.of(req.mode)
                let before = try? RedemptionStore.get(tx, id: req.id, account: nil, mode: mode,
                    app: DefaultApp.of(req.app))
                let after = try RedemptionStore.purchase(tx, req)
                if before?.status != after.status {
                    try Self.audit(
                        tx, req.actor, .redemptionConfirm, after.redemptionId.uppercasedString,
                        before: before, after: after, context, mode,
                                   app: req.app)
                }
                return after
            }
            relay.nudge()
            return done
        }
        r.on(OutboxAck.self) { [self] req, _ in
            try await pool.withConnection { try Outbox.ack($0, redemptions: req.redemptionIds, type: req.type) }
            return Empty()
        }
        r.on(Coupons.GiveBack.self) { [self] req, _ in
            let answer = try await pool.transaction { try RedemptionStore.giveBack($0, req) }
            relay.nudge()  // offers switched back on, if the cap had switched them off
            return answer
        }
        r.on(Coupons.Release.self) { [self] req, _ in
            _ = try await pool.withConnection { try RedemptionStore.end($0, id: req.redemptionId, status: .failed, reason: req.reason) }
            return Empty()
        }
        r.on(Coupons.CompleteMany.self) { [self] req, _ in
            .init(completedAt: try await pool.withConnection { try RedemptionStore.completeMany($0, req.items) })
        }
        return r
    }

    func create(_ req: Coupons.Create, _ context: BusContext) async throws -> CouponView {
        let now = Date()
        let app = DefaultApp.of(req.app)
        let stores =
            try await app == DefaultApp.id ? config.stores : appStores(of: app, req.input, mode: req.mode, now: now)
        let d = try CouponRules.checked(
            req.input, defaultEntitlement: config.defaultEntitlement, stores: stores, now: now, mode: req.mode)
        let active = req.input.active ?? true
        if req.dryRun {
            // Everything a real creation checks, then rolled back; the Play offers it would make
            // are read from the plans on the way.
            struct DryRun: Error { var basePlans: [String: [String]] }
            var basePlans: [String: [String]] = [:]
            do {
                try await pool.transaction { tx in
                    _ = try CouponStore.create(tx, d, mode: req.mode, app: app, active: active, now: now)
                    let plans =
                        d.hasPlayOffers
                        ? try PlanStore.playBasePlans(
                            tx, productIds: d.productIds,
                            mode: req.mode, app: app) : [:]
                    throw DryRun(basePlans: plans.mapValues(\.basePlans))
                }
            } catch let dry as DryRun { basePlans = dry.basePlans }
            return CouponStore.preview(d, mode: req.mode, active: active, now: now, playBasePlans: basePlans)
        }
        let view = try await pool.transaction { tx in
            _ = try CouponStore.create(tx, d, mode: req.mode, app: app, active: active, now: now)
            let view = try CouponStore.get(tx, code: d.code, mode: req.mode, app: app, stores: stores, now: now)
            try Self.audit(
                tx, req.actor, .couponCreate, view.code, before: nil, after: view, context, req.mode,
                app: app)
            return view
        }
        if d.hasAnyStoreOffers { relay.nudge() }  // its provision commands
        return view
    }

    /// What a new coupon of an app other than the default one knows of the stores: App Store,
    /// Google Play and Stripe offers are made with the app's own settings of that store in the
    /// coupon's mode, which grants keeps (asked only when the coupon would make such offers), and
    /// refused with `invalid` on `platforms` naming the store when the app has none (docs/apps.md).
    private func appStores(of app: UUID, _ input: CouponInput, mode: Mode, now: Date) async throws -> StoreSettings {
        let plain = try CouponRules.definition(input, defaultEntitlement: config.defaultEntitlement, now: now)
        let env = config.stores
        var stores = StoreSettings.none
        stores.offerSettle = env.offerSettle
        stores.playOfferSettle = env.playOfferSettle
        let needsApple = plain.needsOffers(in: .appStore, connected: true)
        let needsPlay = plain.needsOffers(in: .playStore, connected: true)
        let needsStripe = plain.needsOffers(in: .stripe, connected: true)
        guard needsApple || needsPlay || needsStripe else { return stores }
        let set = try await grants.request(AppStores.List(app: app, mode: mode)).data
        if needsApple {
            guard let apple = set.first(where: { $0.provider == .appStore }) else {
                throw ServiceError(
                    .invalid,
                    "this app has no App Store settings in \(mode.rawValue) mode: set them"
                        + " (PUT /v1/apps/{id}/stores/appstore) before making a coupon with App Store offers,"
                        + " or leave ios out of platforms", field: "platforms")
            }
            stores.appStoreConnected = true
            stores.appleAppId = apple.appAppleId
        }
        if needsStripe {
            guard set.contains(where: { $0.provider == .stripe }) else {
                throw ServiceError(
                    .invalid,
                    "this app has no Stripe settings in \(mode.rawValue) mode: set them"
                        + " (PUT /v1/apps/{id}/stores/stripe) before making a coupon with Stripe offers,"
                        + " or leave web out of platforms", field: "platforms")
            }
            stores.stripeModes = [mode]
        }
        if needsPlay {
            guard set.contains(where: { $0.provider == .googlePlay }) else {
                throw ServiceError(
                    .invalid,
                    "this app has no Google Play settings in \(mode.rawValue) mode: set them"
                        + " (PUT /v1/apps/{id}/stores/googleplay) before making a coupon with Google Play offers,"
                        + " or leave android out of platforms", field: "platforms")
            }
            stores.playConnected = true
        }
        return stores
    }

    /// Validations that came in one message (or one alone): each code's join that code's queue,
    /// where concurrent validations of the code share one query.
    func validate(_ items: [Coupons.Validate]) async -> [Result<Coupons.Validate.Response, any Error>] {
        let validations = self.validations
        return await Self.perKey(items, key: Self.batchKey) { key, items in await validations.submitAll(items, key: key) }
    }

    /// Reservations that came in one message (or one alone): each code's join that code's queue
    /// together. An error is answered as the `ServiceError` it travels as, and any other than a
    /// `ServiceError` is logged here, once, as the router logs a request's unexpected failure.
    func redeem(_ items: [Coupons.Redeem], type: String) async -> [Result<Coupons.Redeem.Response, any Error>] {
        let batcher = self.batcher
        let results = await Self.perKey(items, key: Self.batchKey) { key, items -> [Result<Coupons.Redeem.Response, any Error>] in
            await batcher.redeemAll(items, key: key).map { outcome in outcome.flatMap { outcome in Result { try outcome.response() } } }
        }
        for (item, result) in zip(items, results) { count(result, platform: item.platform) }
        return results.map { result in
            result.mapError { error in
                if !(error is ServiceError) { logger.error("reservation failed", ["bus.type": type, "error": String(describing: error)]) }
                return ServiceError.carrying(error)
            }
        }
    }

    /// `redeem_redemptions_total{outcome,platform}`: a reservation `created`, the `existing` one
    /// answered again, `refused` (and `redeem_redemption_refusals_total` by reason), or `error`.
    private func count(_ result: Result<Coupons.Redeem.Response, any Error>, platform: Platform) {
        let outcome: String
        switch result {
        case .success(let r) where r.refusal != nil:
            outcome = "refused"
            runtime.metrics.increment(
                "redeem_redemption_refusals_total", help: "Redemption requests refused, by reason.",
                labels: ["reason": r.refusal!.rawValue, "platform": platform.rawValue])
        case .success(let r) where r.asksPlayOwnership == true: return
        case .success(let r): outcome = r.created ? "created" : "existing"
        case .failure: outcome = "error"
        }
        runtime.metrics.increment(
            "redeem_redemptions_total", help: "Redemption requests by outcome and platform.",
            labels: ["outcome": outcome, "platform": platform.rawValue])
    }

    /// The batch a validation or reservation joins: its code and environment, which pick one coupon.
    static func batchKey(_ v: Coupons.Validate) -> String {
        Coupons.batchKey(code: v.code, sandbox: v.sandbox ?? false, app: v.app)
    }
    static func batchKey(_ r: Coupons.Redeem) -> String {
        Coupons.batchKey(code: r.code, sandbox: r.sandbox, app: r.app)
    }

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
}
