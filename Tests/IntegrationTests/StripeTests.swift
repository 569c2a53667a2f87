import Core
import Database
import Foundation
import TestSupport
import XCTest

/// Stripe through the whole stack (docs/stripe.md): a coupon covering the web becomes one Stripe
/// coupon and one promotion code at the fake Stripe, made by grants with the key of the coupon's
/// mode, and its promotion code is switched off with the coupon (deactivation, a full cap) and
/// back on. The tests share one stack and the fake; each makes its own prices, plans and coupons.
final class StripeTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var minter: TokenMinter!
    nonisolated(unsafe) static var stripe: FakeStripe!
    nonisolated(unsafe) static var testKey: String?

    override class func startSuite() throws {
        let stripe = try FakeStripe()
        Self.stripe = stripe
        stack = try Stack(environment: [
            "REDEEM_STRIPE_SECRET_KEY": "\(stripe.keys[.test]!),\(stripe.keys[.live]!)",
            "REDEEM_STRIPE_API_URL": stripe.url.absoluteString,
            "REDEEM_GRANT_MAX_RETRY_SECONDS": "2", "REDEEM_PROVIDER_TIMEOUT_SECONDS": "2",
            "REDEEM_RESERVATION_SWEEP_MS": "500"
        ])
        minter = try stack.minter()
    }

    override class func stopSuite() {
        stack?.stop()
        let done = DispatchSemaphore(value: 0)
        Task {
            await stripe?.stop()
            done.signal()
        }
        done.wait()
    }

    var client: HTTPClient { Self.stack.client }
    var admin: String { Self.stack.adminKey }

    // MARK: - Helpers

    /// A test admin key, made once by the live admin.
    func testAdmin() async throws -> String {
        if let key = Self.testKey { return key }
        let r = try await client.json(
            "POST", "/v1/api-keys", ["name": "stripe test admin", "role": "admin", "mode": "test"], token: admin)
        XCTAssertEqual(r.status, 201, r.text)
        let key = try XCTUnwrap(try r.json()["key"] as? String)
        Self.testKey = key
        return key
    }

    /// A plan sold through Stripe: its price at the fake, of a product of its own.
    func plan(token: String) async throws -> (plan: String, price: String, product: String) {
        let suffix = UUID().uuidString.prefix(8).lowercased().replacingOccurrences(of: "-", with: "")
        let plan = "web.\(suffix)", price = "price_\(suffix)", product = "prod_\(suffix)"
        Self.stripe.addPrice(price, product: product)
        let p = try await client.json(
            "POST", "/v1/plans", ["productId": plan, "name": "Pro", "stripe": ["priceId": price]], token: token)
        XCTAssertEqual(p.status, 201, p.text)
        XCTAssertEqual(try p.json()["stripe"] as? [String: String], ["priceId": price])
        return (plan, price, product)
    }

    func coupon(_ code: String, token: String) async throws -> CouponBody {
        try await client.get("/v1/coupons/\(code)", token: token).decode(CouponBody.self)
    }

    /// Waits until the coupon's Stripe offer is `ready`, and answers it.
    func ready(_ code: String, token: String, seconds: Double = 20) async throws -> StoreOfferBody {
        let ok = try await Self.stack.eventually(seconds) {
            try await self.coupon(code, token: token).storeOffers?.first?.state == "ready"
        }
        XCTAssertTrue(ok, Self.stack.logs())
        let body = try await coupon(code, token: token)
        return try XCTUnwrap(body.storeOffers?.first)
    }

    func promotionCode(of offer: StoreOfferBody) -> FakeStripe.Object? {
        Self.stripe.promotionCodes.first { $0.field("coupon") == offer.offerId }
    }

    func newCode(_ prefix: String) -> String {
        prefix + UUID().uuidString.prefix(8).uppercased().replacingOccurrences(of: "-", with: "")
    }

    func sql(_ text: String, _ params: [any PGBindable] = []) async throws -> PGResult {
        let database = try Self.stack.adminDatabaseURL()
        return try await offThePool { try PGConnection(url: database).query(text, params) }
    }

    // MARK: - Tests

    /// Stripe makes the promotion code but its answer is lost, and grants is killed with SIGKILL
    /// before it hears again: after the restart it finds the code by its coupon and code, so
    /// neither the Stripe coupon nor the promotion code is made twice.
    func testKillingGrantsAfterStripeMadeTheCodeMakesNothingTwice() async throws {
        let (plan, _, _) = try await self.plan(token: admin)
        Self.stripe.losePromotionCodeAnswers(1_000)
        addTeardownBlock { Self.stripe.losePromotionCodeAnswers(0) }
        let code = newCode("WEBKILL")
        let c = try await client.json(
            "POST", "/v1/coupons",
            [
                "code": code, "kind": "percentOff", "percentOff": 20, "duration": ["unit": "month", "count": 1],
                "periodCount": 1, "productIds": [plan], "platforms": ["web"]
            ], token: admin)
        XCTAssertEqual(c.status, 201, c.text)
        let made = try await Self.stack.eventually(20) {
            Self.stripe.promotionCodes.contains { $0.field("code") == code }
        }
        XCTAssertTrue(made, Self.stack.logs())
        func recorded() async throws -> Int {
            try await sql(
                """
                SELECT count(*)::int AS n FROM grants.store_tasks
                WHERE store = 'stripe' AND code = upper($1) AND offer_id IS NOT NULL AND custom_code_id IS NULL
                """, [code]
            ).first!.decode("n")
        }
        let couponRecorded = try await Self.stack.eventually(10) { try await recorded() == 1 }
        XCTAssertTrue(couponRecorded, "grants recorded the Stripe coupon, not the promotion code")
        kill(try Self.stack.pid("grants"), SIGKILL)
        let creating = try await coupon(code, token: admin).storeOffers?.first?.state
        XCTAssertEqual(creating, "creating")

        Self.stripe.losePromotionCodeAnswers(0)
        try await Self.stack.restart("grants")
        // A run cut off mid-call waits out its lease (8 × 2 s + 30 s) before another takes it.
        let offer = try await ready(code, token: admin, seconds: 60)
        XCTAssertEqual(Self.stripe.promotionCodes.filter { $0.field("code") == code }.count, 1)
        let couponPosts = Self.stripe.received.filter {
            $0.method == "POST" && $0.path == "/v1/coupons" && $0.field("id") == offer.offerId
        }
        XCTAssertEqual(couponPosts.count, 1, "the Stripe coupon was made once")
        let promotion = try XCTUnwrap(promotionCode(of: offer))
        XCTAssertTrue(promotion.active)
    }

    func testALiveCouponBecomesOneStripeCouponAndPromotionCode() async throws {
        let (plan, _, product) = try await self.plan(token: admin)
        let (other, _, otherProduct) = try await self.plan(token: admin)
        let code = newCode("WEB")
        let expires = Date().addingTimeInterval(30 * 86_400)
        let c = try await client.json(
            "POST", "/v1/coupons",
            [
                "code": code, "kind": "percentOff", "percentOff": 30, "duration": ["unit": "month", "count": 1],
                "periodCount": 3,
                "productIds": [plan, other], "platforms": ["web"], "maxRedemptions": 50,
                "expiresAt": Timestamp.iso8601(expires)
            ], token: admin)
        XCTAssertEqual(c.status, 201, c.text)
        let offers = try XCTUnwrap(try c.decode(CouponBody.self).storeOffers, c.text)
        XCTAssertEqual(offers.map(\.store), ["stripe"])

        let offer = try await ready(code, token: admin)
        let stripeCoupon = try XCTUnwrap(Self.stripe.coupon(try XCTUnwrap(offer.offerId)))
        XCTAssertTrue(stripeCoupon.livemode)
        XCTAssertEqual(stripeCoupon.field("percent_off"), "30")
        XCTAssertNil(stripeCoupon.field("amount_off"))
        XCTAssertEqual(stripeCoupon.field("duration"), "repeating")
        XCTAssertEqual(stripeCoupon.field("duration_in_months"), "3")
        XCTAssertEqual(Set(stripeCoupon.fields("applies_to[products][]")), [product, otherProduct])
        let promo = try XCTUnwrap(promotionCode(of: offer))
        XCTAssertEqual(promo.field("code"), code)
        XCTAssertEqual(promo.field("max_redemptions"), "50")
        XCTAssertEqual(promo.field("expires_at"), String(Int(expires.timeIntervalSince1970)))
        XCTAssertTrue(promo.active)
        XCTAssertEqual(
            Self.stripe.coupons.filter {
                $0.field("metadata[redeem_coupon_id]") == stripeCoupon.field("metadata[redeem_coupon_id]")
            }.count, 1)
        XCTAssertEqual(Self.stripe.promotionCodes.filter { $0.field("code") == code }.count, 1)
        // Every call for a live coupon carried the live key.
        XCTAssertTrue(
            Self.stripe.received.filter { $0.field("code") == code || $0.field("id") == offer.offerId }.allSatisfy {
                $0.mode == .live
            })

        // Deactivated: the promotion code goes off; activated again: back on.
        let off = try await client.json("PATCH", "/v1/coupons/\(code)", ["active": false], token: admin)
        XCTAssertEqual(off.status, 200, off.text)
        let wentOff = try await Self.stack.eventually(20) { self.promotionCode(of: offer)?.active == false }
        XCTAssertTrue(wentOff, Self.stack.logs())
        let on = try await client.json("PATCH", "/v1/coupons/\(code)", ["active": true], token: admin)
        XCTAssertEqual(on.status, 200, on.text)
        let cameBack = try await Self.stack.eventually(20) { self.promotionCode(of: offer)?.active == true }
        XCTAssertTrue(cameBack, Self.stack.logs())
        let again = try await ready(code, token: admin)
        XCTAssertEqual(again.offerId, offer.offerId)
        XCTAssertEqual(
            Self.stripe.promotionCodes.filter { $0.field("code") == code }.count, 1, "switched, never made twice")
    }

    func testATestCouponUsesTheTestKeyOnly() async throws {
        let test = try await testAdmin()
        let (plan, _, product) = try await self.plan(token: test)
        let code = newCode("WEBT")
        let c = try await client.json(
            "POST", "/v1/coupons",
            [
                "code": code, "kind": "amountOff", "amountOff": ["amount": "4.90", "currency": "USD"],
                "duration": ["unit": "week", "count": 1], "periodCount": 1,
                "productIds": [plan], "platforms": ["web"], "newCustomersOnly": true
            ], token: test)
        XCTAssertEqual(c.status, 201, c.text)
        let offer = try await ready(code, token: test)
        XCTAssertEqual(offer.store, "stripe")
        let stripeCoupon = try XCTUnwrap(Self.stripe.coupon(try XCTUnwrap(offer.offerId)))
        XCTAssertFalse(stripeCoupon.livemode)
        XCTAssertEqual(stripeCoupon.field("amount_off"), "490")
        XCTAssertEqual(stripeCoupon.field("currency"), "usd")
        XCTAssertEqual(stripeCoupon.field("duration"), "once")
        XCTAssertEqual(stripeCoupon.fields("applies_to[products][]"), [product])
        let promo = try XCTUnwrap(promotionCode(of: offer))
        XCTAssertFalse(promo.livemode)
        XCTAssertNil(promo.field("max_redemptions"))
        XCTAssertEqual(promo.field("restrictions[first_time_transaction]"), "true")
        let calls = Self.stripe.received.filter {
            $0.field("code") == code || $0.field("id") == offer.offerId || $0.field("coupon") == offer.offerId
        }
        XCTAssertGreaterThanOrEqual(calls.count, 2)
        XCTAssertTrue(calls.allSatisfy { $0.mode == .test }, "a test coupon reaches Stripe with the test key only")
    }

    func testAFullCapSwitchesThePromotionCodeOff() async throws {
        let (plan, _, _) = try await self.plan(token: admin)
        let code = newCode("WEBCAP")
        let c = try await client.json(
            "POST", "/v1/coupons",
            [
                "code": code, "kind": "percentOff", "percentOff": 50, "duration": ["unit": "month", "count": 1],
                "periodCount": 2,
                "productIds": [plan], "platforms": ["web"], "maxRedemptions": 1
            ], token: admin)
        XCTAssertEqual(c.status, 201, c.text)
        let offer = try await ready(code, token: admin)
        let u = try Self.minter.user()
        let r = try await client.json(
            "POST", "/v1/redemptions", ["code": code, "platform": "web", "productId": plan], token: u.token)
        XCTAssertEqual(r.status, 201, r.text)
        let id = try XCTUnwrap(try r.json()["redemptionId"] as? String)
        let supportKey =
            try await client.json(
                "POST", "/v1/api-keys", ["name": "stripe support", "role": "support", "mode": "live"], token: admin
            )
            .json()["key"] as? String
        let paid = try await client.json(
            "POST", "/v1/redemptions/\(id)/purchase",
            ["pricePaid": ["amount": "4.99", "currency": "USD"], "storeTransactionId": "sub_cap_\(code)"],
            token: try XCTUnwrap(supportKey))
        XCTAssertEqual(paid.status, 200, paid.text)
        let wentOff = try await Self.stack.eventually(20) { self.promotionCode(of: offer)?.active == false }
        XCTAssertTrue(wentOff, Self.stack.logs())
    }

    func testExpiringSwitchesThePromotionCodeOff() async throws {
        let (plan, _, _) = try await self.plan(token: admin)
        let code = newCode("WEBEXP")
        let expires = Date().addingTimeInterval(8)
        let c = try await client.json(
            "POST", "/v1/coupons",
            [
                "code": code, "kind": "percentOff", "percentOff": 15, "duration": ["unit": "month", "count": 1],
                "periodCount": 1, "productIds": [plan], "platforms": ["web"], "expiresAt": Timestamp.iso8601(expires)
            ], token: admin)
        XCTAssertEqual(c.status, 201, c.text)
        let offer = try await ready(code, token: admin)
        XCTAssertEqual(promotionCode(of: offer)?.active, true)
        let wentOff = try await Self.stack.eventually(20) { self.promotionCode(of: offer)?.active == false }
        XCTAssertTrue(wentOff, Self.stack.logs())
        XCTAssertGreaterThanOrEqual(Date(), expires, "switched off once expired, not before")
    }

    func testACouponWithoutStripePlansIsRefused() async throws {
        let plain = "plain." + UUID().uuidString.prefix(6).lowercased()
        let p = try await client.json("POST", "/v1/plans", ["productId": plain, "name": "Plain"], token: admin)
        XCTAssertEqual(p.status, 201, p.text)
        let c = try await client.json(
            "POST", "/v1/coupons",
            [
                "code": newCode("WEBNO"), "kind": "percentOff", "percentOff": 10,
                "duration": ["unit": "month", "count": 1], "periodCount": 1,
                "productIds": [plain], "platforms": ["web"]
            ], token: admin)
        XCTAssertEqual(c.status, 422, c.text)
        XCTAssertEqual(c.errorField, "productIds")
        let bad = try await client.json(
            "POST", "/v1/plans", ["productId": "bad." + plain, "name": "Bad", "stripe": ["priceId": "prod_x"]],
            token: admin)
        XCTAssertEqual(bad.status, 422, bad.text)
        XCTAssertEqual(bad.errorField, "stripe.priceId")
    }
}
