import Foundation
import Testing
@testable import Core
@testable import CouponsService

/// A batch of reservations of one coupon, planned without a database: what each request comes to,
/// in order, with the cap counted as the batch goes (`ReservationPlan`). The integration suites
/// race real batches against the database's own guards.
@Suite struct ReservationPlanTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let freeWeek = RedemptionRulesTests.freeWeek
    static let discount = RedemptionRulesTests.discount

    static func request(_ account: UUID, platform: Platform = .web, product: String? = nil, sandbox: Bool = false) -> Coupons.Redeem {
        Coupons.Redeem(accountId: account, appUserId: account.lowercasedString, code: "FREE", productId: product, platform: platform,
                       sandbox: sandbox)
    }

    static func inputs(_ d: CouponDefinition = freeWeek, used: Int = 0, test: Bool = false, active: Bool = true) -> ReservationPlan.Inputs {
        ReservationPlan.Inputs(coupon: d, active: active, testCoupon: test, used: used, now: now)
    }

    /// A short name for each step, for the table.
    static func names(_ plan: ReservationPlan) -> [String] {
        plan.steps.map {
            switch $0 {
            case .existing: "existing"
            case .refused(let reason): "refused \(reason.rawValue)"
            case .asksPlayOwnership: "asks"
            case .failed: "failed"
            case .new(let n): "new \(n)"
            case .twin(let n): "twin of \(n)"
            }
        }
    }

    @Test func theCapIsCountedAsTheBatchGoes() {
        var d = Self.freeWeek
        d.maxRedemptions = 3
        let accounts = (0..<4).map { _ in UUID() }
        let plan = ReservationPlan(Self.inputs(d, used: 1), requests: accounts.map { Self.request($0) })
        #expect(Self.names(plan) == ["new 0", "new 1", "refused exhausted", "refused exhausted"])
        #expect(plan.used == 3)
        #expect(plan.fresh.map(\.index) == [0, 1])
        #expect(plan.fresh.allSatisfy { $0.status == .granting })
    }

    @Test func aDoubleTapInTheBatchGetsTheFirstUseAndAnExistingOneIsAnswered() {
        let a = UUID(), b = UUID()
        var inputs = Self.inputs()
        let held = RedemptionView(redemptionId: UUID(), code: "FREE", status: .completed, platform: .web, productId: nil, pricePaid: nil,
                                  sandbox: false, reservedAt: Self.now, completedAt: Self.now, failureReason: nil, entitlement: nil,
                                  accountId: b, appUserId: nil)
        inputs.existing[.init(account: b, sandbox: false)] = held
        let plan = ReservationPlan(inputs, requests: [Self.request(a), Self.request(a), Self.request(b), Self.request(b, sandbox: true)])
        #expect(Self.names(plan) == ["new 0", "twin of 0", "existing", "new 1"])
        #expect(plan.used == 1, "a sandbox use is not counted against the cap")
        #expect(plan.live.count == 1)
    }

    @Test func aTestCouponsUsesAreAllSandboxAndUncounted() {
        var d = Self.freeWeek
        d.maxRedemptions = 1
        let plan = ReservationPlan(Self.inputs(d, used: 1, test: true), requests: [Self.request(UUID()), Self.request(UUID())])
        #expect(Self.names(plan) == ["new 0", "new 1"])
        #expect(plan.fresh.allSatisfy { $0.sandbox })
        #expect(plan.used == 1)
    }

    @Test func aDiscountWaitsForItsPurchaseAndNeedsItsProduct() {
        let plan = ReservationPlan(Self.inputs(Self.discount), requests: [
            Self.request(UUID(), product: "pro.monthly"), Self.request(UUID()), Self.request(UUID(), product: "pro.weekly"),
        ])
        #expect(Self.names(plan) == ["new 0", "failed", "refused notEligible"])
        #expect(plan.fresh.map(\.status) == [.reserved])
        #expect(plan.fresh.map(\.productId) == ["pro.monthly"])
    }

    @Test func throughAStoreAUseWaitsForAReadyOfferAndPlayAsksWhatIsHeld() {
        var d = Self.discount
        d.platforms = [.ios, .android]
        d.hasStoreOffers = true
        d.hasPlayOffers = true
        var inputs = Self.inputs(d)
        inputs.ready = [.appStore: ["pro.monthly": []], .playStore: ["pro.monthly": ["monthly"]]]
        inputs.owning = PlayOwnership(playProducts: ["pro.monthly": "sub.pro", "pro.yearly": "sub.pro"])
        var heldOnPlay = Self.request(UUID(), platform: .android, product: "pro.monthly")
        heldOnPlay.playOwned = ["sub.pro"]
        var freeOnPlay = Self.request(UUID(), platform: .android, product: "pro.monthly")
        freeOnPlay.playOwned = []
        let plan = ReservationPlan(inputs, requests: [
            Self.request(UUID(), platform: .ios, product: "pro.monthly"),
            Self.request(UUID(), platform: .ios, product: "pro.yearly"),
            Self.request(UUID(), platform: .android, product: "pro.monthly"),
            heldOnPlay, freeOnPlay,
        ])
        #expect(Self.names(plan) == ["new 0", "refused notReady", "asks", "refused alreadyOwned", "new 1"])
        #expect(plan.fresh.allSatisfy { $0.status == .reserved })
    }

    @Test func anInactiveCouponRefusesEveryRequest() {
        let plan = ReservationPlan(Self.inputs(active: false), requests: [Self.request(UUID()), Self.request(UUID())])
        #expect(Self.names(plan) == ["refused inactive", "refused inactive"])
        #expect(plan.fresh.isEmpty && plan.used == 0)
    }
}
