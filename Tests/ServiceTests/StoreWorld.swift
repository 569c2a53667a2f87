import Foundation
import TestSupport
@testable import CouponsService
@testable import Core
@testable import Database
@testable import GrantsService
import Testing

/// A coupons schema of its own, with the App Store connected (or not), for the store suites: plans,
/// coupons and the requests of validate, redeem and store purchases, through the same store
/// functions the service calls.
struct StoreWorld: Sendable {
    let pool: PGPool
    let stores: StoreSettings
    static let appId = "1234567890"

    static func make(connected: Bool = true, settle: TimeInterval = 3600, play: Bool = false, playSettle: TimeInterval = 900,
                     connections: Int = 4) async throws -> StoreWorld {
        let pool = PGPool(url: try await TestPostgres.shared().freshDatabase(), maxConnections: connections)
        try await CouponsService.migrator.apply(on: pool)
        return StoreWorld(pool: pool, stores: StoreSettings(appStoreConnected: connected, appleAppId: connected ? appId : nil, offerSettle: settle,
                                                            playConnected: play, playOfferSettle: playSettle))
    }

    func close() { pool.close() }

    @discardableResult
    func plan(_ productId: String, subscription: String? = "6447000001", play: (product: String, basePlans: [String])? = nil,
              mode: Mode = .live) async throws -> PlanView {
        try await pool.transaction {
            try PlanStore.create($0, PlanInput(productId: productId, name: "Plan \(productId)",
                                               appStore: subscription.map { .init(subscriptionId: $0) },
                                               playStore: play.map { .init(productId: $0.product, basePlanIds: $0.basePlans) }), mode: mode, app: DefaultApp.id)
        }
    }

    /// A coupon input: a 30 % discount for `products` on every platform, 10 uses, expiring in a month.
    static func discount(_ code: String, products: [String] = ["pro.monthly"], cap: Int? = 10, platforms: [String]? = nil) -> CouponInput {
        var i = CouponInput()
        i.code = code
        i.kind = "percentOff"
        i.percentOff = 30
        i.duration = CouponDuration(unit: "month", count: 1)
        i.periodCount = 3
        i.productIds = products
        i.maxRedemptions = cap
        i.expiresAt = Date().addingTimeInterval(30 * 86_400)
        i.platforms = platforms
        return i
    }

    /// Made as `CouponsService.create` makes it.
    @discardableResult
    func coupon(_ input: CouponInput, mode: Mode = .live) async throws -> CouponView {
        let d = try CouponRules.checked(input, defaultEntitlement: "pro", stores: stores, now: Date())
        let stores = self.stores
        return try await pool.transaction { tx in
            _ = try CouponStore.create(tx, d, mode: mode, app: DefaultApp.id, active: input.active ?? true, now: Date())
            return try CouponStore.get(tx, code: d.code, mode: mode, app: DefaultApp.id, stores: stores, now: Date())
        }
    }

    func get(_ code: String, mode: Mode = .live, now: Date = Date()) async throws -> CouponView {
        let stores = self.stores
        return try await pool.withConnection {
            try CouponStore.get(
                $0, code: code, mode: mode, app: DefaultApp.id,
                stores: stores, now: now)
        }
    }

    func couponId(_ code: String) async throws -> UUID {
        try await pool.query("SELECT id FROM coupons.coupons WHERE code = $1", [code]).first!.decode("id")
    }

    /// `playOwned`: the Play subscriptions the gateway says the account holds (none by default;
    /// nil: not said, so a request through Play is asked for them).
    func validate(_ code: String, account: UUID = UUID.random(), platform: Platform? = .ios, playOwned: [String]? = [],
                  now: Date = Date()) async throws -> Coupons.Validate.Answer {
        try await validateResponse(code, account: account, platform: platform, playOwned: playOwned, now: now).answer.decoded()
    }

    func validateResponse(_ code: String, account: UUID = UUID.random(), platform: Platform? = .ios, playOwned: [String]? = [],
                          now: Date = Date()) async throws -> Coupons.Validate.Response {
        let stores = self.stores
        return try await pool.withConnection {
            try RedemptionStore.validateBatch($0, [Coupons.Validate(accountId: account, code: code, platform: platform, playOwned: playOwned)],
                                              stores: stores, now: now)
        }[0]
    }

