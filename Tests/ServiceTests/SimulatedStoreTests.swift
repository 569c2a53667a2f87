import Foundation
import Telemetry
import TestSupport
import Testing

@testable import Core
@testable import CouponsService
@testable import Database
@testable import GrantsService
@testable import Runtime

/// Test mode's simulated stores (docs/stores.md, "Test mode"): the pure rules, grants' store tasks
/// of test coupons (simulated, never sent to Apple, counted in none of Apple's limits), and the
/// test helpers' purchase and readiness against a real PostgreSQL.
@Suite struct SimulatedStoreTests {
    // MARK: - Rules

    @Test(arguments: [(Mode.live, false, true), (.live, true, false), (.test, false, false), (.test, true, true)])
    func signedDataCompletesLiveAndTheSimulationTest(mode: Mode, simulated: Bool, completes: Bool) {
        #expect(StorePurchases.completes(coupon: mode, simulated: simulated) == completes)
    }

    static func command(
        store: Store = .appStore, duration: CouponDuration = CouponDuration(unit: "month", count: 1),
        expiresAt: Date? = Date().addingTimeInterval(30 * 86_400), basePlanId: String? = nil
    ) -> StoreProvisionCommand {
        let coupon = UUID.random()
        return StoreProvisionCommand(
            commandId: StoreIds.command(
                StoreProvisionCommand.type, coupon: coupon, store: store, productId: "pro.monthly",
                basePlanId: basePlanId),
            couponId: coupon, code: "SIM-50", mode: .test, store: store, productId: "pro.monthly",
            subscriptionId: "6447000001",
            basePlanId: basePlanId, offerName: "redeem-x",
            offer: StoreOfferTerms(
                kind: .percentOff, percentOff: 50, amountOff: nil, duration: duration, periodCount: 3),
            newCustomersOnly: false, maxRedemptions: 10, expiresAt: expiresAt)
    }

