import Core
import Database
import Foundation
import Runtime
import TestSupport
import XCTest

/// App Store offers made by the stack as `run-stack` starts it, against the fake App Store Connect
/// on loopback (docs/stores.md): coupons writes the provision command, grants stores it, makes the
/// offer and its code and reports back; grants killed with SIGKILL between the offer and the code
/// makes neither twice; a deactivation switches both off within seconds.
final class StoreProvisioningTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var fake: FakeAppStoreConnect!
    nonisolated(unsafe) static var key: TestAppleAPIKey!
    static let subscription = "6447000001"

    override class func startSuite() throws {
        key = try TestAppleAPIKey()
        var limits = FakeAppStoreConnect.Limits()
        limits.offersSwitchBackOn = true  // test4 (StoreTaskTests covers an Apple that refuses)
        fake = try FakeAppStoreConnect(key: key, limits: limits)
        fake.addSubscription(subscription, [
            .init(territory: "USA", currency: "USD", current: "9.99", points: ["0.99", "2.99", "4.49", "4.99", "5.99", "7.99", "9.99"]),
            .init(territory: "GBR", currency: "GBP", current: "8.99", points: ["0.99", "4.49", "4.99", "8.99"]),
        ])
        stack = try Stack(environment: [
            "REDEEM_ASC_KEY_ID": key.keyId, "REDEEM_ASC_ISSUER_ID": key.issuerId, "REDEEM_ASC_PRIVATE_KEY": key.privateKeyFile.path,
            "REDEEM_ASC_URL": fake.url.absoluteString, "REDEEM_APPLE_APP_ID": "1234567890", "REDEEM_APPLE_OFFER_SETTLE": "1",
            "REDEEM_GRANT_MAX_RETRY_SECONDS": "2", "REDEEM_PROVIDER_TIMEOUT_SECONDS": "2",
        ])
    }

    override class func stopSuite() {
        stack?.stop()
        let done = DispatchSemaphore(value: 0)
        Task { await fake?.stop(); done.signal() }
        done.wait()
    }

    var client: HTTPClient { Self.stack.client }
    var admin: String { Self.stack.adminKey }

    func sql(_ text: String, _ params: [any PGBindable] = []) async throws -> PGResult {
        let database = try Self.stack.adminDatabaseURL()
        return try await offThePool { try PGConnection(url: database).query(text, params) }
    }

    func plan(_ productId: String) async throws {
        _ = try await sql("""
            INSERT INTO coupons.plans (id, mode, product_id, name, app_store_subscription_id) VALUES (gen_random_uuid(), 'live', $1, $1, $2)
            ON CONFLICT DO NOTHING
            """, [productId, Self.subscription])
    }

    func coupon(_ code: String, product: String, cap: Int = 100) async throws {
        let r = try await client.json("POST", "/v1/coupons", [
            "code": code, "kind": "percentOff", "percentOff": 50, "duration": ["unit": "month", "count": 1], "periodCount": 3,
            "productIds": [product], "maxRedemptions": cap, "expiresAt": Timestamp.iso8601(Date().addingTimeInterval(30 * 86_400)),
        ], token: admin)
        XCTAssertEqual(r.status, 201, r.text)
    }

    func offerState(_ code: String) async throws -> String? {
        let r = try await client.get("/v1/coupons/\(code)", token: admin)
        return ((try r.json()["storeOffers"] as? [[String: Any]])?.first?["state"]) as? String
    }

    func posts(_ path: String) -> Int { Self.fake.received.filter { $0.method == "POST" && $0.path == path }.count }

    func test1_killingGrantsBetweenTheOfferAndTheCodeMakesNeitherTwice() async throws {
        try await plan("pro.monthly")
        Self.fake.failCodeCreations(1_000)
        try await coupon("KILL-50", product: "pro.monthly")
        // The offer is made and recorded; every code creation fails until grants is killed.
        let stalled = try await Self.stack.eventually(20) {
            Self.fake.offers.count == 1 && self.posts("/v1/subscriptionOfferCodeCustomCodes") >= 1
        }
        XCTAssertTrue(stalled, Self.stack.logs())
        try await Task.sleep(for: .milliseconds(200))
        kill(try Self.stack.pid("grants"), SIGKILL)
        let recorded = try await sql("SELECT count(*)::int AS n FROM grants.store_tasks WHERE offer_id IS NOT NULL AND custom_code_id IS NULL")
        XCTAssertEqual(try recorded.first?.decode("n", as: Int.self), 1)
        let waiting = try await offerState("KILL-50")
        XCTAssertEqual(waiting, "creating")

        Self.fake.failCodeCreations(0)
        try Self.stack.startService("grants")
        // A run cut off mid-call waits out its lease (8 × 2 s + 30 s) before another takes it.
        let ready = try await Self.stack.eventually(60) { ["waitingForApple", "ready"].contains(try await self.offerState("KILL-50") ?? "") }
        XCTAssertTrue(ready, Self.stack.logs())
        XCTAssertEqual(Self.fake.offers.count, 1)
        XCTAssertEqual(Self.fake.customCodes.filter { $0.customCode == "KILL-50" }.count, 1)
        XCTAssertEqual(posts("/v1/subscriptionOfferCodes"), 1, "the offer was made once")
        let settled = try await Self.stack.eventually(10) { try await self.offerState("KILL-50") == "ready" }
        XCTAssertTrue(settled, "ready once the settle time (1 s) has passed")
    }

    func test2_aDeactivatedCouponsCodeAndOfferAreSwitchedOffWithinSeconds() async throws {
        try await plan("pro.yearly")
        try await coupon("OFF-50", product: "pro.yearly")
        let made = try await Self.stack.eventually(20) { ["waitingForApple", "ready"].contains(try await self.offerState("OFF-50") ?? "") }
        XCTAssertTrue(made, Self.stack.logs())
        let code = try XCTUnwrap(Self.fake.customCodes.first { $0.customCode == "OFF-50" })
        let r = try await client.json("PATCH", "/v1/coupons/OFF-50", ["active": false], token: admin)
        XCTAssertEqual(r.status, 200, r.text)
        let started = Date()
        let off = try await Self.stack.eventually(10) {
            Self.fake.customCodes.first { $0.id == code.id }?.active == false && Self.fake.offers.first { $0.id == code.offerId }?.active == false
        }
        XCTAssertTrue(off, Self.stack.logs())
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "switched off within seconds")
    }

    func test3_aFullCapSwitchesTheCodeAndOfferOffWithinSeconds() async throws {
        try await plan("pro.weekly")
        try await coupon("CAP-50", product: "pro.weekly", cap: 1)
        let ready = try await Self.stack.eventually(20) { try await self.offerState("CAP-50") == "ready" }
        XCTAssertTrue(ready, Self.stack.logs())
        let code = try XCTUnwrap(Self.fake.customCodes.first { $0.customCode == "CAP-50" })
        let user = try Self.stack.minter().user()
        let redeemed = try await client.json("POST", "/v1/redemptions", ["code": "CAP-50", "platform": "ios"], token: user.token)
        XCTAssertEqual(redeemed.status, 201, redeemed.text)
        let id = try XCTUnwrap(try redeemed.json()["redemptionId"] as? String)
        XCTAssertTrue(Self.fake.customCodes.first { $0.id == code.id }?.active == true, "a reservation waiting for Apple keeps the code on")
        // The purchase fills the cap: coupons writes the switch-off, grants makes the two calls.
        let paid = try await client.json("POST", "/v1/redemptions/\(id)/purchase", ["pricePaid": ["amount": "4.99", "currency": "USD"],
                                                                                     "storeTransactionId": "txn-cap-50"], token: admin)
        XCTAssertEqual(paid.status, 200, paid.text)
        let started = Date()
        let off = try await Self.stack.eventually(10) {
            Self.fake.customCodes.first { $0.id == code.id }?.active == false && Self.fake.offers.first { $0.id == code.offerId }?.active == false
        }
        XCTAssertTrue(off, Self.stack.logs())
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "switched off within seconds")
    }

    /// The operator raises the full cap: code and offer are switched back on within seconds, and
    /// iOS is offered the coupon again once grants reports it.
    func test4_raisingAFullCapSwitchesTheCodeAndOfferBackOn() async throws {
        try await plan("pro.daily")
        try await coupon("AGAIN-50", product: "pro.daily", cap: 1)
        let ready = try await Self.stack.eventually(20) { try await self.offerState("AGAIN-50") == "ready" }
        XCTAssertTrue(ready, Self.stack.logs())
        let code = try XCTUnwrap(Self.fake.customCodes.first { $0.customCode == "AGAIN-50" })
        let user = try Self.stack.minter().user()
        let redeemed = try await client.json("POST", "/v1/redemptions", ["code": "AGAIN-50", "platform": "web"], token: user.token)
        XCTAssertEqual(redeemed.status, 201, redeemed.text)
        func active() -> (code: Bool?, offer: Bool?) {
            (Self.fake.customCodes.first { $0.id == code.id }?.active, Self.fake.offers.first { $0.id == code.offerId }?.active)
        }
        let off = try await Self.stack.eventually(10) { active() == (false, false) }
        XCTAssertTrue(off, "a web reservation filled the cap\n" + Self.stack.logs())
        let other = try Self.stack.minter().user()
        let validate = { [client] in try await client.json("POST", "/v1/coupons/validate", ["code": "AGAIN-50", "platform": "ios"], token: other.token).json() }
        let full = try await validate()["reason"] as? String
        XCTAssertEqual(full, "exhausted")

        let raised = try await client.json("PATCH", "/v1/coupons/AGAIN-50", ["maxRedemptions": 5], token: admin)
        XCTAssertEqual(raised.status, 200, raised.text)
        let started = Date()
        let on = try await Self.stack.eventually(10) { active() == (true, true) }
        XCTAssertTrue(on, Self.stack.logs())
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "switched back on within seconds")
        let again = try await Self.stack.eventually(10) { try await self.offerState("AGAIN-50") == "ready" }
        XCTAssertTrue(again, Self.stack.logs())
        let valid = try await validate()["valid"] as? Bool
        XCTAssertEqual(valid, true)
    }
}
