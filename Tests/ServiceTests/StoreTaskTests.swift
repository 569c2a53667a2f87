import Foundation
import Synchronization
import Telemetry
import TestSupport
import Testing

@testable import Core
@testable import CouponsService
@testable import Database
@testable import GrantsService
@testable import Runtime

/// Grants' store tasks against a real PostgreSQL holding both schemas and the fake App Store
/// Connect on loopback: coupons makes a coupon (its offers and outbox commands, as in production),
/// the commands are stored as grants stores them, the worker makes the calls, and its reports go
/// to coupons' own `StoreOffers.report`.
@Suite(.serialized) struct StoreTaskTests {
    static let subscription = "6447000001"

    final class World: Sendable {
        let coupons: StoreWorld
        let fake: FakeAppStoreConnect
        let key: TestAppleAPIKey
        /// Reports that did not reach coupons (the next `failReports` are refused).
        let failReports = Atomic<Int>(0)
        let reports = Mutex<[Coupons.StoreOfferReport]>([])

        init(coupons: StoreWorld, fake: FakeAppStoreConnect, key: TestAppleAPIKey) {
            self.coupons = coupons
            self.fake = fake
            self.key = key
        }

        var pool: PGPool { coupons.pool }

        func worker(interval: Duration = .milliseconds(50)) -> StoreTaskWorker {
            let client = AppStoreConnectClient(
                base: fake.url, token: key.issuer(.appStoreConnect), timeout: Project.callTimeout,
                retry: AppleRetry(policy: RetryPolicy(initial: 1, max: 300), maxAttempts: 1))
            let pool = self.pool, settle = coupons.stores.offerSettle
            return StoreTaskWorker(
                pool: pool, logger: Logger(service: "grants-test", minimum: .error),
                report: { [self] report in
                    if failReports.load(ordering: .relaxed) > 0 {
                        failReports.wrappingSubtract(1, ordering: .relaxed)
                        throw ServiceError(.unavailable, "coupons did not answer")
                    }
                    _ = try await pool.transaction { try StoreOffers.report($0, report, now: Date(), settle: settle) }
                    reports.withLock { $0.append(report) }
                }, client: client, retry: RetryPolicy(initial: 0.05, max: 0.2), lease: 30, interval: interval)
        }

        /// Stores every store command of coupons' outbox as grants does; the number stored.
        @discardableResult
        func deliverCommands() async throws -> Int { try await coupons.deliverStoreCommands() }

        /// Runs the worker until `done` holds (at most 10 s).
        func run(_ worker: StoreTaskWorker, until done: @escaping @Sendable () async throws -> Bool) async throws {
            try await coupons.run(worker, until: done)
        }

        func states(_ code: String) async throws -> [StoreOfferState] {
            try await coupons.get(code).storeOffers?.map(\.state) ?? []
        }

        func tasks(_ sql: String) async throws -> Int {
            try await coupons.count("SELECT count(*) FROM grants.store_tasks WHERE \(sql)")
        }
    }

    func world(offersSwitchBackOn: Bool = false) async throws -> World {
        let coupons = try await StoreWorld.make()
        try await GrantsService.migrator.apply(on: coupons.pool)
        let key = try TestAppleAPIKey()
        var limits = FakeAppStoreConnect.Limits()
        limits.offersSwitchBackOn = offersSwitchBackOn
        let fake = try FakeAppStoreConnect(key: key, limits: limits)
        fake.addSubscription(
            Self.subscription,
            [
                .init(
                    territory: "USA", currency: "USD", current: "9.99",
                    points: ["0.99", "2.99", "4.49", "4.99", "5.99", "7.99", "9.99"])
            ])
        fake.addSubscription(
            "6447000002",
            [.init(territory: "USA", currency: "USD", current: "59.99", points: ["9.99", "29.99", "59.99"])])
        try await coupons.plan("pro.monthly", subscription: Self.subscription)
        return World(coupons: coupons, fake: fake, key: key)
    }

    static func input(_ code: String, products: [String] = ["pro.monthly"]) -> CouponInput {
        var i = StoreWorld.discount(code, products: products, cap: 100)
        i.expiresAt = Date().addingTimeInterval(30 * 86_400)
        return i
    }

