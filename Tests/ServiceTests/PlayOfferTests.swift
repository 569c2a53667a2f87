import Foundation
import Synchronization
import Testing
import TestSupport
@testable import Core
@testable import CouponsService
@testable import Database
@testable import GrantsService
@testable import Runtime
import Telemetry

/// Google Play offers end to end below the bus: coupons makes a coupon's offers (a row and an
/// outbox command per base plan), the commands are stored as grants stores them, the store task
/// worker makes and activates the offers at the fake Play Developer API (behind the fake token
/// endpoint), and its reports go to coupons' own `StoreOffers.report`. A real PostgreSQL holds
/// both schemas.
@Suite(.serialized) struct PlayOfferTests {
    static let playProduct = "premium_sub"

    final class World: Sendable {
        let coupons: StoreWorld
        let account: TestGoogleServiceAccount
        let oauth: FakeGoogleOAuth
        let play: FakePlayDeveloperAPI

        init(coupons: StoreWorld, account: TestGoogleServiceAccount, oauth: FakeGoogleOAuth, play: FakePlayDeveloperAPI) {
            self.coupons = coupons
            self.account = account
            self.oauth = oauth
            self.play = play
        }

        var pool: PGPool { coupons.pool }

        func client() throws -> PlayDeveloperClient {
            let once = AppleRetry(policy: RetryPolicy(initial: 1, max: 300), maxAttempts: 1)
            return PlayDeveloperClient(base: play.url, packageName: play.packageName,
                                       tokens: GoogleAccessTokens(account: try account.account(), tokenURL: oauth.url, timeout: Project.callTimeout, retry: once),
                                       timeout: Project.callTimeout, retry: once)
        }

        func worker() throws -> StoreTaskWorker {
            let pool = self.pool, settle = coupons.stores.playOfferSettle
            return StoreTaskWorker(pool: pool, logger: Logger(service: "grants-test", minimum: .error), report: { report in
                _ = try await pool.transaction { try StoreOffers.report($0, report, now: Date(), settle: settle) }
            }, client: nil, play: try client(), retry: RetryPolicy(initial: 0.05, max: 0.2), lease: 30, interval: .milliseconds(50))
        }

        @discardableResult
        func deliverCommands() async throws -> Int { try await coupons.deliverStoreCommands() }

        func run(_ worker: StoreTaskWorker, until done: @escaping @Sendable () async throws -> Bool) async throws {
            try await coupons.run(worker, until: done)
        }

        func tasks(_ sql: String) async throws -> Int { try await coupons.count("SELECT count(*) FROM grants.store_tasks WHERE \(sql)") }

        func calls(_ method: String, suffix: String) -> Int { play.received.filter { $0.method == method && $0.path.hasSuffix(suffix) }.count }

        func stop() async {
            coupons.close()
            await play.stop()
            await oauth.stop()
        }
    }

    func world(appStore: Bool = false, playSettle: TimeInterval = 900) async throws -> World {
        let coupons = try await StoreWorld.make(connected: appStore, play: true, playSettle: playSettle)
        try await GrantsService.migrator.apply(on: coupons.pool)
        let account = try TestGoogleServiceAccount()
        let oauth = try FakeGoogleOAuth(account: account)
        let play = try FakePlayDeveloperAPI(oauth: oauth)
        for basePlan in ["monthly", "annual"] {
            play.addBasePlan(productId: Self.playProduct, basePlanId: basePlan, [.init("US", "USD", "9.99"), .init("DE", "EUR", "8.99")])
        }
        try await coupons.plan("pro.monthly", subscription: appStore ? "6447000001" : nil, play: (Self.playProduct, ["monthly", "annual"]))
        return World(coupons: coupons, account: account, oauth: oauth, play: play)
    }

    static func input(_ code: String, platforms: [String]? = ["android"]) -> CouponInput {
        StoreWorld.discount(code, cap: 100, platforms: platforms)
    }

    // MARK: Made with the coupon

