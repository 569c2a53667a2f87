import Foundation
import Testing

@testable import Core
@testable import GrantsService

/// What a coupon's terms become at Stripe (`StripeCouponRequest`), and which mode a Stripe key
/// serves (`StripeKeys`): the table of terms, and keys refused without being echoed.
@Suite struct StripeCouponRequestTests {
    func command(
        _ kind: CouponKind, percent: Int? = nil, amount: Money? = nil, unit: String = "month", count: Int = 1,
        periods: Int = 1, cap: Int? = nil, newCustomersOnly: Bool = false, expires: Date? = nil
    ) -> StoreProvisionCommand {
        StoreProvisionCommand(
            commandId: UUID.random(), couponId: UUID(parsing: "0192f5a4-7b1c-7d3e-9a4b-1c2d3e4f5a6b")!,
            code: "SPRING30",
            mode: .live, store: .stripe, productId: "", subscriptionId: "price_a,price_b",
            offerName: "redeem-0123456789abcdef01234567",
            offer: StoreOfferTerms(
                kind: kind, percentOff: percent, amountOff: amount, duration: CouponDuration(unit: unit, count: count),
                periodCount: periods),
            newCustomersOnly: newCustomersOnly, maxRedemptions: cap, expiresAt: expires)
    }

    func form(_ c: StoreProvisionCommand, products: [String] = ["prod_a"]) throws -> [String: [String]] {
        let pairs = try StripeCouponRequest.coupon(c, products: products).get()
        return Dictionary(grouping: pairs, by: { $0.0 }).mapValues { $0.map { $0.1 } }
    }

    @Test func percentOffForThreeMonthsRepeats() throws {
        let f = try form(command(.percentOff, percent: 30, periods: 3), products: ["prod_a", "prod_b"])
        #expect(f["id"] == ["redeem-0123456789abcdef01234567"])
        #expect(f["percent_off"] == ["30"])
        #expect(f["amount_off"] == nil)
        #expect(f["duration"] == ["repeating"])
        #expect(f["duration_in_months"] == ["3"])
        #expect(f["applies_to[products][]"] == ["prod_a", "prod_b"])
    }

    @Test func amountOffIsInMinorUnitsAndAWeekIsOnce() throws {
        let f = try form(command(.amountOff, amount: Money(amount: "4.90", currency: "USD"), unit: "week"))
        #expect(f["amount_off"] == ["490"])
        #expect(f["currency"] == ["usd"])
        #expect(f["duration"] == ["once"])
        #expect(f["duration_in_months"] == nil)
        let yen = try form(command(.amountOff, amount: Money(amount: "500", currency: "JPY")))
        #expect(yen["amount_off"] == ["500"])
    }

    @Test func aFreeYearIsAHundredPercentForTwelveMonths() throws {
        let f = try form(command(.freePeriod, unit: "year"))
        #expect(f["percent_off"] == ["100"])
        #expect(f["duration_in_months"] == ["12"])
    }

    @Test func thePromotionCodeCarriesTheCodeCapExpiryAndFirstTimeRule() {
        let expires = Date(timeIntervalSince1970: 1_900_000_000)
        let pairs = StripeCouponRequest.promotionCode(
            command(.percentOff, percent: 10, cap: 50, newCustomersOnly: true, expires: expires), couponId: "redeem-x")
        let f = Dictionary(grouping: pairs, by: { $0.0 }).mapValues { $0.map { $0.1 } }
        #expect(f["coupon"] == ["redeem-x"])
        #expect(f["code"] == ["SPRING30"])
        #expect(f["max_redemptions"] == ["50"])
        #expect(f["expires_at"] == ["1900000000"])
        #expect(f["restrictions[first_time_transaction]"] == ["true"])
        let open = StripeCouponRequest.promotionCode(command(.percentOff, percent: 10), couponId: "redeem-x")
        #expect(!open.contains { $0.0 == "max_redemptions" || $0.0 == "restrictions[first_time_transaction]" })
    }

    @Test func aFormIsEncodedAsStripeReadsIt() {
        let body = StripeClient.formBody([("applies_to[products][]", "prod_a"), ("name", "Redeem A&B")])
        #expect(String(decoding: body, as: UTF8.self) == "applies_to%5Bproducts%5D%5B%5D=prod_a&name=Redeem%20A%26B")
    }

    @Test func keysServeTheModeTheirPrefixSays() throws {
        let both = try StripeKeys(text: "sk_test_abc123, sk_live_def456")
        #expect(both.modes == [.live, .test])
        #expect(both.key(for: .test) == "sk_test_abc123")
        #expect(both.key(for: .live) == "sk_live_def456")
        #expect(!both.description.contains("abc123"))
        let testOnly = try StripeKeys(text: "rk_test_abc123")
        #expect(testOnly.modes == [.test])
        #expect(testOnly.key(for: .live) == nil)
        for bad in ["pk_test_abc", "sk_test_", "whsec_abc", "sk_test_a,sk_test_b", "", "sk_test_a b"] {
            do {
                _ = try StripeKeys(text: bad)
                Issue.record("\(bad) was taken")
            } catch let e as ConfigError {
                #expect(!e.description.contains("abc") || bad.isEmpty, "the key is not echoed")
            }
        }
    }
}