    @Test func aCommandSentTwiceIsStoredOnceAndMakesOneOfferAndOneCode() async throws {
        let w = try await world()
        defer {
            w.coupons.close()
            Task { await w.fake.stop() }
        }
        try await w.coupons.coupon(Self.input("TWICE-50"))
        #expect(try await w.deliverCommands() == 1)
        #expect(try await w.deliverCommands() == 0, "a repeat changes nothing")
        #expect(try await w.tasks("true") == 1)

        try await w.run(w.worker()) { try await w.tasks("status = 'done'") == 1 }
        #expect(w.fake.offers.count == 1 && w.fake.customCodes.count == 1)
        let offer = try #require(try await w.coupons.get("TWICE-50").storeOffers?.first)
        #expect(offer.state == .waitingForApple && offer.offerId == w.fake.offers.first?.id)
        // The command again after it ran: still one task, nothing more at Apple.
        #expect(try await w.deliverCommands() == 0)
        try await Task.sleep(for: .milliseconds(200))
        #expect(w.fake.offers.count == 1 && w.fake.customCodes.count == 1)
    }

    @Test func throttledCallsAreRescheduledAfterRetryAfterAndMakeNothingTwice() async throws {
        let w = try await world()
        defer {
            w.coupons.close()
            Task { await w.fake.stop() }
        }
        try await w.coupons.coupon(Self.input("SLOW-50"))
        try await w.deliverCommands()
        w.fake.throttleNext(3, retryAfter: 1)
        let started = Date()
        try await w.run(w.worker()) { try await w.tasks("status = 'done'") == 1 }
        // Three 429s, each waited out for its second before the task was due again.
        #expect(Date().timeIntervalSince(started) >= 3)
        #expect(try await w.tasks("attempts >= 4") == 1)
        #expect(w.fake.offers.count == 1 && w.fake.customCodes.count == 1)
        #expect(try await w.states("SLOW-50") == [.waitingForApple])
    }