    @Test func aCouponCoveringAndroidGetsAnOfferPerBasePlanAndACommandForEach() async throws {
        let w = try await world()
        defer { Task { await w.stop() } }
        let coupon = try await w.coupons.coupon(Self.input("PLAY_30"))
        let offers = try #require(coupon.storeOffers)
        #expect(offers.map(\.store) == [.playStore, .playStore] && offers.map(\.basePlanId) == ["annual", "monthly"])
        #expect(offers.allSatisfy { $0.state == .creating && $0.offerId == nil && $0.productId == "pro.monthly" })

        let commands = try await w.coupons.outbox(StoreProvisionCommand.self)
        #expect(commands.count == 2 && Set(commands.compactMap(\.basePlanId)) == ["monthly", "annual"])
        #expect(commands.allSatisfy { $0.store == .playStore && $0.subscriptionId == Self.playProduct && $0.offer.percentOff == 30 })
        for c in commands {
            // Google's form: lower case, digits and `-`, a letter first; the code is readable in it.
            #expect(c.offerName.range(of: "^c-play-30-[0-9a-f]{8}$", options: .regularExpression) != nil)
        }
        #expect(Set(commands.map(\.offerName)).count == 1, "one offer id on every base plan, so validate names one")
        // Shown as the API shows it.
        let json = try JSONSerialization.jsonObject(with: JSONEncoder.wire().encode(offers[0])) as? [String: Any]
        #expect(json?["store"] as? String == "playStore" && json?["basePlanId"] as? String == "annual" && json?["state"] as? String == "creating")
    }

    @Test func onlyCouponsCoveringAndroidWithPlansOfAPlayProductGetPlayOffers() async throws {
        let w = try await world()
        defer { Task { await w.stop() } }
        #expect(try await w.coupons.coupon(Self.input("IOS_ONLY", platforms: ["ios", "web"])).storeOffers == nil)
        try await w.coupons.plan("web.only", subscription: nil)
        var input = Self.input("NO_PLAY")
        input.productIds = ["web.only"]
        await #expect(throws: ServiceError.self) { try await w.coupons.coupon(input) }
        #expect(try await w.coupons.count("SELECT count(*) FROM coupons.coupons WHERE code = 'NO_PLAY'") == 0)
    }

    // MARK: Provisioning

    @Test func offersAreMadeAndActivatedThrough429sAndReportWaitingForGoogleThenReady() async throws {
        let w = try await world(playSettle: 900)
        defer { Task { await w.stop() } }
        try await w.coupons.coupon(Self.input("SPRING_30"))
        #expect(try await w.deliverCommands() == 2)
        w.play.throttleNext(3)
        try await w.run(try w.worker()) { try await w.tasks("status = 'done'") == 2 }

        #expect(w.play.offers.count == 2 && w.play.offers.allSatisfy { $0.state == "ACTIVE" })
        #expect(w.calls("POST", suffix: "/offers") == 2, "one create per base plan, whatever the 429s")
        #expect(w.play.offers.allSatisfy { $0.regionalConfigs["US"]?["relativeDiscount"] as? Double == 0.3 })
        let offers = try #require(try await w.coupons.get("SPRING_30").storeOffers)
        #expect(offers.map(\.state) == [.waitingForGoogle, .waitingForGoogle])
        #expect(Set(offers.compactMap(\.offerId)) == Set(w.play.offers.map(\.offerId)))
        // Ready once the settle time has passed since activation.
        let later = try await w.coupons.get("SPRING_30", now: Date().addingTimeInterval(901))
        #expect(later.storeOffers?.map(\.state) == [.ready, .ready])
        #expect(w.oauth.exchanges == 1, "one access token for every call")
    }

    @Test func aRunStoppedAfterGoogleMadeTheOfferActivatesItWithoutMakingItAgain() async throws {
        let w = try await world()
        defer { Task { await w.stop() } }
        var input = Self.input("RESUME_30")
        input.productIds = ["pro.monthly"]
        try await w.coupons.coupon(input)
        try await w.deliverCommands()
        // A run that made an offer and died before recording it (a kill -9 there): its lease holds
        // the task meanwhile.
        struct Killed: Error {}
        let task = try #require(try await w.pool.withConnection { try StoreTasks.claimDue($0, limit: 1, lease: 30) }.first)
        let command = try JSONDecoder.bus.decode(StoreProvisionCommand.self, from: Data(task.command.utf8))
        let cut = await PlayOfferProvisioner(client: try w.client()).provision(command, from: task.progress) { _ in throw Killed() }
        guard case .retryLater = cut.outcome else { throw Unexpected(outcome: cut.outcome) }
        #expect(w.play.offers.count == 1 && w.play.offers[0].state == "DRAFT")
        // The lease runs out; the next run finds the offer by its id and only activates it.
        _ = try await w.pool.query("UPDATE grants.store_tasks SET next_attempt_at = now() WHERE id = $1", [task.id])
        try await w.run(try w.worker()) { try await w.tasks("status = 'done'") == 2 }
        #expect(w.play.offers.count == 2 && w.calls("POST", suffix: "/offers") == 2)
        #expect(w.play.offers.first { $0.offerId == command.offerName }?.state == "ACTIVE")
    }

    struct Unexpected: Error { var outcome: AppStoreTaskOutcome }