    @Test func theSimulationGivesStableSimulatedIdsAndTheTimeItRan() throws {
        let now = Date()
        let c = Self.command()
        guard case .done(let p) = SimulatedStore.provision(c, from: .init(), now: now) else {
            Issue.record("not done")
            return
        }
        #expect(
            p.offerId == SimulatedStore.id("offer", c.commandId)
                && p.customCodeId == SimulatedStore.id("code", c.commandId))
        #expect(p.offerId.map(SimulatedStore.isSimulated) == true && p.offerId?.count == 28 && p.codeCreatedAt == now)
        // A run again (a report coupons missed) keeps what the first gave.
        #expect(SimulatedStore.provision(c, from: p, now: now.addingTimeInterval(60)) == .done(p))
        let play = Self.command(store: .playStore, basePlanId: "monthly")
        guard case .done(let g) = SimulatedStore.provision(play, from: .init(), now: now) else {
            Issue.record("not done")
            return
        }
        #expect(g.offerId != nil && g.customCodeId == nil && g.codeCreatedAt == now)
        #expect(
            SimulatedStore.switchTo(from: p)
                == .done(
                    AppStoreOfferProgress(
                        offerId: p.offerId, customCodeId: p.customCodeId, codeCreatedAt: now,
                        codeSwitched: true, offerSwitched: true)))
    }

    @Test func theSimulationRefusesWhatAppleAndGoogleRefuse() {
        let now = Date()
        let refusals: [(StoreProvisionCommand, String)] = [
            (Self.command(duration: CouponDuration(unit: "month", count: 5)), "App Store offers last"),
            (Self.command(expiresAt: now.addingTimeInterval(-1)), "expired"),
            (Self.command(store: .playStore, expiresAt: now.addingTimeInterval(-1), basePlanId: "monthly"), "expired"),
            (Self.command(store: .playStore), "base plan")
        ]
        for (command, message) in refusals {
            guard case .failed(let text, _) = SimulatedStore.provision(command, from: .init(), now: now) else {
                Issue.record("\(command.store) \(message): not refused")
                continue
            }
            #expect(text.contains(message), "\(text)")
        }
    }

    @Test func aSimulatedPurchaseUsesAReadyOfferOfItsStoreAndPlan() {
        let now = Date(), coupon = UUID.random()
        func row(_ store: Store, _ product: String, _ basePlan: String = "", ready: Bool) -> StoreOffers.Row {
            StoreOffers.Row(
                couponId: coupon, store: store, productId: product, basePlanId: basePlan, stored: store.waiting,
                offerName: "n-\(product)",
                codeCreatedAt: now.addingTimeInterval(ready ? -100 : 0))
        }
        let offers = [
            row(.appStore, "pro.yearly", ready: true), row(.appStore, "pro.monthly", ready: false),
            row(.playStore, "pro.monthly", "b", ready: true), row(.playStore, "pro.monthly", "a", ready: true)
        ]
        #expect(
            StoreSimulation.offer(offers, store: .appStore, productId: nil, now: now, settle: 10)?.productId
                == "pro.yearly")
        #expect(
            StoreSimulation.offer(offers, store: .appStore, productId: "pro.monthly", now: now, settle: 10) == nil,
            "not ready")
        #expect(
            StoreSimulation.offer(offers, store: .playStore, productId: nil, now: now, settle: 10)?.basePlanId == "a")
        #expect(StoreSimulation.store(of: .web) == nil && StoreSimulation.store(of: .android) == .playStore)
    }

    // MARK: - Grants' tasks

    /// A coupons and grants schema, a live and a test plan on one subscription, the fake App
    /// Store Connect, and a worker connected to it (or to no store).
    struct World {
        let coupons: StoreWorld
        let fake: FakeAppStoreConnect
        let key: TestAppleAPIKey
        static let subscription = "6447000001"

        static func make() async throws -> World {
            let coupons = try await StoreWorld.make()
            try await GrantsService.migrator.apply(on: coupons.pool)
            let key = try TestAppleAPIKey()
            let fake = try FakeAppStoreConnect(key: key)
            fake.addSubscription(
                subscription,
                [.init(territory: "USA", currency: "USD", current: "9.99", points: ["2.99", "4.99", "9.99"])])
            try await coupons.plan("pro.monthly", subscription: subscription)
            try await coupons.plan("pro.monthly", subscription: subscription, mode: .test)
            return World(coupons: coupons, fake: fake, key: key)
        }

        func close() {
            coupons.close()
            Task { [fake] in await fake.stop() }
        }

        func worker(connected: Bool = true) -> StoreTaskWorker {
            let client = AppStoreConnectClient(
                base: fake.url, token: key.issuer(.appStoreConnect), timeout: Project.callTimeout,
                retry: AppleRetry(policy: RetryPolicy(initial: 1, max: 300), maxAttempts: 1))
            let pool = coupons.pool, settle = coupons.stores.offerSettle
            return StoreTaskWorker(
                pool: pool, logger: Logger(service: "grants-test", minimum: .error),
                report: { report in
                    _ = try await pool.transaction { try StoreOffers.report($0, report, now: Date(), settle: settle) }
                }, client: connected ? client : nil, retry: RetryPolicy(initial: 0.05, max: 0.2), lease: 30,
                interval: .milliseconds(50))
        }

        func tasks(_ sql: String) async throws -> Int {
            try await coupons.count("SELECT count(*) FROM grants.store_tasks WHERE \(sql)")
        }

        /// Delivers the outbox's store commands and runs `worker` until every task is done.
        func settle(_ worker: StoreTaskWorker) async throws {
            try await coupons.deliverStoreCommands()
            try await coupons.run(worker) { try await tasks("status <> 'done'") == 0 }
        }
    }

    static func input(_ code: String) -> CouponInput {
        var i = StoreWorld.discount(code, cap: 100, platforms: ["ios"])
        i.expiresAt = Date().addingTimeInterval(30 * 86_400)
        return i
    }

    @Test func aTestCouponsOffersAreSimulatedByAnyWorkerAndNeverReachApple() async throws {
        let w = try await World.make()
        defer { w.close() }
        try await w.coupons.coupon(Self.input("SIM-50"), mode: .test)
        // A grants instance connected to no store runs test tasks too.
        try await w.settle(w.worker(connected: false))
        let offer = try #require(try await w.coupons.get("SIM-50", mode: .test).storeOffers?.first)
        #expect(offer.state == .waitingForApple && offer.offerId.map(SimulatedStore.isSimulated) == true)
        #expect(try await w.tasks("mode = 'test'") == 1)
        // Switched off and back on: simulated as well.
        let coupon = try await w.coupons.couponId("SIM-50")
        _ = try await w.coupons.pool.transaction { try StoreOffers.switchOff($0, coupon: coupon, reason: .deactivated) }
        try await w.settle(w.worker())
        try await w.coupons.pool.query("UPDATE coupons.coupons SET active = true")
        _ = try await w.coupons.pool.transaction { try StoreOffers.switchOnIfOpen($0, coupon: coupon) }
        try await w.settle(w.worker())
        #expect(try await w.tasks("mode = 'test' AND status = 'done'") == 3)
        #expect(try await w.coupons.get("SIM-50", mode: .test).storeOffers?.first?.state == .waitingForApple)
        #expect(w.fake.received.isEmpty, "\(w.fake.received.map(\.path))")
    }

    @Test func testCouponsHoldNoPlaceInApplesTenNorTheCustomCodeALiveCouponNeeds() async throws {
        let w = try await World.make()
        defer { w.close() }
        for code in ["FREEYEAR"] + (1..<10).map({ "TEN-\($0)" }) {
            try await w.coupons.coupon(Self.input(code), mode: .test)
        }
        try await w.settle(w.worker())
        #expect(try await w.tasks("mode = 'test' AND report = 'waitingForApple'") == 10)
        try await w.coupons.coupon(Self.input("FREEYEAR"))
        try await w.settle(w.worker())
        let live = try #require(try await w.coupons.get("FREEYEAR").storeOffers?.first)
        #expect(live.state == .waitingForApple, "\(live.message ?? "")")
        #expect(w.fake.offers.count == 1 && w.fake.customCodes.map(\.customCode) == ["FREEYEAR"])
    }

    @Test func aSwitchReachesTheStoreWhereItsOfferWasMade() async throws {
        let w = try await World.make()
        defer { w.close() }
        // A test coupon whose offer was made at Apple before test mode was simulated (its task
        // stored live, as migration 14 leaves it): switching it off must reach Apple.
        try await w.coupons.coupon(Self.input("OLD-50"), mode: .test)
        try await w.coupons.deliverStoreCommands()
        try await w.coupons.pool.query("UPDATE grants.store_tasks SET mode = 'live'")
        try await w.settle(w.worker())
        #expect(w.fake.customCodes.first?.active == true)
        let coupon = try await w.coupons.couponId("OLD-50")
        _ = try await w.coupons.pool.transaction { try StoreOffers.switchOff($0, coupon: coupon, reason: .deactivated) }
        try await w.settle(w.worker())
        #expect(try await w.tasks("action = 'switchOff' AND mode = 'live'") == 1)
        #expect(w.fake.customCodes.first?.active == false && w.fake.offers.first?.active == false)
    }

    // MARK: - Helpers

    /// A test coupon on iOS whose simulated offer waits (`settle`: an hour).
    static func testSale() async throws -> (StoreWorld, offerId: String) {
        let world = try await StoreWorld.make(settle: 3600)
        try await world.plan("pro.monthly", mode: .test)
        try await world.coupon(input("SALE"), mode: .test)
        let coupon = try await world.couponId("SALE")
        let offerId = SimulatedStore.id("offer", coupon)
        _ = try await world.pool.transaction {
            try StoreOffers.report(
                $0,
                Coupons.StoreOfferReport(
                    couponId: coupon, store: .appStore, productId: "pro.monthly", state: .waitingForApple,
                    offerId: offerId, customCodeId: "sim_code", codeCreatedAt: Date()),
                now: Date(), settle: 3600)
        }
        return (world, offerId)
    }

    func ready(_ world: StoreWorld, _ offerId: String, mode: Mode = .test) async throws -> StoreOfferView {
        let stores = world.stores
        return try await world.pool.transaction {
            try StoreSimulation.ready(
                $0, Coupons.SimulatedOfferReady(offerId: offerId, mode: mode, app: DefaultApp.id), now: Date(), stores: stores)
        }
    }

    func buy(
        _ world: StoreWorld, _ id: UUID, price: String = "4.99", sandbox: Bool? = nil
    ) async throws -> RedemptionView {
        let stores = world.stores
        return try await world.pool.transaction {
            try StoreSimulation.purchase(
                $0,
                Coupons.SimulatedPurchase(
                    redemptionId: id, mode: .test, app: DefaultApp.id, pricePaid: Money(amount: price, currency: "USD"),
                    sandbox: sandbox), now: Date(), stores: stores
            ).redemption
        }
    }

    @Test func theReadyHelperSkipsTheSettleTimeOfATestOfferOnly() async throws {
        let (world, offerId) = try await Self.testSale()
        defer { world.close() }
        #expect(try await world.get("SALE", mode: .test).storeOffers?.first?.state == .waitingForApple)
        #expect(try await ready(world, offerId).state == .ready)
        #expect(try await world.get("SALE", mode: .test).storeOffers?.first?.state == .ready)
        #expect(try await ready(world, offerId).state == .ready, "again: still ready")
        await #expect(throws: ServiceError.self) { try await ready(world, "sim_unknown") }
        await #expect(throws: ServiceError.self) { try await ready(world, offerId, mode: .live) }
    }

    @Test func thePurchaseHelperCompletesAReservationAsAStoreSaleDoes() async throws {
        let (world, offerId) = try await Self.testSale()
        defer { world.close() }
        _ = try await ready(world, offerId)
        let account = UUID.random()
        let reserved = try #require(try await world.redeem("SALE", account: account, sandbox: true).redemption)
        let done = try await buy(world, reserved.redemptionId, sandbox: true)
        #expect(done.redemptionId == reserved.redemptionId && done.status == .completed && done.sandbox)
        #expect(done.pricePaid == Money(amount: "4.99", currency: "USD"))
        let row = try #require(
            try await world.pool.query(
                "SELECT store, sandbox, price_milliunits, offer_name FROM coupons.store_purchases"
            ).first)
        #expect(try row.decode("store", as: String.self) == "appStore" && row.decode("sandbox", as: Bool.self))
        #expect(try row.decode("price_milliunits", as: Int64.self) == 4990)
        #expect(try row.decode("offer_name", as: String.self) == (try await world.offerName("SALE")))
        #expect(
            try await world.outbox(RedemptionCompletedNotice.self).map(\.redemption.redemptionId) == [
                reserved.redemptionId
            ])
        // Bought once: a second is refused, and nothing is half-written.
        await #expect(throws: ServiceError.self) { try await buy(world, reserved.redemptionId) }
        #expect(try await world.count("SELECT count(*) FROM coupons.store_purchases") == 1)
        // What Apple signs can't complete a test coupon's redemption: no store sold its offer.
        let other = try #require(try await world.redeem("SALE", account: UUID.random(), sandbox: true).redemption)
        let token = try #require(other.appStore?.appAccountToken)
        await #expect(throws: ServiceError.self) {
            try await world.purchase(
                .init(
                    transaction: StoreWorld.transaction(
                        try await world.offerName("SALE"), chain: "2000000009", token: token,
                        sandbox: true), notificationUUID: "n-test"))
        }
        #expect(try await world.count("SELECT count(*) FROM coupons.store_purchases") == 1)
    }

    @Test func theSimulatedStoreCompletesNoLiveRedemption() async throws {
        let (world, offer) = try await StorePurchaseTests.sale()
        defer { world.close() }
        let reserved = try #require(try await world.redeem("SALE", account: UUID.random()).redemption)
        await #expect(throws: ServiceError.self) { try await buy(world, reserved.redemptionId) }
        await #expect(throws: ServiceError.self) {
            try await world.purchase(
                .init(
                    transaction: StoreWorld.transaction(offer, chain: "sim-1"), redemptionId: reserved.redemptionId,
                    simulated: true))
        }
        #expect(try await world.count("SELECT count(*) FROM coupons.store_purchases") == 0)
    }
}