    @Test func aRunStoppedBetweenTheOfferAndTheCodeResumesWithTheCodeOnly() async throws {
        let w = try await world()
        defer {
            w.coupons.close()
            Task { await w.fake.stop() }
        }
        try await w.coupons.coupon(Self.input("RESUME-50"))
        try await w.deliverCommands()
        // A run that records the offer as the worker does, then dies before the code call (as a
        // kill -9 there would): its lease holds the task meanwhile.
        struct Killed: Error {}
        let task = try #require(
            try await w.pool.withConnection { try StoreTasks.claimDue($0, limit: 10, lease: 30) }.first)
        let command = try JSONDecoder.bus.decode(StoreProvisionCommand.self, from: Data(task.command.utf8))
        let client = AppStoreConnectClient(
            base: w.fake.url, token: w.key.issuer(.appStoreConnect), timeout: Project.callTimeout,
            retry: AppleRetry(policy: RetryPolicy(initial: 1, max: 300), maxAttempts: 1))
        let pool = w.pool
        let outcome = await OfferProvisioner(client: client).provision(
            AppStoreOfferSpec(command), from: task.progress, ownActiveOffers: 0
        ) { progress in
            try await pool.withConnection { try StoreTasks.record($0, id: task.id, lease: task.lease, progress) }
            throw Killed()
        }
        guard case .retryLater = outcome else {
            Issue.record("\(outcome)")
            return
        }
        #expect(try await w.tasks("offer_id IS NOT NULL AND custom_code_id IS NULL") == 1)
        // Another worker (a restarted grants) leaves it while the lease holds...
        let worker = w.worker()
        let running = Task { await worker.run() }
        defer { running.cancel() }
        try await Task.sleep(for: .milliseconds(300))
        #expect(w.fake.offers.count == 1 && w.fake.customCodes.isEmpty)
        #expect(try await w.states("RESUME-50") == [.creating])
        // ...and once it ends, goes on from the recorded offer.
        try await w.pool.query("UPDATE grants.store_tasks SET next_attempt_at = now()")
        worker.nudge()
        let deadline = Date().addingTimeInterval(10)
        while try await w.tasks("status = 'done'") < 1, Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(w.fake.offers.count == 1 && w.fake.customCodes.count == 1)
        #expect(w.fake.received.filter { $0.method == "POST" && $0.path == "/v1/subscriptionOfferCodes" }.count == 1)
        #expect(try await w.states("RESUME-50") == [.waitingForApple])
    }

    @Test func aReportIsSentAgainUntilCouponsAnswers() async throws {
        let w = try await world()
        defer {
            w.coupons.close()
            Task { await w.fake.stop() }
        }
        try await w.coupons.coupon(Self.input("REPORT-50"))
        try await w.deliverCommands()
        w.failReports.store(3, ordering: .relaxed)
        try await w.run(w.worker()) { try await w.tasks("status = 'done'") == 1 }
        #expect(w.failReports.load(ordering: .relaxed) == 0 && w.reports.withLock { $0.count } == 1)
        #expect(try await w.states("REPORT-50") == [.waitingForApple])
        #expect(w.fake.received.filter { $0.method == "POST" }.count == 2, "reporting again calls Apple no more")
    }

    @Test func appleRefusalIsReportedAsFailedWithItsMessage() async throws {
        let w = try await world()
        defer {
            w.coupons.close()
            Task { await w.fake.stop() }
        }
        try await w.coupons.coupon(Self.input("REFUSED-50"))
        try await w.deliverCommands()
        w.fake.failNext(1, status: 409)
        try await w.run(w.worker()) { try await w.tasks("status = 'done'") == 1 }
        let offer = try #require(try await w.coupons.get("REFUSED-50").storeOffers?.first)
        #expect(offer.state == .failed && offer.message?.isEmpty == false)
    }

    /// Apple takes a custom code once per app, so each plan's offer has its own (`AppStoreCodes`):
    /// both offers and both codes are made, the first plan by product id with the coupon's code.
    @Test func eachAppStorePlanGetsItsOwnCodeAndBothOffersAreMade() async throws {
        let w = try await world()
        defer {
            w.coupons.close()
            Task { await w.fake.stop() }
        }
        try await w.coupons.plan("pro.yearly", subscription: "6447000002")
        try await w.coupons.coupon(Self.input("TWO-PLANS", products: ["pro.yearly", "pro.monthly"]))
        #expect(try await w.deliverCommands() == 2)
        try await w.run(w.worker()) { try await w.tasks("status = 'done'") == 2 }
        let offers = try #require(try await w.coupons.get("TWO-PLANS").storeOffers)
        #expect(offers.map(\.productId) == ["pro.monthly", "pro.yearly"])
        #expect(offers.map(\.state) == [.waitingForApple, .waitingForApple])
        #expect(offers.map(\.customCode) == ["TWO-PLANS", "TWO-PLANS-2"])
        #expect(w.fake.offers.count == 2 && Set(w.fake.customCodes.map(\.customCode)) == ["TWO-PLANS", "TWO-PLANS-2"])
    }

    @Test func aSwitchOffTurnsTheCodeThenTheOfferOffWithinSeconds() async throws {
        let w = try await world()
        defer {
            w.coupons.close()
            Task { await w.fake.stop() }
        }
        try await w.coupons.coupon(Self.input("OFF-50"))
        try await w.deliverCommands()
        let worker = w.worker()
        let running = Task { await worker.run() }
        defer { running.cancel() }
        let deadline = Date().addingTimeInterval(10)
        while try await w.tasks("status = 'done'") < 1, Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        // Deactivated (a full cap and an expiry write the same command): grants switches the code,
        // then the offer off.
        try await w.pool.transaction { tx in
            _ = try StoreOffers.switchOff(tx, coupon: try w.couponIdSync(tx, "OFF-50"), reason: .deactivated)
        }
        #expect(try await w.deliverCommands() == 1)
        worker.nudge()
        let started = Date()
        while (w.fake.offers.first?.active ?? true) || (w.fake.customCodes.first?.active ?? true), Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(Date().timeIntervalSince(started) < 2, "switched off within seconds")
        #expect(w.fake.offers.first?.active == false && w.fake.customCodes.first?.active == false)
        let patches = w.fake.received.filter { $0.method == "PATCH" }.map(\.path)
        #expect(
            patches.count == 2 && patches.first?.contains("CustomCodes") == true,
            "the code first, then the offer: \(patches)")
    }

    /// Deactivated, then activated again before grants hears of either: grants switches code and
    /// offer off, then back on (the offer first), in the order coupons asked, and the offer is as
    /// it was. Whether Apple switches an offer back on is unconfirmed: when it refuses, the offer
    /// is `failed` with Apple's message and the code stays off.
    @Test(arguments: [true, false]) func aCouponActivatedAgainSwitchesItsOfferBackOn(
        appleSwitchesBackOn: Bool
    ) async throws {
        let w = try await world(offersSwitchBackOn: appleSwitchesBackOn)
        defer {
            w.coupons.close()
            Task { await w.fake.stop() }
        }
        try await w.coupons.coupon(Self.input("AGAIN-50"))
        try await w.deliverCommands()
        try await w.run(w.worker()) { try await w.tasks("status = 'done'") == 1 }
        let before = try await w.states("AGAIN-50")
        let stores = w.coupons.stores
        for active in [false, true] {
            _ = try await w.pool.transaction {
                try CouponStore.patch(
                    $0,
                    Coupons.Patch(code: "AGAIN-50", mode: .live, app: DefaultApp.id, active: active,
                        maxRedemptions: nil, expiresAt: nil),
                    stores: stores, now: Date())
            }
        }
        #expect(try await w.states("AGAIN-50") == [.creating])
        #expect(try await w.deliverCommands() == 2)
        try await w.run(w.worker()) { try await w.tasks("status = 'done'") == 3 }
        let patches = w.fake.received.filter { $0.method == "PATCH" }.map {
            $0.path.contains("CustomCodes") ? "code" : "offer"
        }
        if appleSwitchesBackOn {
            #expect(patches == ["code", "offer", "offer", "code"], "off: the code first; on: the offer first")
            #expect(w.fake.offers.first?.active == true && w.fake.customCodes.first?.active == true)
            #expect(try await w.states("AGAIN-50") == before)
        } else {
            #expect(patches == ["code", "offer", "offer"])
            #expect(w.fake.offers.first?.active == false && w.fake.customCodes.first?.active == false)
            let offer = try #require(try await w.coupons.get("AGAIN-50").storeOffers?.first)
            #expect(offer.state == .failed && offer.message?.contains("cannot be activated again") == true, "\(offer)")
        }
    }

    @Test func aSwitchOffWaitsForItsProvisioning() async throws {
        let w = try await world()
        defer {
            w.coupons.close()
            Task { await w.fake.stop() }
        }
        try await w.coupons.coupon(Self.input("EARLY-OFF"))
        try await w.pool.transaction { tx in
            _ = try StoreOffers.switchOff(tx, coupon: try w.couponIdSync(tx, "EARLY-OFF"), reason: .deactivated)
        }
        #expect(try await w.deliverCommands() == 2)
        try await w.run(w.worker()) { try await w.tasks("status = 'done'") == 2 }
        #expect(
            w.fake.offers.count == 1 && w.fake.offers.first?.active == false
                && w.fake.customCodes.first?.active == false)
    }

    @Test func twoWorkersOnOneDatabaseMakeEachOfferOnce() async throws {
        let w = try await world()
        defer {
            w.coupons.close()
            Task { await w.fake.stop() }
        }
        for i in 0..<6 {
            let product = "pro.p\(i)"
            try await w.coupons.plan(product, subscription: Self.subscription)
            try await w.coupons.coupon(Self.input("PAIR-\(i)", products: [product]))
        }
        #expect(try await w.deliverCommands() == 6)
        let a = w.worker(), b = w.worker()
        let ta = Task { await a.run() }
        defer { ta.cancel() }
        try await w.run(b) { try await w.tasks("status = 'done'") == 6 }
        #expect(w.fake.offers.count == 6 && w.fake.customCodes.count == 6)
        #expect(w.fake.received.filter { $0.method == "POST" }.count == 12, "no call made twice")
    }
}

extension StoreTaskTests.World {
    func couponIdSync(_ tx: PGConnection, _ code: String) throws -> UUID {
        try tx.query("SELECT id FROM coupons.coupons WHERE code = $1", [code]).first!.decode("id")
    }
}
