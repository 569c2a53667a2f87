import Core
import Database
import Foundation
import Runtime
import TestSupport
import XCTest

/// App Store offers made by the stack as `run-stack` starts it, against the fake App Store Connect
/// on loopback (docs/stores.md): coupons writes the provision command, grants stores it, makes the
/// offer and its code and reports back; grants killed with SIGKILL between the offer and the code
/// makes neither twice; a deactivation switches both off within seconds. The tests share one stack
/// and the fake; each makes its own plan and coupon and counts only its own offer's calls.
final class StoreProvisioningTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var fake: FakeAppStoreConnect!
    nonisolated(unsafe) static var key: TestAppleAPIKey!
    static let subscription = "6447000001"
    static let yearlySubscription = "6447000002"

    override class func startSuite() throws {
        key = try TestAppleAPIKey()
        var limits = FakeAppStoreConnect.Limits()
        // For raising a full cap (StoreTaskTests covers an Apple that refuses).
        limits.offersSwitchBackOn = true
        fake = try FakeAppStoreConnect(key: key, limits: limits)
        fake.addSubscription(
            subscription,
            [
                .init(
                    territory: "USA", currency: "USD", current: "9.99",
                    points: ["0.99", "2.99", "4.49", "4.99", "5.99", "7.99", "9.99"]),
                .init(territory: "GBR", currency: "GBP", current: "8.99", points: ["0.99", "4.49", "4.99", "8.99"])
            ])
        fake.addSubscription(
            yearlySubscription, [.init(territory: "USA", currency: "USD", current: "59.99", points: ["29.99", "59.99"])]
        )
        stack = try Stack(environment: [
            "REDEEM_ASC_KEY_ID": key.keyId, "REDEEM_ASC_ISSUER_ID": key.issuerId,
            "REDEEM_ASC_PRIVATE_KEY": key.privateKeyFile.path,
            "REDEEM_ASC_URL": fake.url.absoluteString, "REDEEM_APPLE_APP_ID": "1234567890",
            "REDEEM_APPLE_OFFER_SETTLE": "1",
            "REDEEM_GRANT_MAX_RETRY_SECONDS": "2", "REDEEM_PROVIDER_TIMEOUT_SECONDS": "2"
        ])
    }

    override class func stopSuite() {
        stack?.stop()
        let done = DispatchSemaphore(value: 0)
        Task {
            await fake?.stop()
            done.signal()
        }
        done.wait()
    }

    var client: HTTPClient { Self.stack.client }
    var admin: String { Self.stack.adminKey }

    func sql(_ text: String, _ params: [any PGBindable] = []) async throws -> PGResult {
        let database = try Self.stack.adminDatabaseURL()
        return try await offThePool { try PGConnection(url: database).query(text, params) }
    }

    /// A code, and the plan it is for, of the calling test's own.
    static func names(_ prefix: String) -> (code: String, plan: String) {
        let suffix = UUID().uuidString.prefix(6)
        return ("\(prefix)-\(suffix)", "pro.\(prefix.lowercased()).\(suffix.lowercased())")
    }

    func plan(_ productId: String, subscription: String = StoreProvisioningTests.subscription) async throws {
        _ = try await sql(
            """
            INSERT INTO coupons.plans (id, mode, product_id, name, app_store_subscription_id) VALUES (gen_random_uuid(), 'live', $1, $1, $2)
            ON CONFLICT DO NOTHING
            """, [productId, subscription])
    }

    func coupon(_ code: String, product: String, cap: Int = 100, also: [String] = []) async throws {
        let r = try await client.json(
            "POST", "/v1/coupons",
            [
                "code": code, "kind": "percentOff", "percentOff": 50, "duration": ["unit": "month", "count": 1],
                "periodCount": 3,
                "productIds": also + [product], "maxRedemptions": cap,
                "expiresAt": Timestamp.iso8601(Date().addingTimeInterval(30 * 86_400))
            ], token: admin)
        XCTAssertEqual(r.status, 201, r.text)
    }

    func offerState(_ code: String) async throws -> String? {
        try await client.get("/v1/coupons/\(code)", token: admin).decode(CouponBody.self).storeOffers?.first?.state
    }

    /// The name of the offer coupons made for `code`.
    func offerName(_ code: String) async throws -> String {
        let row = try await sql(
            """
            SELECT o.offer_name FROM coupons.store_offers o JOIN coupons.coupons c ON c.id = o.coupon_id WHERE c.code = $1
            """, [code]
        ).first
        return try XCTUnwrap(row).decode("offer_name")
    }

    /// POSTs to `path` whose body names `text` (an offer's name, a custom code).
    func posts(_ path: String, naming text: String) -> Int {
        Self.fake.received.filter {
            $0.method == "POST" && $0.path == path && String(decoding: $0.body, as: UTF8.self).contains(text)
        }.count
    }

    func testKillingGrantsBetweenTheOfferAndTheCodeMakesNeitherTwice() async throws {
        let (code, product) = Self.names("KILL")
        try await plan(product)
        Self.fake.failCodeCreations(1_000)
        addTeardownBlock { Self.fake.failCodeCreations(0) }
        try await coupon(code, product: product)
        let name = try await offerName(code)
        // The offer is made and recorded; every code creation fails until grants is killed.
        let stalled = try await Self.stack.eventually(20) {
            Self.fake.offers.contains { $0.name == name }
                && self.posts("/v1/subscriptionOfferCodeCustomCodes", naming: code) >= 1
        }
        XCTAssertTrue(stalled, Self.stack.logs())
        func recorded() async throws -> Int {
            try await sql(
                """
                SELECT count(*)::int AS n FROM grants.store_tasks WHERE offer_name = $1 AND offer_id IS NOT NULL AND custom_code_id IS NULL
                """, [name]
            ).first!.decode("n")
        }
        let offerRecorded = try await Self.stack.eventually(10) { try await recorded() == 1 }
        XCTAssertTrue(offerRecorded, "grants recorded the offer before the code")
        kill(try Self.stack.pid("grants"), SIGKILL)
        let stillRecorded = try await recorded()
        XCTAssertEqual(stillRecorded, 1)
        let waiting = try await offerState(code)
        XCTAssertEqual(waiting, "creating")

        Self.fake.failCodeCreations(0)
        try await Self.stack.restart("grants")
        // A run cut off mid-call waits out its lease (8 × 2 s + 30 s) before another takes it.
        let ready = try await Self.stack.eventually(60) {
            ["waitingForApple", "ready"].contains(try await self.offerState(code) ?? "")
        }
        XCTAssertTrue(ready, Self.stack.logs())
        XCTAssertEqual(Self.fake.offers.filter { $0.name == name }.count, 1)
        XCTAssertEqual(Self.fake.customCodes.filter { $0.customCode == code }.count, 1)
        XCTAssertEqual(posts("/v1/subscriptionOfferCodes", naming: name), 1, "the offer was made once")
        let settled = try await Self.stack.eventually(10) { try await self.offerState(code) == "ready" }
        XCTAssertTrue(settled, "ready once the settle time (1 s) has passed")
    }

    /// Apple takes a custom code once per app. A coupon on two plans (listed out of order) gets an
    /// offer on each: the plan whose product id sorts first with the coupon's exact code, the other
    /// with `-2`. Both become ready, and iOS clients are handed each plan's own code.
    func testEachPlanOfATwoPlanCouponGetsItsOwnCodeAndBothBecomeReady() async throws {
        let (code, monthly) = Self.names("TWO")
        let yearly = monthly + ".yearly"
        try await plan(monthly)
        try await plan(yearly, subscription: Self.yearlySubscription)
        try await coupon(code, product: monthly, also: [yearly])
        let ready = try await Self.stack.eventually(30) {
            let offers =
                try await self.client.get("/v1/coupons/\(code)", token: self.admin).decode(CouponBody.self).storeOffers
                ?? []
            return offers.count == 2 && offers.allSatisfy { $0.state == "ready" }
        }
        let read = try await client.get("/v1/coupons/\(code)", token: admin)
        XCTAssertTrue(ready, read.text + Self.stack.logs())
        let offers = try read.decode(CouponBody.self).storeOffers ?? []
        let codes = Dictionary(uniqueKeysWithValues: offers.map { ($0.productId ?? "", $0.customCode ?? "") })
        XCTAssertEqual(codes, [monthly: code, yearly: code + "-2"], read.text)
        XCTAssertEqual(Set(Self.fake.customCodes.map(\.customCode)).intersection([code, code + "-2"]).count, 2)
        XCTAssertEqual(
            posts("/v1/subscriptionOfferCodeCustomCodes", naming: "\"\(code)\""), 1, "the exact code was asked for once"
        )

        let u = try Self.stack.minter().user()
        let page = "https://apps.apple.com/redeem?ctx=offercodes&id=1234567890&code="
        let v = try await client.json("POST", "/v1/coupons/validate", ["code": code, "platform": "ios"], token: u.token)
        let handoff = try XCTUnwrap(try v.json()["appStore"] as? [String: Any], v.text)
        XCTAssertEqual(handoff["redemptionUrl"] as? String, page + code, v.text)
        XCTAssertEqual(
            handoff["redemptionUrls"] as? [String: String], [monthly: page + code, yearly: page + code + "-2"], v.text)
        let chosen = try await client.json(
            "POST", "/v1/coupons/validate", ["code": code, "platform": "ios", "productId": yearly], token: u.token)
        let chosenHandoff = try XCTUnwrap(try chosen.json()["appStore"] as? [String: Any], chosen.text)
        XCTAssertEqual(chosenHandoff["redemptionUrl"] as? String, page + code + "-2", chosen.text)
        let elsewhere = try await client.json(
            "POST", "/v1/coupons/validate", ["code": code, "platform": "ios", "productId": "pro.other"], token: u.token)
        XCTAssertEqual(try elsewhere.json()["reason"] as? String, "notEligible", elsewhere.text)
        let r = try await client.json(
            "POST", "/v1/redemptions", ["code": code, "platform": "ios", "productId": yearly], token: u.token)
        XCTAssertEqual(r.status, 201, r.text)
        XCTAssertEqual(try r.decode(RedemptionBody.self).appStore?.redemptionUrl, page + code + "-2", r.text)
        // A later coupon can't take a code Apple already has for one of these plans.
        let clash = try await client.json(
            "POST", "/v1/coupons",
            [
                "code": code + "-2", "kind": "percentOff", "percentOff": 50, "duration": ["unit": "month", "count": 1],
                "periodCount": 3,
                "productIds": [monthly], "maxRedemptions": 10,
                "expiresAt": Timestamp.iso8601(Date().addingTimeInterval(30 * 86_400))
            ], token: admin)
        XCTAssertEqual(clash.status, 409, clash.text)
        XCTAssertEqual(clash.errorCode, "codeInUse", clash.text)
    }

    func testADeactivatedCouponsCodeAndOfferAreSwitchedOffWithinSeconds() async throws {
        let (name, product) = Self.names("OFF")
        try await plan(product)
        try await coupon(name, product: product)
        let made = try await Self.stack.eventually(20) {
            ["waitingForApple", "ready"].contains(try await self.offerState(name) ?? "")
        }
        XCTAssertTrue(made, Self.stack.logs())
        let code = try XCTUnwrap(Self.fake.customCodes.first { $0.customCode == name })
        let r = try await client.json("PATCH", "/v1/coupons/\(name)", ["active": false], token: admin)
        XCTAssertEqual(r.status, 200, r.text)
        let started = Date()
        let off = try await Self.stack.eventually(10) {
            Self.fake.customCodes.first { $0.id == code.id }?.active == false
                && Self.fake.offers.first { $0.id == code.offerId }?.active == false
        }
        XCTAssertTrue(off, Self.stack.logs())
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "switched off within seconds")
    }

    func testAFullCapSwitchesTheCodeAndOfferOffWithinSeconds() async throws {
        let (name, product) = Self.names("CAP")
        try await plan(product)
        try await coupon(name, product: product, cap: 1)
        let ready = try await Self.stack.eventually(20) { try await self.offerState(name) == "ready" }
        XCTAssertTrue(ready, Self.stack.logs())
        let code = try XCTUnwrap(Self.fake.customCodes.first { $0.customCode == name })
        let user = try Self.stack.minter().user()
        let redeemed = try await client.json(
            "POST", "/v1/redemptions", ["code": name, "platform": "ios"], token: user.token)
        XCTAssertEqual(redeemed.status, 201, redeemed.text)
        let id = try redeemed.decode(RedemptionBody.self).redemptionId
        XCTAssertTrue(
            Self.fake.customCodes.first { $0.id == code.id }?.active == true,
            "a reservation waiting for Apple keeps the code on")
        // The purchase fills the cap: coupons writes the switch-off, grants makes the two calls.
        let paid = try await client.json(
            "POST", "/v1/redemptions/\(id)/purchase",
            [
                "pricePaid": ["amount": "4.99", "currency": "USD"],
                "storeTransactionId": "txn-" + name
            ], token: admin)
        XCTAssertEqual(paid.status, 200, paid.text)
        let started = Date()
        let off = try await Self.stack.eventually(10) {
            Self.fake.customCodes.first { $0.id == code.id }?.active == false
                && Self.fake.offers.first { $0.id == code.offerId }?.active == false
        }
        XCTAssertTrue(off, Self.stack.logs())
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "switched off within seconds")
    }

    /// The operator raises the full cap: code and offer are switched back on within seconds, and
    /// iOS is offered the coupon again once grants reports it.
    func testRaisingAFullCapSwitchesTheCodeAndOfferBackOn() async throws {
        let (name, product) = Self.names("AGAIN")
        try await plan(product)
        try await coupon(name, product: product, cap: 1)
        let ready = try await Self.stack.eventually(20) { try await self.offerState(name) == "ready" }
        XCTAssertTrue(ready, Self.stack.logs())
        let code = try XCTUnwrap(Self.fake.customCodes.first { $0.customCode == name })
        let user = try Self.stack.minter().user()
        let redeemed = try await client.json(
            "POST", "/v1/redemptions", ["code": name, "platform": "web"], token: user.token)
        XCTAssertEqual(redeemed.status, 201, redeemed.text)
        func active() -> (code: Bool?, offer: Bool?) {
            (
                Self.fake.customCodes.first { $0.id == code.id }?.active,
                Self.fake.offers.first { $0.id == code.offerId }?.active
            )
        }
        let off = try await Self.stack.eventually(10) { active() == (false, false) }
        XCTAssertTrue(off, "a web reservation filled the cap\n" + Self.stack.logs())
        let other = try Self.stack.minter().user()
        let validate = { [client] in
            try await client.json("POST", "/v1/coupons/validate", ["code": name, "platform": "ios"], token: other.token)
                .decode(ValidationBody.self)
        }
        let full = try await validate().reason
        XCTAssertEqual(full, "exhausted")

        let raised = try await client.json("PATCH", "/v1/coupons/\(name)", ["maxRedemptions": 5], token: admin)
        XCTAssertEqual(raised.status, 200, raised.text)
        let started = Date()
        let on = try await Self.stack.eventually(10) { active() == (true, true) }
        XCTAssertTrue(on, Self.stack.logs())
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "switched back on within seconds")
        let again = try await Self.stack.eventually(10) { try await self.offerState(name) == "ready" }
        XCTAssertTrue(again, Self.stack.logs())
        let valid = try await validate().valid
        XCTAssertEqual(valid, true)
    }
}