    @Test func anAmountOffLeavesOutOtherCurrenciesAndSaysSoAndAMissingBasePlanFails() async throws {
        let w = try await world()
        defer { Task { await w.stop() } }
        w.play.addBasePlan(productId: "other_sub", basePlanId: "weekly", [.init("US", "USD", "2.99")])
        try await w.coupons.plan("pro.gone", subscription: nil, play: ("other_sub", ["gone"]))
        var input = Self.input("FIVE_OFF")
        input.kind = "amountOff"
        input.percentOff = nil
        input.amountOff = Money(amount: "2.00", currency: "USD")
        input.productIds = ["pro.monthly", "pro.gone"]
        try await w.coupons.coupon(input)
        try await w.deliverCommands()
        try await w.run(try w.worker()) { try await w.tasks("status = 'done'") == 3 }
        let offers = try #require(try await w.coupons.get("FIVE_OFF").storeOffers)
        let made = offers.filter { $0.productId == "pro.monthly" }
        #expect(made.map(\.state) == [.waitingForGoogle, .waitingForGoogle])
        #expect(made.allSatisfy { $0.message == "regions priced in another currency than USD are left out: DE" })
        #expect(w.play.offers.allSatisfy { $0.regionalConfigs.keys.sorted() == ["US"] })
        let gone = try #require(offers.first { $0.productId == "pro.gone" })
        #expect(gone.state == .failed && gone.message == "Google Play has no base plan gone in subscription other_sub")
    }

    // MARK: Validate and redeem on Android

    /// Grants' report that Google activated the offer on `basePlan`, `ago` seconds before now.
    func activated(_ w: World, _ code: String, basePlan: String, ago: TimeInterval) async throws {
        let coupon = try await w.coupons.couponId(code)
        let settle = w.coupons.stores.playOfferSettle
        _ = try await w.pool.transaction {
            try StoreOffers.report($0, Coupons.StoreOfferReport(couponId: coupon, store: .playStore, productId: "pro.monthly", basePlanId: basePlan,
                                                                state: .waitingForGoogle, offerId: "x", codeCreatedAt: Date().addingTimeInterval(-ago)),
                                   now: Date(), settle: settle)
        }
    }

    @Test func androidWaitsForAReadyOfferThenIsHandedTheOfferAndTheAccountsId() async throws {
        let w = try await world(appStore: true, playSettle: 900)
        defer { Task { await w.stop() } }
        try await w.coupons.coupon(Self.input("HANDOFF_30", platforms: ["android", "ios", "web"]))
        let account = UUID.random()
        #expect(try await w.coupons.validate("HANDOFF_30", account: account, platform: .android).reason == .notReady)
        #expect(try await w.coupons.redeem("HANDOFF_30", account: account, platform: .android).refusal == .notReady)
        // The web never waits for a store; iOS waits for Apple's own offer, not Google's.
        #expect(try await w.coupons.validate("HANDOFF_30", account: account, platform: .web).valid)
        try await activated(w, "HANDOFF_30", basePlan: "monthly", ago: 60)
        #expect(try await w.coupons.validate("HANDOFF_30", account: account, platform: .android).reason == .notReady, "still settling")
        #expect(try await w.coupons.validate("HANDOFF_30", account: account, platform: .ios).reason == .notReady)

        try await activated(w, "HANDOFF_30", basePlan: "annual", ago: 901)
        let valid = try await w.coupons.validate("HANDOFF_30", account: account, platform: .android)
        let offerId = StoreIds.playOfferId(coupon: try await w.coupons.couponId("HANDOFF_30"), code: "HANDOFF_30")
        #expect(valid.valid && valid.eligibleProductIds == ["pro.monthly"] && valid.basePlanIds == ["pro.monthly": ["annual"]])
        #expect(valid.playStore == PlayStoreHandoff(offerId: offerId, offerTags: ["redeem-coupon"]) && valid.appStore == nil)
        #expect(valid.offer?.percentOff == 30)

        let redeemed = try await w.coupons.redeem("HANDOFF_30", account: account, platform: .android)
        let redemption = try #require(redeemed.redemption)
        #expect(redemption.status == .reserved && redemption.appStore == nil)
        let handoff = try #require(redemption.playStore)
        #expect(handoff.offerId == offerId && handoff.obfuscatedAccountId == StoreIds.obfuscatedAccountId(account: account))
        #expect(handoff.obfuscatedAccountId?.count == 64 && handoff.obfuscatedAccountId?.allSatisfy(\.isHexDigit) == true)
        #expect(StoreIds.obfuscatedAccountId(account: UUID.random()) != handoff.obfuscatedAccountId)
        // Asked again, the account's reservation is answered with the same hand-off.
        let again = try await w.coupons.redeem("HANDOFF_30", account: account, platform: .android)
        #expect(!again.created && again.redemption?.playStore == handoff)
    }

