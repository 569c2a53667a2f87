import Foundation
import Testing

@testable import Core
@testable import CouponsService

/// The refusal rules as a table: `RedemptionRules.decide`, which validate and
/// reservation (a batch, of one request or many) both ask. The integration suites keep one case
/// per refusal over HTTP, and the races.
@Suite struct RedemptionRulesTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func coupon(
        _ d: CouponDefinition = RedemptionRulesTests.freeWeek, _ change: (inout CouponDefinition) -> Void = { _ in }
    ) -> CouponDefinition {
        var d = d
        change(&d)
        return d
    }

    static let freeWeek = CouponDefinition(
        code: "FREE", kind: .freePeriod, percentOff: nil, amountOff: nil, currency: nil,
        duration: CouponDuration(unit: "week", count: 1), periodCount: nil, entitlementId: "pro",
        productIds: [], platforms: [.ios, .web], startsAt: nil, expiresAt: nil, maxRedemptions: 10,
        newCustomersOnly: false)
    static let discount = CouponDefinition(
        code: "DISC", kind: .percentOff, percentOff: 30, amountOff: nil, currency: nil,
        duration: CouponDuration(unit: "month", count: 1), periodCount: 3, entitlementId: nil,
        productIds: ["pro.monthly", "pro.yearly"], platforms: [.ios, .android, .web], startsAt: nil,
        expiresAt: nil, maxRedemptions: nil, newCustomersOnly: false)

    func decide(
        _ d: CouponDefinition, active: Bool = true, platform: Platform? = .web, productId: String? = nil,
        resolveProduct: Bool = true,
        holdsUse: Bool = false, veteran: Bool = false, usesTaken: Int? = 0, ready: Set<String>? = nil,
        owned: Set<String>? = nil
    ) throws -> RedemptionRules.Decision {
        try RedemptionRules.decide(
            .init(
                coupon: d, active: active, platform: platform, productId: productId, resolveProduct: resolveProduct,
                holdsUse: holdsUse, veteran: veteran, usesTaken: usesTaken, readyProducts: ready, ownedProducts: owned,
                now: now))
    }

    @Test func eachRuleRefusesWithItsReason() throws {
        let later = now.addingTimeInterval(60), earlier = now.addingTimeInterval(-60)
        let table: [(String, RedemptionRules.Decision)] = [
            ("open", try decide(coupon())),
            ("inactive", try decide(coupon(), active: false)),
            ("not started", try decide(coupon { $0.startsAt = later })),
            ("starts now", try decide(coupon { $0.startsAt = now })),
            ("expired", try decide(coupon { $0.expiresAt = earlier })),
            ("expires now", try decide(coupon { $0.expiresAt = now })),
            ("other platform", try decide(coupon(), platform: .android)),
            ("no platform named", try decide(coupon(), platform: nil)),
            ("product not covered", try decide(coupon(Self.discount), productId: "pro.weekly")),
            ("holds a use", try decide(coupon(), holdsUse: true)),
            ("veteran, open coupon", try decide(coupon(), veteran: true)),
            ("veteran, new customers only", try decide(coupon { $0.newCustomersOnly = true }, veteran: true)),
            ("cap reached", try decide(coupon(), usesTaken: 10)),
            ("cap not counted here", try decide(coupon(), usesTaken: nil))
        ]
        let expected: [RedemptionRules.Decision] = [
            .reserve(productId: nil), .refuse(.inactive), .refuse(.notStarted), .reserve(productId: nil),
            .refuse(.expired), .refuse(.expired),
            .refuse(.notEligible), .reserve(productId: nil), .refuse(.notEligible), .refuse(.alreadyRedeemed),
            .reserve(productId: nil),
            .refuse(.notEligible), .refuse(.exhausted), .reserve(productId: nil)
        ]
        for ((name, got), want) in zip(table, expected) { #expect(got == want, "\(name)") }
    }

    /// The first rule that fails names the reason: the rules' order.
    @Test func theFirstRuleThatFailsIsTheReason() throws {
        let everything = coupon {
            $0.expiresAt = now.addingTimeInterval(-1)
            $0.newCustomersOnly = true
        }
        #expect(
            try decide(everything, active: false, platform: .android, holdsUse: true, veteran: true, usesTaken: 10)
                == .refuse(.inactive))
        #expect(
            try decide(everything, platform: .android, holdsUse: true, veteran: true, usesTaken: 10)
                == .refuse(.expired))
        let open = coupon { $0.newCustomersOnly = true }
        #expect(
            try decide(open, platform: .android, holdsUse: true, veteran: true, usesTaken: 10) == .refuse(.notEligible))
        #expect(try decide(open, holdsUse: true, veteran: true, usesTaken: 10) == .refuse(.alreadyRedeemed))
        #expect(try decide(open, veteran: true, usesTaken: 10) == .refuse(.notEligible))
        #expect(try decide(open, usesTaken: 10) == .refuse(.exhausted))
    }

    /// `webOnly`: a free period Redeem grants, asked for inside an iOS app (App Review 3.1.1), right
    /// after the coupon's own standing and the platform; not once the operator allows it in the app,
    /// nor for a free period that became an App Store offer, a discount, or another platform.
    @Test func aFreePeriodRedeemGrantsIsWebOnlyInsideAnIOSApp() throws {
        let table: [(String, RedemptionRules.Decision)] = [
            ("iOS", try decide(coupon(), platform: .ios)),
            ("web", try decide(coupon(), platform: .web)),
            ("Android", try decide(coupon { $0.platforms = [.android, .ios] }, platform: .android)),
            ("iOS, allowed in the app", try decide(coupon { $0.allowInApp = true }, platform: .ios)),
            (
                "iOS, an App Store offer",
                try decide(
                    coupon {
                        $0.productIds = ["pro.monthly"]
                        $0.hasStoreOffers = true
                    }, platform: .ios,
                    ready: ["pro.monthly"])
            ),
            ("iOS, a discount", try decide(coupon(Self.discount), platform: .ios, productId: "pro.yearly")),
            ("iOS, expired first", try decide(coupon { $0.expiresAt = now }, platform: .ios)),
            ("iOS, not covered first", try decide(coupon { $0.platforms = [.web] }, platform: .ios)),
            ("iOS, before a use held", try decide(coupon(), platform: .ios, holdsUse: true)),
            ("iOS, before the cap", try decide(coupon(), platform: .ios, usesTaken: 10))
        ]
        let expected: [RedemptionRules.Decision] = [
            .refuse(.webOnly), .reserve(productId: nil), .reserve(productId: nil), .reserve(productId: nil),
            .reserve(productId: nil),
            .reserve(productId: "pro.yearly"), .refuse(.expired), .refuse(.notEligible), .refuse(.webOnly),
            .refuse(.webOnly)
        ]
        for ((name, got), want) in zip(table, expected) { #expect(got == want, "\(name)") }
    }

    /// A discount needs a product: the coupon's only one when none is named, an input error when it
    /// covers several; validate does not ask for one.
    @Test func aDiscountResolvesItsProductOnlyWhenReserving() throws {
        #expect(try decide(coupon(Self.discount), productId: "pro.yearly") == .reserve(productId: "pro.yearly"))
        #expect(
            try decide(coupon(Self.discount) { $0.productIds = ["pro.monthly"] }) == .reserve(productId: "pro.monthly"))
        let error = #expect(throws: ServiceError.self) { try decide(coupon(Self.discount)) }
        #expect(error?.field == "productId")
        #expect(try decide(coupon(Self.discount), resolveProduct: false) == .reserve(productId: nil))
        // A refusal before the product rule wins over the missing product.
        #expect(try decide(coupon(Self.discount), active: false) == .refuse(.inactive))
    }

    /// `notReady` (last in the order): for a request that goes through the App Store
    /// (`ready` is the set of plans whose offer is ready; nil for any other request), the product
    /// asked for must be ready, and without a product, at least one plan must be.
    @Test func notReadyComesLastAndAsksForAReadyPlan() throws {
        let store = coupon(Self.discount) {
            $0.hasStoreOffers = true
            $0.maxRedemptions = 10
        }
        let table: [(String, RedemptionRules.Decision)] = [
            ("validate, no plan ready", try decide(store, platform: .ios, resolveProduct: false, ready: [])),
            (
                "validate, one plan ready",
                try decide(store, platform: .ios, resolveProduct: false, ready: ["pro.yearly"])
            ),
            (
                "redeem, its plan not ready",
                try decide(store, platform: .ios, productId: "pro.monthly", ready: ["pro.yearly"])
            ),
            (
                "redeem, its plan ready",
                try decide(store, platform: .ios, productId: "pro.yearly", ready: ["pro.yearly"])
            ),
            (
                "redeem, the only plan resolved, not ready",
                try decide(coupon(store) { $0.productIds = ["pro.monthly"] }, platform: .ios, ready: [])
            ),
            ("not through the store", try decide(store, platform: .web, productId: "pro.monthly", ready: nil)),
            ("inactive first", try decide(store, active: false, platform: .ios, resolveProduct: false, ready: [])),
            ("exhausted first", try decide(store, platform: .ios, resolveProduct: false, usesTaken: 10, ready: [])),
            (
                "new customers first",
                try decide(
                    coupon(store) { $0.newCustomersOnly = true }, platform: .ios, resolveProduct: false, veteran: true,
                    ready: [])
            ),
            (
                "already redeemed first",
                try decide(store, platform: .ios, resolveProduct: false, holdsUse: true, ready: [])
            ),
            ("a product not covered first", try decide(store, platform: .ios, productId: "pro.weekly", ready: []))
        ]
        let expected: [RedemptionRules.Decision] = [
            .refuse(.notReady), .reserve(productId: nil), .refuse(.notReady), .reserve(productId: "pro.yearly"),
            .refuse(.notReady),
            .reserve(productId: "pro.monthly"), .refuse(.inactive), .refuse(.exhausted), .refuse(.notEligible),
            .refuse(.alreadyRedeemed),
            .refuse(.notEligible)
        ]
        for ((name, got), want) in zip(table, expected) { #expect(got == want, "\(name)") }
        // A free period with plans names no product on redeem: any ready plan will do.
        let trial = coupon {
            $0.productIds = ["pro.monthly"]
            $0.hasStoreOffers = true
        }
        #expect(try decide(trial, platform: .ios, ready: ["pro.monthly"]) == .reserve(productId: nil))
        #expect(try decide(trial, platform: .ios, ready: []) == .refuse(.notReady))
    }

    /// `alreadyOwned` (docs/stores.md, after `notReady`): for a request through Google Play whose
    /// account's Play subscriptions are known (`owned`: the coupon's plans held there; nil when not
    /// known), the product asked for must not be held, and without a product, some ready plan
    /// must not be.
    @Test func alreadyOwnedComesAfterNotReadyAndRefusesOnlyAHeldPlan() throws {
        let play = coupon(Self.discount) {
            $0.hasPlayOffers = true
            $0.maxRedemptions = 10
        }
        let both: Set<String> = ["pro.monthly", "pro.yearly"]
        let table: [(String, RedemptionRules.Decision)] = [
            (
                "validate, every ready plan held",
                try decide(
                    play, platform: .android, resolveProduct: false, ready: ["pro.monthly"], owned: ["pro.monthly"])
            ),
            (
                "validate, another ready plan free",
                try decide(play, platform: .android, resolveProduct: false, ready: both, owned: ["pro.monthly"])
            ),
            (
                "validate, nothing held",
                try decide(play, platform: .android, resolveProduct: false, ready: both, owned: [])
            ),
            (
                "validate, not known",
                try decide(play, platform: .android, resolveProduct: false, ready: both, owned: nil)
            ),
            (
                "redeem, its plan held",
                try decide(play, platform: .android, productId: "pro.monthly", ready: both, owned: ["pro.monthly"])
            ),
            (
                "redeem, another plan held",
                try decide(play, platform: .android, productId: "pro.yearly", ready: both, owned: ["pro.monthly"])
            ),
            (
                "redeem, the only plan resolved, held",
                try decide(
                    coupon(play) { $0.productIds = ["pro.monthly"] }, platform: .android,
                    ready: ["pro.monthly"], owned: ["pro.monthly"])
            ),
            (
                "notReady first",
                try decide(play, platform: .android, productId: "pro.monthly", ready: [], owned: ["pro.monthly"])
            ),
            (
                "exhausted first",
                try decide(play, platform: .android, productId: "pro.monthly", usesTaken: 10, ready: both, owned: both)
            ),
            (
                "already redeemed first",
                try decide(play, platform: .android, resolveProduct: false, holdsUse: true, ready: both, owned: both)
            )
        ]
        let expected: [RedemptionRules.Decision] = [
            .refuse(.alreadyOwned), .reserve(productId: nil), .reserve(productId: nil), .reserve(productId: nil),
            .refuse(.alreadyOwned),
            .reserve(productId: "pro.yearly"), .refuse(.alreadyOwned), .refuse(.notReady), .refuse(.exhausted),
            .refuse(.alreadyRedeemed)
        ]
        for ((name, got), want) in zip(table, expected) { #expect(got == want, "\(name)") }
        #expect(table.count == expected.count)
    }

    /// Which coupons become App Store offers, and which requests go through the App Store.
    @Test func discountsAndFreePeriodsWithPlansCoveringIOSBecomeOffersWhileConnected() {
        #expect(Self.discount.needsOffers(in: .appStore, connected: true))
        #expect(!Self.discount.needsOffers(in: .appStore, connected: false))
        #expect(!coupon(Self.discount) { $0.platforms = [.web, .android] }.needsOffers(in: .appStore, connected: true))
        #expect(
            !Self.freeWeek.needsOffers(in: .appStore, connected: true),
            "a free period without plans stays Redeem's grant")
        #expect(coupon { $0.productIds = ["pro.monthly"] }.needsOffers(in: .appStore, connected: true))
        let store = coupon(Self.discount) { $0.hasStoreOffers = true }
        #expect(store.goesThroughAppStore(.ios) && !store.goesThroughAppStore(.web) && !store.goesThroughAppStore(nil))
        #expect(!Self.discount.goesThroughAppStore(.ios))
    }
}