    func redeem(_ code: String, account: UUID, platform: Platform = .ios, productId: String? = nil, sandbox: Bool = false,
                playOwned: [String]? = [], now: Date = Date()) async throws -> RedemptionStore.Outcome {
        let stores = self.stores
        let req = Coupons.Redeem(accountId: account, appUserId: "app-\(account.lowercasedString.prefix(8))", code: code, productId: productId,
                                 platform: platform, sandbox: sandbox, playOwned: playOwned)
        return try await pool.transaction {
            try RedemptionStore.redeemBatch($0, [req], reservationTTL: 3600, resendAfter: 3, stores: stores, now: now).results[0].get()
        }
    }

    /// Grants' report that the code exists at Apple, made `ago` seconds before now.
    func codeMade(_ code: String, product: String = "pro.monthly", ago: TimeInterval = 0) async throws {
        let coupon = try await couponId(code)
        let stores = self.stores
        _ = try await pool.transaction {
            try StoreOffers.report($0, Coupons.StoreOfferReport(couponId: coupon, store: .appStore, productId: product, state: .waitingForApple,
                                                                offerId: "offer-\(product)", customCodeId: "code-\(product)",
                                                                codeCreatedAt: Date().addingTimeInterval(-ago)),
                                   now: Date(), settle: stores.offerSettle)
        }
    }

    func offerName(_ code: String, product: String = "pro.monthly") async throws -> String {
        StoreIds.offerName(coupon: try await couponId(code), store: .appStore, productId: product)
    }

    /// A verified App Store transaction of the offer `offerName`.
    static func transaction(_ offerName: String?, chain: String, transactionId: String? = nil, token: UUID? = nil, sandbox: Bool = false,
                            price: Int64? = 6990, currency: String? = "EUR") -> VerifiedStoreTransaction {
        VerifiedStoreTransaction(store: .appStore, transactionId: transactionId ?? chain, originalTransactionId: chain,
                                 productId: "com.example.pro.monthly", offerType: VerifiedStoreTransaction.offerCode, offerIdentifier: offerName,
                                 appAccountToken: token, priceMilliunits: price, currency: currency, sandbox: sandbox, purchaseDate: Date())
    }

    func purchase(_ req: Coupons.StorePurchase) async throws -> Coupons.StorePurchase.Response {
        try await CouponsService.retryingConflicts { [pool] in
            try await pool.transaction { try StorePurchases.record($0, req, now: Date()) }
        }
    }

    func count(_ sql: String, _ params: [any PGBindable] = []) async throws -> Int {
        try await pool.query("SELECT (\(sql))::int AS n", params).first!.decode("n")
    }

    /// The outbox rows of `type`, decoded as `M`.
    func outbox<M: BusRequest>(_ type: M.Type) async throws -> [M] {
        try await pool.query("SELECT payload FROM coupons.outbox WHERE type = $1 ORDER BY created_at", [M.type]).rows.map {
            try JSONDecoder.bus.decode(Envelope<M>.self, from: Data(try $0.decode("payload", as: String.self).utf8)).body
        }
    }

    /// Stores every store command of the outbox as grants does (a repeat changes nothing); the
    /// number stored. Needs grants' schema in the same database.
    @discardableResult
    func deliverStoreCommands() async throws -> Int {
        let provisions = try await outbox(StoreProvisionCommand.self)
        let switchOffs = try await outbox(StoreSwitchCommand.self)
        return try await pool.transaction { tx in
            try provisions.filter { try StoreTasks.store(tx, $0) }.count + switchOffs.filter { try StoreTasks.store(tx, $0) }.count
        }
    }

    /// Runs a store task worker until `done` holds (at most 10 s).
    func run(_ worker: StoreTaskWorker, until done: @escaping @Sendable () async throws -> Bool) async throws {
        let task = Task { await worker.run() }
        defer { task.cancel() }
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if try await done() { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("the store tasks did not finish within 10 s")
    }
}
