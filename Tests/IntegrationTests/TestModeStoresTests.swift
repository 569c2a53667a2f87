import Core
import Cryptography
import Database
import Foundation
import Runtime
import TestSupport
import XCTest

/// Test mode simulates the stores (docs/stores.md, "Test mode"; docs/security.md, "Test mode"):
/// with the fake App Store Connect, Play Developer API and Google token endpoint running, no
/// test-key route that makes, changes or deactivates a plan or a coupon sends them anything; a
/// test coupon's offers go `creating` → waiting → `ready` with simulated ids, and complete through
/// the test helpers with the records, webhook and CSV row of a purchase; Apple's count and custom
/// codes are live coupons' alone, and what Apple signs completes live redemptions only.
final class TestModeStoresTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var minter: TokenMinter!
    nonisolated(unsafe) static var ca: TestAppleCA!
    nonisolated(unsafe) static var ascKey: TestAppleAPIKey!
    nonisolated(unsafe) static var connect: FakeAppStoreConnect!
    nonisolated(unsafe) static var account: TestGoogleServiceAccount!
    nonisolated(unsafe) static var oauth: FakeGoogleOAuth!
    nonisolated(unsafe) static var play: FakePlayDeveloperAPI!
    nonisolated(unsafe) static var receiver: WebhookReceiver!
    nonisolated(unsafe) static var testKey: String!
    static let bundleId = "com.example.redeem"
    static let package = "com.example.redeem"
    static let playProduct = "premium_sub"
    static let prices: [FakeAppStoreConnect.TerritoryPrices] = [
        .init(
            territory: "USA", currency: "USD", current: "9.99",
            points: ["0.99", "2.99", "4.49", "4.99", "5.99", "7.99", "9.99"])
    ]

    override class func startSuite() throws {
        ca = try TestAppleCA()
        ascKey = try TestAppleAPIKey()
        connect = try FakeAppStoreConnect(key: ascKey)
        account = try TestGoogleServiceAccount()
        oauth = try FakeGoogleOAuth(account: account)
        play = try FakePlayDeveloperAPI(oauth: oauth, packageName: package)
        receiver = try WebhookReceiver()
        stack = try Stack(environment: [
            "REDEEM_APPLE_ROOT_CERTS": ca.rootCertificatesFile.path, "REDEEM_APPLE_BUNDLE_ID": bundleId,
            "REDEEM_APPLE_APP_ID": "1234567890",
            "REDEEM_ASC_KEY_ID": ascKey.keyId, "REDEEM_ASC_ISSUER_ID": ascKey.issuerId,
            "REDEEM_ASC_PRIVATE_KEY": ascKey.privateKeyFile.path,
            "REDEEM_ASC_URL": connect.url.absoluteString,
            "REDEEM_PLAY_SERVICE_ACCOUNT": account.keyFile.path, "REDEEM_PLAY_PACKAGE_NAME": package,
            "REDEEM_GOOGLE_TOKEN_URL": oauth.url.absoluteString, "REDEEM_PLAY_API_URL": play.url.absoluteString,
            // An hour each: a test offer is ready sooner only through the test helper.
            "REDEEM_APPLE_OFFER_SETTLE": "3600", "REDEEM_PLAY_OFFER_SETTLE": "3600",
            "REDEEM_GRANT_MAX_RETRY_SECONDS": "1", "REDEEM_PROVIDER_TIMEOUT_SECONDS": "2",
            "REDEEM_WEBHOOK_ALLOW_PRIVATE": "1", "REDEEM_WEBHOOK_RETRY_SCHEDULE": "1,1,1"
        ])
        minter = try stack.minter()
    }

    override class func stopSuite() {
        stack?.stop()
        let done = DispatchSemaphore(value: 0)
        Task {
            await connect?.stop()
            await play?.stop()
            await oauth?.stop()
            await receiver?.stop()
            done.signal()
        }
        done.wait()
    }

    var client: HTTPClient { Self.stack.client }
    /// The bootstrap admin key: live.
    var live: String { Self.stack.adminKey }

    /// A test admin key, made once by the live admin (how an operator gets test keys), with a
    /// test-mode webhook endpoint for `coupon.redeemed`.
    func test() async throws -> String {
        if let key = Self.testKey { return key }
        let r = try await client.json(
            "POST", "/v1/api-keys", ["name": "test admin", "role": "admin", "mode": "test"], token: live)
        XCTAssertEqual(r.status, 201, r.text)
        let key = try XCTUnwrap(try r.json()["key"] as? String)
        XCTAssertTrue(key.hasPrefix("sk_test_"))
        let hook = try await client.json(
            "POST", "/v1/webhooks", ["url": Self.receiver.url.absoluteString, "events": ["coupon.redeemed"]], token: key
        )
        XCTAssertEqual(hook.status, 201, hook.text)
        Self.testKey = key
        return key
    }

    static func unique(_ prefix: String) -> String {
        prefix + UUID().uuidString.prefix(8).uppercased().replacingOccurrences(of: "-", with: "")
    }

    /// A plan on an App Store subscription and a Play base plan (both known to the fakes).
    func plan(_ token: String, subscription: String) async throws -> String {
        let plan = "pro." + UUID().uuidString.prefix(8).lowercased()
        let basePlan = "monthly-" + UUID().uuidString.prefix(4).lowercased()
        Self.connect.addSubscription(subscription, Self.prices)
        Self.play.addBasePlan(productId: Self.playProduct, basePlanId: basePlan, [.init("US", "USD", "9.99")])
        let r = try await client.json(
            "POST", "/v1/plans",
            [
                "productId": plan, "name": "Pro", "appStore": ["subscriptionId": subscription],
                "playStore": ["productId": Self.playProduct, "basePlanIds": [basePlan]]
            ], token: token)
        XCTAssertEqual(r.status, 201, r.text)
        return plan
    }

    func coupon(_ code: String, plan: String, _ token: String, platforms: [String] = ["ios", "android"]) async throws {
        let r = try await client.json(
            "POST", "/v1/coupons",
            [
                "code": code, "kind": "percentOff", "percentOff": 50, "duration": ["unit": "month", "count": 1],
                "periodCount": 3,
                "productIds": [plan], "platforms": platforms, "maxRedemptions": 100,
                "expiresAt": Timestamp.iso8601(Date().addingTimeInterval(30 * 86_400))
            ], token: token)
        XCTAssertEqual(r.status, 201, r.text)
    }

    func offers(_ code: String, _ token: String) async throws -> [[String: Any]] {
        let r = try await client.get("/v1/coupons/\(code)", token: token)
        XCTAssertEqual(r.status, 200, r.text)
        return try r.json()["storeOffers"] as? [[String: Any]] ?? []
    }

    /// Waits until every offer of the coupon is in one of `states`.
    func waitFor(_ code: String, _ token: String, _ states: Set<String>, count: Int = 2) async throws -> [[String: Any]]
    {
        let reached = try await Self.stack.eventually(20) {
            let o = try await self.offers(code, token)
            return o.count == count && o.allSatisfy { states.contains($0["state"] as? String ?? "") }
        }
        let offers = try await self.offers(code, token)
        XCTAssertTrue(reached, "\(offers)\n" + Self.stack.logs())
        return offers
    }

    func sql(_ text: String, _ params: [any PGBindable] = []) async throws -> PGResult {
        let database = try Self.stack.adminDatabaseURL()
        return try await offThePool { try PGConnection(url: database).query(text, params) }
    }

    /// Every store task of the coupon `code` is done (the simulated runs finished), and there are at
    /// least `count` of them: a change's commands reach grants through coupons' outbox after the
    /// change is answered, so the tasks of the last change may not exist yet.
    func tasksDone(_ code: String, count: Int = 0) async throws -> Bool {
        let row = try await sql(
            """
            SELECT bool_and(t.status = 'done') AS done, count(*)::int AS n FROM grants.store_tasks t
            JOIN coupons.coupons c ON c.id = t.coupon_id WHERE c.code = $1
            """, [code]
        ).first
        let done = try row?.decodeIfPresent("done", as: Bool.self) ?? false
        return try done && (row?.decode("n", as: Int.self) ?? 0) >= count
    }

    /// What the three fakes have received so far.
    var storeTraffic: (apple: Int, play: Int, google: Int) {
        (Self.connect.received.count, Self.play.received.count, Self.oauth.exchanges)
    }

    // MARK: - Tests

    func testATestKeysPlanAndCouponRoutesSendNothingToTheStores() async throws {
        let test = try await test()
        let before = storeTraffic
        let plan = try await plan(test, subscription: "6447100001")
        let patched = try await client.json("PATCH", "/v1/plans/\(plan)", ["name": "Pro (renamed)"], token: test)
        XCTAssertEqual(patched.status, 200, patched.text)
        let code = Self.unique("SIM")
        let dryRun = try await client.json(
            "POST", "/v1/coupons?dryRun=true",
            [
                "code": code, "kind": "freePeriod", "duration": ["unit": "month", "count": 1], "productIds": [plan],
                "platforms": ["ios"], "maxRedemptions": 10,
                "expiresAt": Timestamp.iso8601(Date().addingTimeInterval(86_400))
            ], token: test)
        XCTAssertEqual(dryRun.status, 200, dryRun.text)
        try await coupon(code, plan: plan, test)
        // Made by the simulated stores: both offers wait for their store, with simulated ids.
        let made = try await waitFor(code, test, ["waitingForApple", "waitingForGoogle"])
        XCTAssertEqual(Set(made.compactMap { $0["store"] as? String }), ["appStore", "playStore"])
        XCTAssertTrue(made.allSatisfy { ($0["offerId"] as? String)?.hasPrefix("sim_") == true }, "\(made)")
        // Every change a test admin can make: the cap, the expiry, off, on again, deleted (with the
        // tasks there are once each has reached grants: a switch per offer for off and on).
        for (change, tasks): ([String: Any], Int) in [
            (["maxRedemptions": 50], 2), (["expiresAt": Timestamp.iso8601(Date().addingTimeInterval(20 * 86_400))], 2),
            (["active": false], 4), (["active": true], 6)
        ] {
            let r = try await client.json("PATCH", "/v1/coupons/\(code)", change, token: test)
            XCTAssertEqual(r.status, 200, r.text)
            let settled = try await Self.stack.eventually(20) { try await self.tasksDone(code, count: tasks) }
            XCTAssertTrue(settled, Self.stack.logs())
        }
        let back = try await waitFor(code, test, ["waitingForApple", "waitingForGoogle", "ready"])
        XCTAssertTrue(
            back.allSatisfy { $0["switchedOffAt"] == nil || $0["switchedOffAt"] is NSNull }, "switched back on: \(back)"
        )
        let deleted = try await client.send(
            "DELETE", "/v1/coupons/\(code)", headers: ["Authorization": "Bearer \(test)"])
        XCTAssertTrue([200, 204].contains(deleted.status), deleted.text)
        let off = try await Self.stack.eventually(20) { try await self.tasksDone(code, count: 8) }
        XCTAssertTrue(off, Self.stack.logs())
        // The simulated tasks ran (provision, off, on, off for each offer), all in test mode...
        let tasks = try await sql(
            """
            SELECT count(*)::int AS n, count(*) FILTER (WHERE t.mode = 'test')::int AS test FROM grants.store_tasks t
            JOIN coupons.coupons c ON c.id = t.coupon_id WHERE c.code = $1
            """, [code]
        ).first
        XCTAssertEqual(try tasks?.decode("n", as: Int.self), 8)
        XCTAssertEqual(try tasks?.decode("test", as: Int.self), 8)
        // ...and not one request reached App Store Connect, Google Play or Google's token endpoint.
        let after = storeTraffic
        XCTAssertEqual(
            after.apple, before.apple, "App Store Connect: \(Self.connect.received.map { "\($0.method) \($0.path)" })")
        XCTAssertEqual(
            after.play, before.play, "Play Developer API: \(Self.play.received.map { "\($0.method) \($0.path)" })")
        XCTAssertEqual(after.google, before.google)
    }

    func testATestCouponIsMadeReadyAndCompletesThroughTheHelpers() async throws {
        let test = try await test()
        let before = storeTraffic
        let plan = try await plan(test, subscription: "6447100002")
        let code = Self.unique("HELP")
        try await coupon(code, plan: plan, test)
        let waiting = try await waitFor(code, test, ["waitingForApple", "waitingForGoogle"])
        let user = try Self.minter.user()
        let notReady = try await client.json(
            "POST", "/v1/coupons/validate", ["code": code, "platform": "ios", "environment": "sandbox"],
            token: user.token
        ).json()
        XCTAssertEqual(notReady["reason"] as? String, "notReady", "the settle time (an hour) is still running")
        // The helper skips the settle time of each offer.
        for offer in waiting {
            let id = try XCTUnwrap(offer["offerId"] as? String)
            let r = try await client.send(
                "POST", "/v1/test_helpers/store_offers/\(id)/ready", headers: ["Authorization": "Bearer \(test)"])
            XCTAssertEqual(r.status, 200, r.text)
            XCTAssertEqual(try r.json()["state"] as? String, "ready")
        }
        _ = try await waitFor(code, test, ["ready"])

        // iOS: validate and redeem hand off as in live mode; the helper completes the reservation.
        let valid = try await client.json(
            "POST", "/v1/coupons/validate", ["code": code, "platform": "ios", "environment": "sandbox"],
            token: user.token
        ).json()
        XCTAssertEqual(valid["valid"] as? Bool, true, "\(valid)")
        XCTAssertNotNil(valid["appStore"] as? [String: Any], "\(valid)")
        let redeemed = try await client.json(
            "POST", "/v1/redemptions", ["code": code, "platform": "ios", "environment": "sandbox"], token: user.token)
        XCTAssertEqual(redeemed.status, 201, redeemed.text)
        let ios = try XCTUnwrap(try redeemed.json()["redemptionId"] as? String)
        XCTAssertNotNil(try redeemed.json()["appStore"] as? [String: Any], redeemed.text)
        let paid = try await client.json(
            "POST", "/v1/test_helpers/redemptions/\(ios)/purchase",
            ["pricePaid": ["amount": "4.99", "currency": "USD"], "sandbox": true], token: test)
        XCTAssertEqual(paid.status, 200, paid.text)
        let view = try paid.json()
        XCTAssertEqual(view["status"] as? String, "completed", paid.text)
        XCTAssertEqual(view["sandbox"] as? Bool, true)
        XCTAssertEqual((view["pricePaid"] as? [String: Any])?["amount"] as? String, "4.99", paid.text)
        let again = try await client.json(
            "POST", "/v1/test_helpers/redemptions/\(ios)/purchase",
            ["pricePaid": ["amount": "4.99", "currency": "USD"]], token: test)
        XCTAssertEqual(again.status, 409, again.text)
        XCTAssertEqual(again.errorCode, "invalidState")

        // Android the same, through the simulated Play offer.
        let other = try Self.minter.user()
        let android = try await client.json(
            "POST", "/v1/redemptions", ["code": code, "platform": "android", "environment": "sandbox"],
            token: other.token)
        XCTAssertEqual(android.status, 201, android.text)
        XCTAssertNotNil(try android.json()["playStore"] as? [String: Any], android.text)
        let androidId = try XCTUnwrap(try android.json()["redemptionId"] as? String)
        let bought = try await client.json(
            "POST", "/v1/test_helpers/redemptions/\(androidId)/purchase",
            ["pricePaid": ["amount": "4.49", "currency": "USD"]], token: test)
        XCTAssertEqual(bought.status, 200, bought.text)
        XCTAssertEqual(try bought.json()["status"] as? String, "completed")

        // The records a store purchase makes: its purchase row (sandbox), its webhook, its CSV row.
        let rows = try await sql(
            """
            SELECT store, sandbox FROM coupons.store_purchases WHERE redemption_id = ANY($1::uuid[]) ORDER BY store
            """, [PGArray([ios.lowercased(), androidId.lowercased()])]
        ).rows
        XCTAssertEqual(try rows.map { try $0.decode("store", as: String.self) }, ["appStore", "playStore"])
        XCTAssertTrue(try rows.allSatisfy { try $0.decode("sandbox", as: Bool.self) })
        for id in [ios, androidId] {
            let hooked = try await Self.stack.eventually(15) {
                Self.receiver.received.contains {
                    let b = String(decoding: $0.body, as: UTF8.self)
                    return b.contains(id) && b.contains("coupon.redeemed")
                }
            }
            XCTAssertTrue(hooked, "coupon.redeemed for \(id)\n" + Self.stack.logs())
        }
        let csv = try await client.send(
            "GET", "/v1/coupons/\(code)/redemptions", headers: ["Authorization": "Bearer \(test)", "Accept": "text/csv"]
        )
        XCTAssertEqual(csv.status, 200, csv.text)
        XCTAssertTrue(
            csv.text.uppercased().contains(ios.uppercased()) && csv.text.uppercased().contains(androidId.uppercased()),
            csv.text)
        XCTAssertTrue(csv.text.contains("4.99") && csv.text.contains("4.49"), csv.text)
        XCTAssertEqual(storeTraffic.apple, before.apple)
        XCTAssertEqual(storeTraffic.play, before.play)
    }

    func testLiveAdminsCouponStillMakesTheRealOffers() async throws {
        let plan = try await plan(live, subscription: "6447100003")
        let code = Self.unique("LIVE")
        try await coupon(code, plan: plan, live)
        let made = try await waitFor(code, live, ["waitingForApple", "waitingForGoogle"])
        XCTAssertFalse(made.contains { ($0["offerId"] as? String)?.hasPrefix("sim_") == true }, "\(made)")
        XCTAssertEqual(
            Self.connect.customCodes.filter { $0.customCode == code }.count, 1,
            "a real custom code at App Store Connect")
        XCTAssertEqual(
            Self.play.offers.filter { $0.productId == Self.playProduct && $0.state == "ACTIVE" }.count, 1,
            "a real Play offer, active")
    }

    /// A test coupon can't hold a custom code or a place in Apple's 10 a live coupon needs: ten
    /// test coupons on a subscription, one named FREEYEAR, and the live FREEYEAR is still made.
    func testTestCouponsTakeNeitherAppleCountNorACustomCodeOfLiveOnes() async throws {
        let test = try await test()
        let subscription = "6447100004"
        let testPlan = try await plan(test, subscription: subscription)
        let codes = ["FREEYEAR"] + (1..<10).map { _ in Self.unique("TEN") }
        for code in codes { try await coupon(code, plan: testPlan, test, platforms: ["ios"]) }
        for code in codes { _ = try await waitFor(code, test, ["waitingForApple"], count: 1) }
        let livePlan = try await plan(live, subscription: subscription)
        try await coupon("FREEYEAR", plan: livePlan, live, platforms: ["ios"])
        let made = try await waitFor("FREEYEAR", live, ["waitingForApple", "failed"], count: 1)
        XCTAssertEqual(made.first?["state"] as? String, "waitingForApple", "\(made)")
        XCTAssertEqual(Self.connect.customCodes.filter { $0.customCode == "FREEYEAR" }.count, 1)
        XCTAssertEqual(
            Self.connect.offers.filter { $0.subscriptionId == subscription }.count, 1,
            "the live offer alone is at Apple")
    }

    func testWhatAppleSignsCompletesNoTestRedemptionAndHelpersTakeTestKeysOnly() async throws {
        let test = try await test()
        let testPlan = try await plan(test, subscription: "6447100005")
        let code = Self.unique("SIGNED")
        try await coupon(code, plan: testPlan, test, platforms: ["ios"])
        let waiting = try await waitFor(code, test, ["waitingForApple"], count: 1)
        let offerId = try XCTUnwrap(waiting.first?["offerId"] as? String)
        // A live key can't use the helpers, on a test object or any other.
        let refused = try await client.send(
            "POST", "/v1/test_helpers/store_offers/\(offerId)/ready", headers: ["Authorization": "Bearer \(live)"])
        XCTAssertEqual(refused.status, 403, refused.text)
        let ready = try await client.send(
            "POST", "/v1/test_helpers/store_offers/\(offerId)/ready", headers: ["Authorization": "Bearer \(test)"])
        XCTAssertEqual(ready.status, 200, ready.text)
        let user = try Self.minter.user()
        let r = try await client.json(
            "POST", "/v1/redemptions", ["code": code, "platform": "ios", "environment": "sandbox"], token: user.token)
        XCTAssertEqual(r.status, 201, r.text)
        let id = try XCTUnwrap(try r.json()["redemptionId"] as? String)
        let token = try XCTUnwrap(
            UUID(uuidString: (try r.json()["appStore"] as? [String: Any])?["appAccountToken"] as? String ?? ""))
        let liveHelper = try await client.json(
            "POST", "/v1/test_helpers/redemptions/\(id)/purchase", ["pricePaid": ["amount": "1.00", "currency": "USD"]],
            token: live)
        XCTAssertEqual(liveHelper.status, 403, liveHelper.text)
        // A transaction Apple signed (its sandbox) naming the test coupon's offer: no store sold it.
        let found = try await sql(
            """
            SELECT o.offer_name FROM coupons.store_offers o JOIN coupons.coupons c ON c.id = o.coupon_id WHERE c.code = $1 AND c.mode = 'test'
            """, [code]
        ).first
        let offerName: String = try XCTUnwrap(found).decode("offer_name")
        let txn = String(Int.random(in: 100_000_000_000...999_999_999_999))
        var t = JWSTransactionDecodedPayload(
            transactionId: txn, originalTransactionId: txn, bundleId: Self.bundleId, productId: testPlan,
            purchaseDate: Date(), environment: .sandbox)
        t.offerType = .offerCode
        t.offerIdentifier = offerName
        t.appAccountToken = token
        t.price = 4990
        t.currency = "USD"
        t.type = .autoRenewable
        t.signedDate = Date()
        let posted = try await client.json(
            "POST", "/v1/redemptions/\(id)/purchase", ["signedTransaction": Self.ca.sign(t)], token: user.token)
        XCTAssertEqual(posted.status, 422, posted.text)
        let sender = AppleNotificationSender(ca: Self.ca, bundleId: Self.bundleId, appAppleId: 1_234_567_890)
        let notified = try await sender.send(
            sender.signedPayload(sender.notification(.offerRedeemed, transaction: t)),
            to: Self.stack.gateway.appendingPathComponent("v1/stores/apple/notifications"))
        XCTAssertEqual(notified.status, 200, notified.text)
        XCTAssertEqual(try notified.json()["recorded"] as? Bool, false)
        let view = try await client.get("/v1/redemptions/\(id)", token: user.token).json()
        XCTAssertEqual(view["status"] as? String, "reserved", "still waiting: only the helper completes it")
        // A live redemption is not the test helper's (404), as any object of the other mode.
        let livePlan = try await plan(live, subscription: "6447100006")
        let liveCode = Self.unique("REAL")
        try await coupon(liveCode, plan: livePlan, live, platforms: ["web"])
        let web = try await client.json(
            "POST", "/v1/redemptions", ["code": liveCode, "platform": "web"], token: try Self.minter.user().token)
        XCTAssertEqual(web.status, 201, web.text)
        let liveId = try XCTUnwrap(try web.json()["redemptionId"] as? String)
        let other = try await client.json(
            "POST", "/v1/test_helpers/redemptions/\(liveId)/purchase",
            ["pricePaid": ["amount": "1.00", "currency": "USD"]],
            token: test)
        XCTAssertEqual(other.status, 404, other.text)
    }
}
