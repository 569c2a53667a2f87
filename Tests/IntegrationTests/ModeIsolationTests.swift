import Core
import Foundation
import Runtime
import TestSupport
import XCTest

/// Test mode and live mode are two worlds (docs/api.md): a key sees and changes only
/// its own mode's coupons, redemptions, exports and webhooks, and a test key only test keys. Every
/// operator route is tried with a key of the other mode, whose answer is 404 or a list without the
/// other mode's objects. The tests share one stack and two receivers; each makes its own keys,
/// coupons, holders and endpoints.
final class ModeIsolationTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var minter: TokenMinter!
    nonisolated(unsafe) static var liveHooks: WebhookReceiver!
    nonisolated(unsafe) static var testHooks: WebhookReceiver!

    override class func startSuite() throws {
        liveHooks = try WebhookReceiver()
        testHooks = try WebhookReceiver()
        stack = try Stack(environment: ["REDEEM_WEBHOOK_ALLOW_PRIVATE": "1", "REDEEM_WEBHOOK_RETRY_SCHEDULE": "1,1,1"])
        minter = try stack.minter()
    }

    override class func stopSuite() {
        stack?.stop()
        let done = DispatchSemaphore(value: 0)
        Task { await liveHooks?.stop(); await testHooks?.stop(); done.signal() }
        done.wait()
    }

    var client: HTTPClient { Self.stack.client }
    /// The bootstrap admin key: live.
    var live: String { Self.stack.adminKey }

    static func code(_ prefix: String) -> String { prefix + "-" + UUID().uuidString.prefix(8).uppercased() }
    static var inAMonth: String { Timestamp.iso8601(Date().addingTimeInterval(30 * 86400)) }

    /// A key made by the live admin, which is how an operator gets test keys.
    func key(_ mode: String, role: String = "admin") async throws -> (key: String, id: String) {
        let r = try await client.json("POST", "/v1/api-keys", ["name": "\(mode) \(role)", "role": role, "mode": mode], token: live)
        XCTAssertEqual(r.status, 201, r.text)
        let o = try r.decode(APIKeyBody.self)
        XCTAssertEqual(o.mode, mode)
        return (try XCTUnwrap(o.key), o.id)
    }

    func send(_ method: String, _ path: String, _ token: String, accept: String? = nil) async throws -> HTTPClient.Response {
        var headers = ["Authorization": "Bearer \(token)"]
        if let accept { headers["Accept"] = accept }
        return try await client.send(method, path, headers: headers)
    }

    /// One line of any list this suite reads (keys, coupons, redemptions, endpoints, deliveries).
    struct Item: Decodable {
        let id: String?
        let mode: String?
        let name: String?
        let code: String?
        let redemptionId: String?
        let active: Bool?
    }

    func data(_ r: HTTPClient.Response) throws -> [Item] {
        XCTAssertEqual(r.status, 200, r.text)
        return try r.decode(ListBody<Item>.self).data
    }

    /// A coupon as this suite reads it: its mode and its duration's unit.
    struct Coupon: Decodable {
        struct Duration: Decodable { let unit: String }
        let mode: String?
        let active: Bool?
        let remaining: Int?
        let maxRedemptions: Int?
        let duration: Duration?
    }

    /// What validate answers: whether it is valid, and the coupon found.
    struct Validation: Decodable {
        let valid: Bool
        let coupon: Coupon?
    }

    func freePeriod(_ code: String, token: String, unit: String = "month", cap: Int? = nil) async throws {
        var body: [String: Any] = ["code": code, "kind": "freePeriod", "duration": ["unit": unit, "count": 1]]
        if let cap { body["maxRedemptions"] = cap }
        let r = try await client.json("POST", "/v1/coupons", body, token: token)
        XCTAssertEqual(r.status, 201, r.text)
    }

    func discount(_ code: String, token: String) async throws {
        let r = try await client.json("POST", "/v1/coupons", ["code": code, "kind": "percentOff", "percentOff": 50, "productIds": ["pro.monthly"],
                                                              "duration": ["unit": "month", "count": 1], "periodCount": 1,
                                                              "platforms": ["android", "web"]], token: token)
        XCTAssertEqual(r.status, 201, r.text)
    }

    func redeem(
        _ code: String, _ u: TokenMinter.User, environment: String = "production"
    ) async throws -> RedemptionBody {
        let r = try await client.json(
            "POST", "/v1/redemptions", ["code": code, "platform": "web", "environment": environment], token: u.token)
        XCTAssertEqual(r.status, 201, r.text)
        return try r.decode()
    }

    /// A new user's redemption of `code`: its id.
    func redemptionId(_ code: String, environment: String = "production") async throws -> String {
        try await redeem(code, try user(), environment: environment).redemptionId
    }

    func get<T: Decodable>(_ path: String, _ token: String, as type: T.Type = T.self) async throws -> T {
        let r = try await send("GET", path, token)
        XCTAssertEqual(r.status, 200, r.text)
        return try r.decode()
    }

    func user() throws -> TokenMinter.User { try Self.minter.user() }

    // MARK: - API keys

    func testATestKeyManagesOnlyTestKeysAndTheLiveAdminBoth() async throws {
        let test = try await key("test")
        XCTAssertTrue(test.key.hasPrefix("sk_test_"))
        let liveReader = try await key("live", role: "readonly")
        // A test key never makes a live key: that would turn test access into live access.
        let escalated = try await client.json("POST", "/v1/api-keys", ["name": "escalated", "role": "admin", "mode": "live"], token: test.key)
        XCTAssertEqual(escalated.status, 403, escalated.text)
        XCTAssertEqual(escalated.errorCode, "forbidden")
        XCTAssertFalse(escalated.text.contains("sk_live_"))
        // It makes test keys, and without a mode a key of its own mode.
        let made = try await client.json("POST", "/v1/api-keys", ["name": "test reader", "role": "readonly", "mode": "test"], token: test.key)
        XCTAssertEqual(made.status, 201, made.text)
        XCTAssertEqual(try made.decode(APIKeyBody.self).mode, "test")
        let madeId = try made.decode(APIKeyBody.self).id
        let implicit = try await client.json("POST", "/v1/api-keys", ["name": "implicit", "role": "readonly"], token: test.key)
        XCTAssertEqual(implicit.status, 201, implicit.text)
        XCTAssertEqual(try implicit.decode(APIKeyBody.self).mode, "test")
        XCTAssertTrue((try implicit.decode(APIKeyBody.self).key ?? "").hasPrefix("sk_test_"))
        let implicitId = try implicit.decode(APIKeyBody.self).id
        // It lists test keys only.
        let seenByTest = try data(try await send("GET", "/v1/api-keys?limit=100", test.key))
        XCTAssertFalse(seenByTest.isEmpty)
        XCTAssertEqual(Set(seenByTest.compactMap { $0.mode }), ["test"])
        XCTAssertFalse(seenByTest.contains { $0.id == liveReader.id })
        XCTAssertTrue(seenByTest.contains { $0.id == madeId })
        // It can't revoke a live key (404: it does not see one), which keeps working.
        let revokeLive = try await send("DELETE", "/v1/api-keys/\(liveReader.id)", test.key)
        XCTAssertEqual(revokeLive.status, 404, revokeLive.text)
        let stillWorks = try await send("GET", "/v1/coupons", liveReader.key)
        XCTAssertEqual(stillWorks.status, 200)
        // It revokes its own mode's keys.
        let revokeTest = try await send("DELETE", "/v1/api-keys/\(madeId)", test.key)
        XCTAssertEqual(revokeTest.status, 204, revokeTest.text)
        // The live admin sees and revokes keys of both modes; no live key was made by the test key.
        let seenByLive = try data(try await send("GET", "/v1/api-keys?limit=100", live))
        XCTAssertEqual(Set(seenByLive.compactMap { $0.mode }), ["live", "test"])
        XCTAssertTrue(seenByLive.contains { $0.id == liveReader.id })
        XCTAssertTrue(seenByLive.contains { $0.id == implicitId })
        XCTAssertFalse(seenByLive.contains { $0.name == "escalated" })
        let revokedByLive = try await send("DELETE", "/v1/api-keys/\(implicitId)", live)
        XCTAssertEqual(revokedByLive.status, 204, revokedByLive.text)
    }

    // MARK: - Coupons

    func testACodeExistsOncePerModeAndAKeyTouchesOnlyItsOwnModesCoupons() async throws {
        let test = try await key("test").key
        let testReader = try await key("test", role: "readonly").key
        let liveReader = try await key("live", role: "readonly").key
        let shared = Self.code("BOTH")
        try await freePeriod(shared, token: live, unit: "month", cap: 5)
        try await freePeriod(shared, token: test, unit: "week", cap: 1)
        for token in [live, test] {
            let dup = try await client.json("POST", "/v1/coupons", ["code": shared.lowercased(), "kind": "freePeriod", "duration": ["unit": "day", "count": 1]], token: token)
            XCTAssertEqual(dup.status, 409, dup.text)
            XCTAssertEqual(dup.errorCode, "codeInUse")
        }
        for (token, mode, unit) in [(live, "live", "month"), (liveReader, "live", "month"), (test, "test", "week"), (testReader, "test", "week")] {
            let got = try await send("GET", "/v1/coupons/\(shared)", token)
            XCTAssertEqual(got.status, 200, got.text)
            XCTAssertEqual(try got.decode(Coupon.self).mode, mode)
            XCTAssertEqual(try got.decode(Coupon.self).duration?.unit, unit)
        }

        let liveOnly = Self.code("LIVE"), testOnly = Self.code("TEST")
        try await freePeriod(liveOnly, token: live)
        try await freePeriod(testOnly, token: test)
        let strangers: [(token: String, admin: Bool, code: String, own: String)] = [
            (test, true, liveOnly, "test"), (testReader, false, liveOnly, "test"), (live, true, testOnly, "live"), (liveReader, false, testOnly, "live"),
        ]
        for s in strangers {
            for path in ["/v1/coupons/\(s.code)", "/v1/coupons/\(s.code)/redemptions"] {
                let r = try await send("GET", path, s.token)
                XCTAssertEqual(r.status, 404, "\(path): \(r.text)")
            }
            let csv = try await send("GET", "/v1/coupons/\(s.code)/redemptions", s.token, accept: "text/csv")
            XCTAssertEqual(csv.status, 404, csv.text)
            if s.admin {
                let patch = try await client.json("PATCH", "/v1/coupons/\(s.code)", ["maxRedemptions": 1, "active": false], token: s.token)
                XCTAssertEqual(patch.status, 404, patch.text)
                let delete = try await send("DELETE", "/v1/coupons/\(s.code)", s.token)
                XCTAssertEqual(delete.status, 404, delete.text)
            }
            for query in ["?limit=100", "?limit=100&active=true"] {
                let listed = try data(try await send("GET", "/v1/coupons\(query)", s.token))
                XCTAssertEqual(Set(listed.compactMap { $0.mode }), [s.own])
                XCTAssertFalse(listed.contains { $0.code == s.code })
                XCTAssertTrue(listed.contains { $0.code == shared })
            }
        }
        // Neither coupon was changed by the other mode's keys.
        for (token, code) in [(live, liveOnly), (test, testOnly)] {
            let got = try await get("/v1/coupons/\(code)", token, as: Coupon.self)
            XCTAssertEqual(got.active, true)
            XCTAssertNil(got.maxRedemptions)
        }
    }

    // MARK: - Redemptions

    func testEndUsersReachTheirEnvironmentsCouponAndOperatorsOnlyTheirModesRedemptions() async throws {
        let test = try await key("test").key
        let testReader = try await key("test", role: "readonly").key
        let shared = Self.code("BOTH")
        try await freePeriod(shared, token: live, unit: "month", cap: 5)
        try await freePeriod(shared, token: test, unit: "week", cap: 1)
        let testOnly = Self.code("TEST")
        try await freePeriod(testOnly, token: test)
        let u = try user()
        // Validate and redeem pick the live coupon in production, the test coupon in sandbox.
        for (environment, unit) in [("production", "month"), ("sandbox", "week")] {
            let v = try await client.json("POST", "/v1/coupons/validate", ["code": shared, "environment": environment], token: u.token)
            XCTAssertEqual(v.status, 200, v.text)
            let validation = try v.decode(Validation.self)
            XCTAssertEqual(validation.valid, true)
            XCTAssertEqual(validation.coupon?.duration?.unit, unit, environment)
        }
        let liveRedemption = try await redeem(shared, u)
        XCTAssertEqual(liveRedemption.sandbox, false)
        let sandboxRedemption = try await redeem(shared, u, environment: "sandbox")
        XCTAssertEqual(sandboxRedemption.sandbox, true)
        let liveId = liveRedemption.redemptionId
        let testId = sandboxRedemption.redemptionId
        XCTAssertNotEqual(liveId, testId)
        // A test coupon's redemption is sandbox, whatever the environment.
        let ofTestCoupon = try await redeem(testOnly, try user())
        XCTAssertEqual(ofTestCoupon.sandbox, true)

        // Each mode's coupon lists and exports its own redemption only.
        for (token, mine, theirs) in [(live, liveId, testId), (test, testId, liveId), (testReader, testId, liveId)] {
            let ids = try data(try await send("GET", "/v1/coupons/\(shared)/redemptions", token)).compactMap {
                $0.redemptionId
            }
            XCTAssertEqual(ids, [mine])
            let csv = try await send("GET", "/v1/coupons/\(shared)/redemptions", token, accept: "text/csv")
            XCTAssertEqual(csv.status, 200)
            XCTAssertTrue(csv.text.uppercased().contains(mine.uppercased()))
            XCTAssertFalse(csv.text.uppercased().contains(theirs.uppercased()))
        }
        // One redemption, read by id: its own mode's keys and its owner, nobody else.
        for (token, other) in [(test, liveId), (testReader, liveId), (live, testId)] {
            for query in ["", "?wait=1"] {
                let r = try await send("GET", "/v1/redemptions/\(other)\(query)", token)
                XCTAssertEqual(r.status, 404, r.text)
            }
        }
        for (token, own) in [(live, liveId), (test, testId), (testReader, testId), (u.token, liveId), (u.token, testId)] {
            let r = try await send("GET", "/v1/redemptions/\(own)", token)
            XCTAssertEqual(r.status, 200, r.text)
        }
        // The live use counts against the live cap; the sandbox one never does.
        let liveCoupon = try await get("/v1/coupons/\(shared)", live, as: Coupon.self)
        XCTAssertEqual(liveCoupon.remaining, 4)
        let testCoupon = try await get("/v1/coupons/\(shared)", test, as: Coupon.self)
        XCTAssertEqual(testCoupon.remaining, 1)
    }

    func testAPurchaseIsConfirmedOnlyByAKeyOfItsCouponsMode() async throws {
        let test = try await key("test", role: "support").key
        let liveSupport = try await key("live", role: "support").key
        let liveCode = Self.code("LDISC"), testCode = Self.code("TDISC")
        try await discount(liveCode, token: live)
        try await discount(testCode, token: try await key("test").key)
        let liveId = try await redemptionId(liveCode)
        let testId = try await redemptionId(testCode)
        let price: [String: Any] = ["amount": "4.99", "currency": "USD"]
        for (token, other) in [(test, liveId), (liveSupport, testId), (live, testId)] {
            let r = try await client.json("POST", "/v1/redemptions/\(other)/purchase", ["pricePaid": price, "storeTransactionId": "X-" + UUID().uuidString], token: token)
            XCTAssertEqual(r.status, 404, r.text)
        }
        for (token, own) in [(live, liveId), (test, testId)] {
            let r = try await get("/v1/redemptions/\(own)", token, as: RedemptionBody.self)
            XCTAssertEqual(r.status, "reserved", "not confirmed by the other mode's key")
        }
        for (token, own) in [(liveSupport, liveId), (test, testId)] {
            let r = try await client.json("POST", "/v1/redemptions/\(own)/purchase", ["pricePaid": price, "storeTransactionId": "OK-" + UUID().uuidString], token: token)
            XCTAssertEqual(r.status, 200, r.text)
            XCTAssertEqual(try r.decode(RedemptionBody.self).status, "completed")
        }
    }

    // MARK: - Webhooks

    func testWebhooksBelongToOneModeAndEventsGoOnlyToTheirCouponsMode() async throws {
        let test = try await key("test").key
        let events = ["coupon.redeemed", "redemption.failed"]
        let liveHook = try await client.json("POST", "/v1/webhooks", ["url": Self.liveHooks.url.absoluteString, "events": events], token: live)
        XCTAssertEqual(liveHook.status, 201, liveHook.text)
        let testHook = try await client.json("POST", "/v1/webhooks", ["url": Self.testHooks.url.absoluteString, "events": events], token: test)
        XCTAssertEqual(testHook.status, 201, testHook.text)
        let liveHookId = try liveHook.decode(WebhookEndpointBody.self).id
        let testHookId = try testHook.decode(WebhookEndpointBody.self).id
        for (token, own, other) in [(live, liveHookId, testHookId), (test, testHookId, liveHookId)] {
            let listed = try data(try await send("GET", "/v1/webhooks?limit=100", token)).compactMap { $0.id }
            XCTAssertTrue(listed.contains(own))
            XCTAssertFalse(listed.contains(other))
            let deliveries = try await send("GET", "/v1/webhooks/\(other)/deliveries", token)
            XCTAssertEqual(deliveries.status, 404, deliveries.text)
        }

        let liveCode = Self.code("LHOOK"), testCode = Self.code("THOOK"), shared = Self.code("BHOOK"), testDiscount = Self.code("THDISC")
        try await freePeriod(liveCode, token: live)
        try await freePeriod(testCode, token: test)
        try await freePeriod(shared, token: live)
        try await freePeriod(shared, token: test)
        try await discount(testDiscount, token: test)
        var liveIds: [String] = [], testIds: [String] = []
        liveIds.append(try await redemptionId(liveCode))
        // A live coupon's sandbox redemption is still a live-mode object (sent with sandbox: true).
        liveIds.append(try await redemptionId(liveCode, environment: "sandbox"))
        liveIds.append(try await redemptionId(shared))
        testIds.append(try await redemptionId(testCode))
        testIds.append(try await redemptionId(shared, environment: "sandbox"))
        let reserved = try await redemptionId(testDiscount)
        let paid = try await client.json("POST", "/v1/redemptions/\(reserved)/purchase",
                                         ["pricePaid": ["amount": "1.00", "currency": "USD"], "storeTransactionId": "T-" + UUID().uuidString], token: test)
        XCTAssertEqual(paid.status, 200, paid.text)
        testIds.append(reserved)

        func bodies(_ r: WebhookReceiver) -> [String] { r.received.map { String(decoding: $0.body, as: UTF8.self) } }
        let arrived = try await Self.stack.eventually(20) {
            let l = bodies(Self.liveHooks), t = bodies(Self.testHooks)
            return liveIds.allSatisfy { id in l.contains { $0.contains(id) } } && testIds.allSatisfy { id in t.contains { $0.contains(id) } }
        }
        XCTAssertTrue(arrived, "each endpoint gets its own mode's events")
        // An event's deliveries are queued together, so a stray one would be out by now too. (Time
        // for a delivery that must not come: no condition says that it never will.)
        try await Task.sleep(for: .seconds(2))
        for id in testIds { XCTAssertFalse(bodies(Self.liveHooks).contains { $0.contains(id) }, "a test-mode event reached the live endpoint") }
        for id in liveIds { XCTAssertFalse(bodies(Self.testHooks).contains { $0.contains(id) }, "a live-mode event reached the test endpoint") }
        let liveLog = try data(try await send("GET", "/v1/webhooks/\(liveHookId)/deliveries", live))
        XCTAssertEqual(liveLog.count, liveIds.count)
        let testLog = try data(try await send("GET", "/v1/webhooks/\(testHookId)/deliveries", test))
        XCTAssertEqual(testLog.count, testIds.count)

        // Neither mode's key deletes the other's endpoint, which stays active; each deletes its own.
        let hooks = [(token: live, own: liveHookId, other: testHookId), (token: test, own: testHookId, other: liveHookId)]
        for h in hooks {
            let deleted = try await send("DELETE", "/v1/webhooks/\(h.other)", h.token)
            XCTAssertEqual(deleted.status, 404, deleted.text)
        }
        for h in hooks {
            let listed = try data(try await send("GET", "/v1/webhooks?limit=100", h.token))
            XCTAssertEqual(listed.first { $0.id == h.own }?.active, true)
            let r = try await send("DELETE", "/v1/webhooks/\(h.own)", h.token)
            XCTAssertEqual(r.status, 204, r.text)
        }
    }

    // MARK: - Store limits

    /// The App Store's 10 active offer-code coupons per product count in each mode: a test key
    /// must not be able to block live coupons.
    func testStoreLimitsCountEachModeApart() async throws {
        let test = try await key("test").key
        let product = "pro.\(UUID().uuidString.prefix(8).lowercased())"
        func iosDiscount(_ token: String) async throws -> HTTPClient.Response {
            try await client.json("POST", "/v1/coupons", ["code": Self.code("IOS"), "kind": "percentOff", "percentOff": 20, "productIds": [product],
                                                          "duration": ["unit": "month", "count": 1], "periodCount": 1, "platforms": ["ios"],
                                                          "maxRedemptions": 100, "expiresAt": Self.inAMonth], token: token)
        }
        for _ in 0..<10 {
            let r = try await iosDiscount(test)
            XCTAssertEqual(r.status, 201, r.text)
        }
        let eleventh = try await iosDiscount(test)
        XCTAssertEqual(eleventh.errorCode, "storeLimit")
        let liveOne = try await iosDiscount(live)
        XCTAssertEqual(liveOne.status, 201, liveOne.text)
    }
}