    /// Grants' report that Google activated the offer of `product` on `basePlan` long ago.
    func settled(_ w: World, _ code: String, product: String, basePlan: String) async throws {
        let coupon = try await w.coupons.couponId(code)
        let settle = w.coupons.stores.playOfferSettle
        _ = try await w.pool.transaction {
            try StoreOffers.report($0, Coupons.StoreOfferReport(couponId: coupon, store: .playStore, productId: product, basePlanId: basePlan,
                                                                state: .waitingForGoogle, offerId: "x", codeCreatedAt: Date().addingTimeInterval(-3600)),
                                   now: Date(), settle: settle)
        }
    }

    /// `alreadyOwned` before any purchase (docs/stores.md): a request through Play that does not
    /// say what the account holds there is asked for it, reserving nothing; one that does is
    /// refused for a plan whose Play product the account holds, and only for that plan.
    @Test func aPlanTheAccountHoldsOnPlayIsAlreadyOwnedBeforeAnyPurchase() async throws {
        let w = try await world()
        defer { Task { await w.stop() } }
        try await w.coupons.plan("pro.annual", subscription: nil, play: ("other_sub", ["yearly"]))
        try await w.coupons.coupon(Self.input("OWNED_30", platforms: ["android", "web"]))
        try await settled(w, "OWNED_30", product: "pro.monthly", basePlan: "monthly")
        let account = UUID.random()

        // Not said: valid, with the question; redeem reserves nothing.
        let asked = try await w.coupons.validateResponse("OWNED_30", account: account, platform: .android, playOwned: nil)
        #expect(asked.asksPlayOwnership && asked.reason == nil)
        #expect(try await !w.coupons.validateResponse("OWNED_30", account: account, platform: .web, playOwned: nil).asksPlayOwnership,
                "only a request through Play asks")
        let waiting = try await w.coupons.redeem("OWNED_30", account: account, platform: .android, playOwned: nil)
        #expect(waiting.asksPlayOwnership && waiting.redemption == nil && waiting.refusal == nil)
        #expect(try await w.coupons.count("SELECT count(*) FROM coupons.redemptions") == 0)
        #expect(try await w.coupons.get("OWNED_30").remaining == 100)

        // Held: refused, with nothing reserved; held elsewhere, or nothing: valid.
        let refused = try await w.coupons.validateResponse("OWNED_30", account: account, platform: .android, playOwned: [Self.playProduct])
        #expect(refused.reason == .alreadyOwned && !refused.asksPlayOwnership)
        #expect(try refused.answer.decoded().valid == false)
        let notHeld = try await w.coupons.validateResponse("OWNED_30", account: account, platform: .android, playOwned: ["other_sub"])
        #expect(notHeld.reason == nil && !notHeld.asksPlayOwnership)
        #expect(try await w.coupons.redeem("OWNED_30", account: account, platform: .android, playOwned: [Self.playProduct]).refusal == .alreadyOwned)
        #expect(try await w.coupons.count("SELECT count(*) FROM coupons.redemptions") == 0)
        #expect(try await w.coupons.get("OWNED_30").remaining == 100)
        // The web does not go through Play: what Play holds does not count there.
        #expect(try await w.coupons.redeem("OWNED_30", account: UUID.random(), platform: .web, playOwned: [Self.playProduct]).redemption != nil)
        let reserved = try await w.coupons.redeem("OWNED_30", account: account, platform: .android, playOwned: [])
        #expect(reserved.redemption?.status == .reserved && reserved.redemption?.playStore != nil)

