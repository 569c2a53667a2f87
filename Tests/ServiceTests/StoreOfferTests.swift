import Foundation
import TestSupport
import Testing

@testable import Core
@testable import CouponsService
@testable import Database

/// Coupons that become App Store offers (docs/stores.md, flow steps 1–3 and 5), against a real
/// PostgreSQL: what creating one writes (in one transaction), grants' reports, the `ready` rule,
/// validate and redeem on iOS, and switching offers off.
@Suite struct StoreOfferTests {
    // MARK: - No store connected

    @Test func withNoStoreConnectedCouponsBehaveAsBefore() async throws {
        let world = try await StoreWorld.make(connected: false)
        defer { world.close() }
        // Products need not be plans, and nothing is provisioned.
        let view = try await world.coupon(StoreWorld.discount("PLAIN-10", products: ["not.a.plan"]))
        #expect(view.storeOffers == nil)
        let json = try #require(
            try JSONSerialization.jsonObject(with: JSONEncoder.wire().encode(view)) as? [String: Any])
        #expect(json["storeOffers"] == nil && json["overCapCount"] == nil, "the coupon's JSON is what it was")
        #expect(try await world.count("SELECT count(*) FROM coupons.store_offers") == 0)
        #expect(try await world.count("SELECT count(*) FROM coupons.outbox") == 0)
        // Validate on iOS is valid at once, without an offer or a hand-off; redeem reserves for a
        // hand confirmation, without a token.
        let answer = try await world.validate("PLAIN-10")
        #expect(
            answer.valid && answer.offer == nil && answer.appStore == nil && answer.eligibleProductIds == ["not.a.plan"]
        )
        let outcome = try await world.redeem("PLAIN-10", account: UUID.random())
        let r = try #require(outcome.redemption)
        #expect(r.status == .reserved && r.appStore == nil)
        #expect(
            try await world.count("SELECT count(*) FROM coupons.redemptions WHERE app_account_token IS NOT NULL") == 0)
    }

    // MARK: - Creating

    @Test func aCouponThatNeedsOffersMustNamePlansWithAnAppStoreSubscription() async throws {
        let world = try await StoreWorld.make()
        defer { world.close() }
        try await world.plan("pro.web", subscription: nil)
        for (products, bad) in [(["pro.monthly"], "pro.monthly"), (["pro.web"], "pro.web")] {
            let error = await #expect(throws: ServiceError.self) {
                try await world.coupon(StoreWorld.discount("NEEDS-PLANS", products: products))
            }
            #expect(
                error?.code == .invalid && error?.field == "productIds" && error?.message.contains(bad) == true,
                "\(products)")
        }
        // A plan of the other mode is not one of this mode's.
        try await world.plan("pro.monthly", mode: .test)
        await #expect(throws: ServiceError.self) { try await world.coupon(StoreWorld.discount("NEEDS-PLANS")) }
        #expect(
            try await world.count("SELECT count(*) FROM coupons.coupons") == 0, "nothing of a refused coupon is kept")
        // A web-only discount, or a free period without plans, needs no offers.
        var free = CouponInput()
        free.code = "FREE-WEEK"
        free.kind = "freePeriod"
        free.duration = CouponDuration(unit: "week", count: 1)
        #expect(try await world.coupon(free).storeOffers == nil)
        #expect(
            try await world.coupon(StoreWorld.discount("WEB-ONLY", platforms: ["web", "android"])).storeOffers == nil)
    }

    @Test func creatingWritesAnOfferAndItsProvisionCommandPerPlanInOneTransaction() async throws {
        let world = try await StoreWorld.make()
        defer { world.close() }
        try await world.plan("pro.monthly", subscription: "6447000001")
        try await world.plan("pro.yearly", subscription: "6447000002")
        let view = try await world.coupon(StoreWorld.discount("SPRING-30", products: ["pro.yearly", "pro.monthly"]))
        #expect(view.storeOffers?.map(\.productId) == ["pro.monthly", "pro.yearly"])
        #expect(
            view.storeOffers?.allSatisfy { $0.state == .creating && $0.store == .appStore && $0.offerId == nil } == true
        )
        let coupon = try await world.couponId("SPRING-30")
        let commands = try await world.outbox(StoreProvisionCommand.self).sorted { $0.productId < $1.productId }
        #expect(commands.count == 2)
        let monthly = try #require(commands.first)
        #expect(
            monthly.couponId == coupon && monthly.code == "SPRING-30" && monthly.mode == .live
                && monthly.store == .appStore)
        #expect(monthly.subscriptionId == "6447000001" && commands[1].subscriptionId == "6447000002")
        #expect(monthly.offerName == StoreIds.offerName(coupon: coupon, store: .appStore, productId: "pro.monthly"))
        #expect(
            monthly.offer
                == StoreOfferTerms(
                    kind: .percentOff, percentOff: 30, amountOff: nil, duration: .init(unit: "month", count: 1),
                    periodCount: 3))
        #expect(monthly.maxRedemptions == 10 && monthly.expiresAt != nil && !monthly.newCustomersOnly)
        // Each command's outbox key is its derived id: the row grants will acknowledge.
        let keys = try await world.pool.query(
            "SELECT redemption_id FROM coupons.outbox WHERE type = $1", [StoreProvisionCommand.type]
        ).rows
            .map { try $0.decode("redemption_id", as: UUID.self) }
        #expect(Set(keys) == Set(commands.map(\.commandId)))
        #expect(
            monthly.commandId
                == StoreIds.command(
                    StoreProvisionCommand.type, coupon: coupon, store: .appStore, productId: "pro.monthly"))
        // Writing the same command again (a retried transaction, say) leaves one row.
        try await world.pool.transaction { try Outbox.add($0, key: monthly.commandId, monthly) }
        #expect(try await world.count("SELECT count(*) FROM coupons.outbox") == 2)
        // The JSON view lists them.
        let json = try #require(
            try JSONSerialization.jsonObject(with: JSONEncoder.wire().encode(view)) as? [String: Any])
        let offers = try #require(json["storeOffers"] as? [[String: Any]])
        #expect(offers.first?["store"] as? String == "appStore" && offers.first?["state"] as? String == "creating")
        #expect(
            offers.first?.keys.sorted() == ["customCode", "productId", "state", "store"],
            "ids and a message only once there are any")
    }

    @Test func aFreePeriodWithPlansBecomesAFreeTrialOfferAndItsDurationMustBeOneAppleHas() async throws {
        let world = try await StoreWorld.make()
        defer { world.close() }
        try await world.plan("pro.monthly")
        var free = CouponInput()
        free.code = "TRIAL-2W"
        free.kind = "freePeriod"
        free.duration = CouponDuration(unit: "week", count: 2)
        free.productIds = ["pro.monthly"]
        free.maxRedemptions = 100
        free.expiresAt = Date().addingTimeInterval(86_400)
        let view = try await world.coupon(free)
        #expect(view.storeOffers?.count == 1)
        #expect(view.storeLimits.contains { $0.limit == "maxRedemptions" }, "the App Store's limits apply to it")
        #expect(try await world.outbox(StoreProvisionCommand.self).first?.offer.kind == .freePeriod)
        #expect(try await world.outbox(StoreProvisionCommand.self).first?.offer.periodCount == 1)
        free.code = "TRIAL-5D"
        free.duration = CouponDuration(unit: "day", count: 5)
        let error = await #expect(throws: ServiceError.self) { try await world.coupon(free) }
        #expect(error?.code == .storeLimit && error?.field == "duration")
        // Without plans, a free period stays Redeem's own grant: no limits, no offers.
        free.code = "TRIAL-NOPLAN"
        free.productIds = nil
        free.maxRedemptions = nil
        free.expiresAt = nil
        #expect(try await world.coupon(free).storeOffers == nil)
    }

    @Test func aDryRunProvisionsNothing() async throws {
        let world = try await StoreWorld.make()
        defer { world.close() }
        try await world.plan("pro.monthly")
        let d = try CouponRules.checked(
            StoreWorld.discount("DRY-RUN"), defaultEntitlement: "pro", stores: world.stores, now: Date())
        struct Rollback: Error {}
        await #expect(throws: Rollback.self) {
            try await world.pool.transaction { tx in
                _ = try CouponStore.create(tx, d, mode: .live, app: DefaultApp.id, active: true, now: Date())
                throw Rollback()
            }
        }
        #expect(CouponStore.preview(d, mode: .live, active: true, now: Date()).storeOffers?.map(\.state) == [.creating])
        #expect(
            try await world.count("SELECT count(*) FROM coupons.outbox")
                + world.count("SELECT count(*) FROM coupons.store_offers") == 0)
    }

    // MARK: - Reports and readiness

    @Test func reportsMoveAnOfferForwardOnlyAndRepeatsChangeNothing() async throws {
        let world = try await StoreWorld.make()
        defer { world.close() }
        try await world.plan("pro.monthly")
        try await world.plan("pro.yearly")
        try await world.coupon(StoreWorld.discount("REPORTS", products: ["pro.monthly", "pro.yearly"]))
        let coupon = try await world.couponId("REPORTS")
        func report(
            _ product: String, _ state: StoreOfferState, offer: String? = nil, message: String? = nil, made: Date? = nil
        ) async throws -> StoreOfferView {
            let settle = world.stores.offerSettle
            return try await world.pool.transaction {
                try StoreOffers.report(
                    $0,
                    Coupons.StoreOfferReport(
                        couponId: coupon, store: .appStore, productId: product, state: state, offerId: offer,
                        customCodeId: offer.map { "code-" + $0 }, codeCreatedAt: made, message: message),
                    now: Date(), settle: settle)
            }
        }
        let made = Date().addingTimeInterval(-60)
        let waiting = try await report("pro.monthly", .waitingForApple, offer: "A1", made: made)
        #expect(waiting.state == .waitingForApple && waiting.offerId == "A1")
        // A repeat, a second report with other ids, and a late failure change nothing.
        #expect(try await report("pro.monthly", .waitingForApple, offer: "A2") == waiting)
        #expect(try await report("pro.monthly", .failed, message: "late") == waiting)
        let row = try await world.pool.query(
            "SELECT offer_id, custom_code_id, code_created_at, message FROM coupons.store_offers WHERE product_id = 'pro.monthly'"
        ).first!
        #expect(
            try row.decode("offer_id", as: String.self) == "A1"
                && row.decode("custom_code_id", as: String.self) == "code-A1")
        #expect(try abs(row.decode("code_created_at", as: Date.self).timeIntervalSince(made)) < 0.01)
        #expect(try row.decodeIfPresent("message", as: String.self) == nil)
        // A failure keeps Apple's message; a later success (a retried provisioning) still lands.
        let failed = try await report("pro.yearly", .failed, message: "STATE_ERROR: too many active offers")
        #expect(failed.state == .failed && failed.message == "STATE_ERROR: too many active offers")
        let retried = try await report("pro.yearly", .waitingForApple, offer: "B1")
        #expect(retried.state == .waitingForApple && retried.message == nil)
        // Only the two states grants reports, of an offer that exists.
        await #expect(throws: ServiceError.self) { try await report("pro.yearly", .ready) }
        let unknown = await #expect(throws: ServiceError.self) { try await report("pro.weekly", .failed) }
        #expect(unknown?.code == .notFound)
    }

    /// A report that moves an offer on commits its webhook event with it, once: `storeOffer.ready`
    /// when the store made the offer, `storeOffer.failed` when it refused; a repeat adds nothing.
    @Test func aReportThatMovesAnOfferCommitsItsEventOnce() async throws {
        let world = try await StoreWorld.make()
        defer { world.close() }
        try await world.plan("pro.monthly")
        try await world.plan("pro.yearly")
        try await world.coupon(StoreWorld.discount("EVENTS", products: ["pro.monthly", "pro.yearly"]))
        let coupon = try await world.couponId("EVENTS")
        func report(
            _ product: String, _ state: StoreOfferState, offer: String? = nil, message: String? = nil
        ) async throws {
            let settle = world.stores.offerSettle
            _ = try await world.pool.transaction {
                try StoreOffers.report(
                    $0,
                    Coupons.StoreOfferReport(
                        couponId: coupon, store: .appStore, productId: product, state: state, offerId: offer, message: message),
                    now: Date(), settle: settle)
            }
        }
        try await report("pro.monthly", .waitingForApple, offer: "A1")
        try await report("pro.monthly", .waitingForApple, offer: "A1")
        try await report("pro.yearly", .failed, message: "STATE_ERROR: too many active offers")
        try await report("pro.yearly", .failed, message: "STATE_ERROR: too many active offers")
        let events = try await world.outbox(WebhookEventNotice.self)
        #expect(events.map(\.event) == [.storeOfferReady, .storeOfferFailed])
        #expect(Set(events.map(\.subject)).count == 2 && events.allSatisfy { $0.mode == .live })
        let data = try events.map {
            try JSONDecoder.wire().decode(StoreOfferEventData.self, from: JSONEncoder.wire().encode($0.data))
        }
        #expect(
            data.first
                == StoreOfferEventData(
                    code: "EVENTS", store: .appStore, productId: "pro.monthly", basePlanId: nil, offerId: "A1", message: nil))
        #expect(data.last?.productId == "pro.yearly" && data.last?.message == "STATE_ERROR: too many active offers")
    }

    /// `ready` (docs/stores.md): the code exists and is on, and the settle time has passed since
    /// Apple made it, or a verified purchase of the offer has arrived.
    @Test func readyIsWorkedOutWhenReadFromTheTimeAndTheFirstPurchase() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        func state(
            _ stored: StoreOfferState, made: TimeInterval?, purchase: Bool = false, off: Bool = false
        ) -> StoreOfferState {
            StoreOfferReadiness.state(
                stored: stored, codeCreatedAt: made.map { now.addingTimeInterval(-$0) },
                firstPurchaseAt: purchase ? now : nil,
                switchedOff: off, now: now, settle: 3600)
        }
        #expect(state(.creating, made: nil) == .creating)
        #expect(state(.failed, made: nil) == .failed)
        #expect(state(.waitingForApple, made: 3599) == .waitingForApple)
        #expect(state(.waitingForApple, made: 3600) == .ready)
        #expect(state(.waitingForApple, made: 10, purchase: true) == .ready)
        #expect(
            state(.waitingForApple, made: 7200, off: true) == .waitingForApple, "an offer switched off is never ready")
        #expect(state(.creating, made: nil, purchase: true) == .creating)
    }

    // MARK: - Validate and redeem on iOS

    @Test func iOSIsNotReadyUntilAnOfferIsReadyThenHandsOffToApple() async throws {
        let world = try await StoreWorld.make(settle: 3600)
        defer { world.close() }
        try await world.plan("pro.monthly")
        try await world.plan("pro.yearly")
        try await world.coupon(StoreWorld.discount("HANDOFF", products: ["pro.monthly", "pro.yearly"]))
        let account = UUID.random()
        #expect(try await world.validate("HANDOFF").reason == .notReady)
        #expect(try await world.redeem("HANDOFF", account: account, productId: "pro.monthly").refusal == .notReady)
        // Other platforms never wait for Apple.
        #expect(try await world.validate("HANDOFF", platform: .web).valid)
        #expect(try await world.validate("HANDOFF", platform: nil).valid)
        // The code exists but has not settled: still not ready.
        try await world.codeMade("HANDOFF", product: "pro.monthly", ago: 60)
        #expect(try await world.validate("HANDOFF").reason == .notReady)
        // Settled (an hour later): valid, for the ready plan only, with the offer and Apple's page.
        let later = Date().addingTimeInterval(3600)
        let answer = try await world.validate("HANDOFF", now: later)
        #expect(answer.valid && answer.eligibleProductIds == ["pro.monthly"])
        #expect(
            answer.offer
                == StoreOfferTerms(
                    kind: .percentOff, percentOff: 30, amountOff: nil, duration: .init(unit: "month", count: 1),
                    periodCount: 3))
        let page = "https://apps.apple.com/redeem?ctx=offercodes&id=1234567890&code=HANDOFF"
        #expect(
            answer.appStore
                == AppStoreHandoff(redemptionUrl: page, appAccountToken: nil, redemptionUrls: ["pro.monthly": page]))
        // Redeem: the yearly plan is not ready; the monthly one reserves and hands off, with the
        // account's token, and no grant command.
        #expect(
            try await world.redeem("HANDOFF", account: account, productId: "pro.yearly", now: later).refusal
                == .notReady)
        let outcome = try await world.redeem("HANDOFF", account: account, productId: "pro.monthly", now: later)
        let r = try #require(outcome.redemption)
        #expect(outcome.created && r.status == .reserved && r.productId == "pro.monthly")
        #expect(
            r.appStore
                == AppStoreHandoff(
                    redemptionUrl: answer.appStore!.redemptionUrl,
                    appAccountToken: StoreIds.appAccountToken(account: account)))
        #expect(
            try await world.pool.query(
                "SELECT app_account_token FROM coupons.redemptions WHERE id = $1", [r.redemptionId]
            ).first!
            .decode("app_account_token", as: UUID.self) == StoreIds.appAccountToken(account: account))
        #expect(try await world.count("SELECT count(*) FROM coupons.outbox WHERE type = $1", [GrantCommand.type]) == 0)
        // Asking again answers the same redemption with the same hand-off (200).
        let again = try await world.redeem("HANDOFF", account: account, productId: "pro.monthly", now: later)
        #expect(
            !again.created && again.redemption?.redemptionId == r.redemptionId
                && again.redemption?.appStore == r.appStore)
        // On the web the same coupon reserves for a hand confirmation, without a hand-off.
        let web = try #require(
            try await world.redeem(
                "HANDOFF", account: UUID.random(), platform: .web, productId: "pro.yearly", now: later
            ).redemption)
        #expect(web.status == .reserved && web.appStore == nil)
    }

    /// A free period with plans: on iOS a store offer (reserved until Apple's purchase), on the web
    /// still Redeem's grant.
    @Test func aFreeTrialOfferIsReservedOnIOSAndGrantedOnTheWeb() async throws {
        let world = try await StoreWorld.make(settle: 0)
        defer { world.close() }
        try await world.plan("pro.monthly")
        var free = CouponInput()
        free.code = "TRIAL-1M"
        free.kind = "freePeriod"
        free.duration = CouponDuration(unit: "month", count: 1)
        free.productIds = ["pro.monthly"]
        free.maxRedemptions = 100
        free.expiresAt = Date().addingTimeInterval(86_400)
        try await world.coupon(free)
        try await world.codeMade("TRIAL-1M")
        let ios = try #require(try await world.redeem("TRIAL-1M", account: UUID.random()).redemption)
        #expect(ios.status == .reserved && ios.appStore != nil)
        let web = try #require(try await world.redeem("TRIAL-1M", account: UUID.random(), platform: .web).redemption)
        #expect(web.status == .granting && web.appStore == nil)
        let grants = try await world.outbox(GrantCommand.self)
        #expect(grants.map(\.redemptionId) == [web.redemptionId], "one grant command: the web's")
    }

    /// Validate and redeem read store offers only for a coupon that has them: for any other, the
    /// offers table is never read, on iOS either.
    @Test func couponsWithoutOffersNeverReadTheOffers() async throws {
        let world = try await StoreWorld.make()
        defer { world.close() }
        var free = CouponInput()
        free.code = "HOT-FREE"
        free.kind = "freePeriod"
        free.duration = CouponDuration(unit: "week", count: 1)
        try await world.coupon(free)
        try await world.coupon(StoreWorld.discount("HOT-WEB", products: ["x"], platforms: ["web"]))
        func reads() async throws -> Int {
            try await world.pool.withConnection { c in
                try c.query("SELECT pg_stat_force_next_flush()")
                return try c.query(
                    "SELECT (seq_scan + coalesce(idx_scan, 0))::int AS n FROM pg_stat_user_tables WHERE relid = 'coupons.store_offers'::regclass"
                )
                .first!.decode("n")
            }
        }
        let before = try await reads()
        for _ in 0..<5 {
            _ = try await world.validate("HOT-FREE")
            _ = try await world.redeem("HOT-FREE", account: UUID.random())
            _ = try await world.validate("HOT-WEB", platform: .web)
        }
        #expect(try await reads() == before)
    }

    // MARK: - Switching off

    @Test func deactivatingOrExpiringSwitchesEveryOfferOffOnce() async throws {
        let world = try await StoreWorld.make()
        defer { world.close() }
        try await world.plan("pro.monthly")
        try await world.plan("pro.yearly")
        try await world.coupon(StoreWorld.discount("GOING-OFF", products: ["pro.monthly", "pro.yearly"]))
        try await world.coupon(StoreWorld.discount("EXPIRING"))
        let stores = world.stores
        func deactivate() async throws -> CouponView {
            try await world.pool.transaction {
                try CouponStore.patch(
                    $0,
                    Coupons.Patch(code: "GOING-OFF", mode: .live, app: DefaultApp.id, active: false,
                        maxRedemptions: nil, expiresAt: nil),
                    stores: stores, now: Date())
            }
        }
        let view = try await deactivate()
        #expect(view.storeOffers?.allSatisfy { $0.switchedOffAt != nil } == true)
        _ = try await deactivate()
        let offs = try await world.outbox(StoreSwitchCommand.self)
        #expect(offs.count == 2 && offs.allSatisfy { $0.reason == .deactivated })
        // Each plan's own App Store code is the one switched off.
        #expect(
            Dictionary(uniqueKeysWithValues: offs.map { ($0.productId, $0.code) }) == [
                "pro.monthly": "GOING-OFF", "pro.yearly": "GOING-OFF-2"
            ])
        #expect(Set(offs.map(\.offerName)).count == 2)
        // Expiry, found by the sweep.
        try await world.pool.query(
            "UPDATE coupons.coupons SET expires_at = now() - interval '1 second' WHERE code = 'EXPIRING'")
        #expect(try await world.pool.withConnection { try StoreOffers.switchOffExpired($0) } == 1)
        #expect(try await world.pool.withConnection { try StoreOffers.switchOffExpired($0) } == 0)
        #expect(
            try await world.outbox(StoreSwitchCommand.self).filter { $0.reason == .expired }.map(\.code) == ["EXPIRING"]
        )
    }

    /// Apple's code is made with Apple's longest expiry and 25,000 uses (OfferProvisioner.codeTerms),
    /// so a coupon with offers may raise its cap and move its expiry, within 6 months of when it was
    /// made (not of the PATCH: the code was made then).
    @Test func aCouponWithOffersMovesItsExpiryWithinSixMonthsOfItsMaking() async throws {
        let world = try await StoreWorld.make()
        defer { world.close() }
        try await world.plan("pro.monthly")
        try await world.coupon(StoreWorld.discount("MOVING", cap: 10))
        let made = Date().addingTimeInterval(-61 * 86_400)
        try await world.pool.query("UPDATE coupons.coupons SET created_at = $1 WHERE code = 'MOVING'", [made])
        let stores = world.stores
        func patch(expires: Date?, cap: Int? = nil) async throws -> CouponView {
            try await world.pool.transaction {
                try CouponStore.patch(
                    $0,
                    Coupons.Patch(
                        code: "MOVING", mode: .live, app: DefaultApp.id, active: nil, maxRedemptions: cap,
                        expiresAt: expires),
                    stores: stores, now: Date())
            }
        }
        let within = AppStoreLimits.latestExpiry(madeAt: made).addingTimeInterval(-3600)
        #expect(try await patch(expires: within, cap: 25_000).maxRedemptions == 25_000)
        // Within 6 months of the PATCH, but not of the coupon's making: Apple's code is gone by then.
        let error = await #expect(throws: ServiceError.self) {
            try await patch(expires: AppStoreLimits.latestExpiry(madeAt: made).addingTimeInterval(86_400))
        }
        #expect(error?.code == .storeLimit && error?.field == "expiresAt")
        let error2 = await #expect(throws: ServiceError.self) { try await patch(expires: nil, cap: 25_001) }
        #expect(error2?.code == .storeLimit && error2?.field == "maxRedemptions")
    }

    /// A full cap switches the offers off, but not while a reservation waits for its App Store
    /// purchase: Apple would refuse the purchase it was made for.
    @Test func aFullCapSwitchesOffersOffOnceNoReservationWaitsForApple() async throws {
        let world = try await StoreWorld.make(settle: 0)
        defer { world.close() }
        try await world.plan("pro.monthly")
        try await world.coupon(StoreWorld.discount("CAP-WEB", cap: 2))
        try await world.coupon(StoreWorld.discount("CAP-IOS", cap: 2))
        try await world.codeMade("CAP-WEB")
        try await world.codeMade("CAP-IOS")
        // Filled by reservations on the web (confirmed by hand, never at Apple): off at once.
        _ = try await world.redeem("CAP-WEB", account: UUID.random(), platform: .web)
        #expect(try await world.outbox(StoreSwitchCommand.self).isEmpty)
        _ = try await world.redeem("CAP-WEB", account: UUID.random(), platform: .web)
        #expect(try await world.outbox(StoreSwitchCommand.self).map(\.reason) == [.capReached])
        // Filled by iOS reservations: on until the last of them completes.
        let a = UUID.random(), b = UUID.random()
        _ = try await world.redeem("CAP-IOS", account: a)
        _ = try await world.redeem("CAP-IOS", account: b)
        #expect(try await world.outbox(StoreSwitchCommand.self).filter { $0.code == "CAP-IOS" }.isEmpty)
        let name = try await world.offerName("CAP-IOS")
        _ = try await world.purchase(
            .init(
                transaction: StoreWorld.transaction(name, chain: "cap-a", token: StoreIds.appAccountToken(account: a))))
        #expect(try await world.outbox(StoreSwitchCommand.self).filter { $0.code == "CAP-IOS" }.isEmpty)
        _ = try await world.purchase(
            .init(
                transaction: StoreWorld.transaction(name, chain: "cap-b", token: StoreIds.appAccountToken(account: b))))
        #expect(
            try await world.outbox(StoreSwitchCommand.self).filter { $0.code == "CAP-IOS" }.map(\.reason) == [
                .capReached
            ])
        #expect(try await world.validate("CAP-IOS").reason == .exhausted)
    }

    /// A coupon that takes uses again switches its offers back on: activated again, its full cap
    /// raised, or a use given back by a released reservation (the sweep). Each switch is a command
    /// of its own, numbered, and iOS waits (`creating`) until grants reports Apple has it on.
    @Test func aCouponThatTakesUsesAgainSwitchesItsOffersBackOn() async throws {
        let world = try await StoreWorld.make(settle: 0)
        defer { world.close() }
        try await world.plan("pro.monthly")
        try await world.coupon(StoreWorld.discount("AGAIN", cap: 1))
        try await world.codeMade("AGAIN")
        let stores = world.stores
        func patch(active: Bool? = nil, cap: Int? = nil) async throws -> CouponView {
            try await world.pool.transaction {
                try CouponStore.patch(
                    $0,
                    Coupons.Patch(
                        code: "AGAIN", mode: .live, app: DefaultApp.id, active: active,
                        maxRedemptions: cap, expiresAt: nil),
                    stores: stores, now: Date())
            }
        }
        func switches() async throws -> [String] {
            try await world.outbox(StoreSwitchCommand.self).map {
                "\($0.generation) \($0.active ? "on" : "off") \($0.reason.rawValue)"
            }
        }
        // Off and on again.
        _ = try await patch(active: false)
        #expect(try await patch(active: true).storeOffers?.map(\.state) == [.creating])
        #expect(try await world.validate("AGAIN").reason == .notReady, "iOS waits until Apple has it on again")
        #expect(try await switches() == ["1 off deactivated", "2 on reopened"])
        // What grants reports once Apple has it on: ready again (its code settled long ago).
        let couponId = try await world.couponId("AGAIN")
        _ = try await world.pool.transaction {
            try StoreOffers.report(
                $0,
                Coupons.StoreOfferReport(
                    couponId: couponId, store: .appStore, productId: "pro.monthly", state: .waitingForApple,
                    offerId: nil, customCodeId: nil, codeCreatedAt: nil), now: Date(), settle: 0)
        }
        #expect(try await world.get("AGAIN").storeOffers?.map(\.state) == [.ready])
        // The cap fills on the web: off. Raised: on.
        _ = try await world.redeem("AGAIN", account: UUID.random(), platform: .web)
        #expect(try await patch(cap: 2).storeOffers?.map(\.state) == [.creating])
        #expect(try await switches() == ["1 off deactivated", "2 on reopened", "3 off capReached", "4 on reopened"])
        // Full again; a reservation released by the sweep gives its use back: on, found by the sweep.
        _ = try await world.redeem("AGAIN", account: UUID.random(), platform: .web)
        #expect(try await switches().last == "5 off capReached")
        #expect(
            try await world.pool.withConnection { try StoreOffers.switchOnReopened($0) } == 0,
            "nothing to switch on while full")
        try await world.pool.query(
            "UPDATE coupons.redemptions SET reservation_expires_at = now() - interval '1 second' WHERE status = 'reserved'"
        )
        _ = try await world.pool.withConnection { try RedemptionStore.releaseExpired($0) }
        #expect(try await world.get("AGAIN").remaining == 2)
        #expect(try await world.pool.withConnection { try StoreOffers.switchOnReopened($0) } == 1)
        #expect(try await world.pool.withConnection { try StoreOffers.switchOnReopened($0) } == 0)
        #expect(try await switches().last == "6 on reopened")
        // An offer Apple never made (failed) is not switched on.
        try await world.pool.query("UPDATE coupons.store_offers SET state = 'failed', switched_off_at = now()")
        #expect(try await world.pool.withConnection { try StoreOffers.switchOnReopened($0) } == 0)
    }

    @Test func aPlanSubscriptionCannotChangeUnderLiveOffers() async throws {
        let world = try await StoreWorld.make()
        defer { world.close() }
        try await world.plan("pro.monthly", subscription: "6447000001")
        try await world.coupon(StoreWorld.discount("PINNED"))
        let patch = Plans.Patch(productId: "pro.monthly", mode: .live, app: DefaultApp.id,
            appStore: .init(subscriptionId: "6447000009"))
        let error = await #expect(throws: ServiceError.self) {
            try await world.pool.transaction { try PlanStore.patch($0, patch) }
        }
        #expect(error?.code == .invalidState && error?.field == "appStore")
        // Its name may change; once the offers are off, so may its subscription.
        #expect(
            try await world.pool.transaction {
                try PlanStore.patch(
                    $0,
                    Plans.Patch(
                        productId: "pro.monthly", mode: .live, app: DefaultApp.id,
                        name: "Pro, monthly"))
            }.name == "Pro, monthly")
        let stores = world.stores
        _ = try await world.pool.transaction {
            try CouponStore.patch(
                $0,
                Coupons.Patch(
                    code: "PINNED", mode: .live, app: DefaultApp.id, active: false, maxRedemptions: nil,
                    expiresAt: nil),
                stores: stores, now: Date())
        }
        #expect(
            try await world.pool.transaction { try PlanStore.patch($0, patch) }.appStore?.subscriptionId == "6447000009"
        )
    }
}