        // Two plans: the one held is left out of the valid answer, and refused on redeem.
        try await w.coupons.coupon(StoreWorld.discount("TWO_30", products: ["pro.monthly", "pro.annual"], cap: 100, platforms: ["android"]))
        try await settled(w, "TWO_30", product: "pro.monthly", basePlan: "monthly")
        try await settled(w, "TWO_30", product: "pro.annual", basePlan: "yearly")
        let other = UUID.random()
        let one = try await w.coupons.validate("TWO_30", account: other, platform: .android, playOwned: [Self.playProduct])
        #expect(one.valid && one.eligibleProductIds == ["pro.annual"] && one.basePlanIds == ["pro.annual": ["yearly"]])
        let all = try await w.coupons.validate("TWO_30", account: other, platform: .android, playOwned: ["other_sub", Self.playProduct])
        #expect(all.reason == .alreadyOwned)
        #expect(try await w.coupons.redeem("TWO_30", account: other, platform: .android, productId: "pro.monthly",
                                           playOwned: [Self.playProduct]).refusal == .alreadyOwned)
        #expect(try await w.coupons.redeem("TWO_30", account: other, platform: .android, productId: "pro.annual",
                                           playOwned: [Self.playProduct]).redemption?.productId == "pro.annual")
    }

    /// Mirrors the App Store's rule: a plan's Play product, and each base plan with a live offer,
    /// stay put until the offers are switched off (409 `invalidState` on `playStore`).
    @Test func aPlansPlayProductAndOfferedBasePlansCannotChangeUnderLiveOffers() async throws {
        let w = try await world()
        defer { Task { await w.stop() } }
        try await w.coupons.coupon(Self.input("PINNED_PLAY"))
        func patch(_ p: Plans.Patch) async throws -> PlanView { try await w.pool.transaction { try PlanStore.patch($0, p) } }
        let refused: [Plans.Patch] = [
            Plans.Patch(productId: "pro.monthly", mode: .live, app: DefaultApp.id,
                playStore: .init(productId: "other_sub", basePlanIds: ["monthly", "annual"])),
            Plans.Patch(productId: "pro.monthly", mode: .live, app: DefaultApp.id,
                playStore: .init(productId: Self.playProduct, basePlanIds: ["monthly"])),
            Plans.Patch(productId: "pro.monthly", mode: .live, app: DefaultApp.id, removing: ["playStore"]),
        ]
        for p in refused {
            let error = await #expect(throws: ServiceError.self) { try await patch(p) }
            #expect(error?.code == .invalidState && error?.field == "playStore", "\(p)")
        }
        #expect(try await w.coupons.get("PINNED_PLAY").storeOffers?.count == 2)
        // A base plan more, the name: fine. The offers off: the base plan may go, and the product change.
        let grown = try await patch(
            Plans.Patch(
                productId: "pro.monthly", mode: .live, app: DefaultApp.id, name: "Pro",
                playStore: .init(productId: Self.playProduct, basePlanIds: ["monthly", "annual", "weekly"])))
        #expect(grown.playStore?.basePlanIds == ["monthly", "annual", "weekly"] && grown.name == "Pro")
        let id = try await w.coupons.couponId("PINNED_PLAY")
        _ = try await w.pool.transaction { try StoreOffers.switchOff($0, coupon: id, reason: .deactivated) }
        #expect(try await patch(refused[0]).playStore?.productId == "other_sub")
    }

    /// A dry run answers the Play offers a creation would make, one per base plan, `creating`.
    @Test func aDryRunListsAPlayOfferPerBasePlan() throws {
        let stores = StoreSettings(appStoreConnected: false, appleAppId: nil, offerSettle: 3600, playConnected: true)
        let d = try CouponRules.checked(Self.input("DRY_PLAY"), defaultEntitlement: "pro", stores: stores, now: Date())
        let offers = try #require(CouponStore.preview(d, mode: .live, active: true, now: Date(),
                                                      playBasePlans: ["pro.monthly": ["monthly", "annual"]]).storeOffers)
        #expect(offers.map(\.store) == [.playStore, .playStore] && offers.map(\.basePlanId) == ["annual", "monthly"])
        #expect(offers.allSatisfy { $0.state == .creating && $0.offerId == nil && $0.productId == "pro.monthly" })
    }

    // MARK: Switching off

    @Test func deactivatingTheCouponDeactivatesItsPlayOffers() async throws {
        let w = try await world()
        defer { Task { await w.stop() } }
        try await w.coupons.coupon(Self.input("OFF_30"))
        try await w.deliverCommands()
        try await w.run(try w.worker()) { try await w.tasks("status = 'done'") == 2 }
        let id = try await w.coupons.couponId("OFF_30")
        #expect(try await w.pool.transaction { try StoreOffers.switchOff($0, coupon: id, reason: .deactivated) } == 2)
        let switchOffs = try await w.coupons.outbox(StoreSwitchCommand.self)
        #expect(switchOffs.count == 2 && Set(switchOffs.compactMap(\.basePlanId)) == ["monthly", "annual"])
        #expect(try await w.deliverCommands() == 2)
        try await w.run(try w.worker()) { try await w.tasks("status = 'done'") == 4 }
        #expect(w.play.offers.count == 2 && w.play.offers.allSatisfy { $0.state == "INACTIVE" })
        #expect(try await w.coupons.get("OFF_30").storeOffers?.allSatisfy { $0.switchedOffAt != nil && $0.state == .waitingForGoogle } == true)
    }
}
