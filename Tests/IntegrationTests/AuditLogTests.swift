import Core
import Cryptography
import Foundation
import TestSupport
import XCTest

/// The audit log: every operator change through the API writes one record, in the
/// transaction of the change, with who, what, when, before and after (never a secret), the
/// request id and the mode; `GET /v1/audit` reads them, admin only, paged and filtered.
final class AuditLogTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var minter: TokenMinter!

    override class func startSuite() throws {
        stack = try Stack(environment: ["REDEEM_WEBHOOK_ALLOW_PRIVATE": "1"])
        minter = try stack.minter()
    }

    override class func stopSuite() { stack?.stop() }

    var client: HTTPClient { Self.stack.client }
    var admin: String { Self.stack.adminKey }

    static func code(_ prefix: String) -> String { prefix + "-" + UUID().uuidString.prefix(8).uppercased() }

    /// Sends a JSON body (or none) with a request id of our own, and the admin key unless told.
    func call(_ method: String, _ path: String, _ body: [String: Any]? = nil, token: String? = nil, requestId: String? = nil) async throws
        -> HTTPClient.Response {
        var headers = ["Authorization": "Bearer \(token ?? admin)"]
        if let requestId { headers["X-Request-Id"] = requestId }
        if body != nil { headers["Content-Type"] = "application/json" }
        return try await client.send(method, path, body: try body.map { try JSONSerialization.data(withJSONObject: $0) }, headers: headers)
    }

    func expect(_ status: Int, _ r: HTTPClient.Response, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(r.status, status, r.text, file: file, line: line)
    }

    func entries(_ query: String, token: String? = nil) async throws -> [[String: Any]] {
        let r = try await call("GET", "/v1/audit?" + query, token: token)
        XCTAssertEqual(r.status, 200, r.text)
        return try r.json()["data"] as? [[String: Any]] ?? []
    }

    /// The id of the bootstrap admin key, the actor of every change this suite makes with it.
    func adminKeyId() async throws -> String {
        let keys = try await call("GET", "/v1/api-keys?limit=100")
        let list = try keys.json()["data"] as? [[String: Any]] ?? []
        return try XCTUnwrap(list.first { $0["name"] as? String == "bootstrap admin" }?["id"] as? String)
    }

    func test1_everyCouponChangeIsRecordedWithBeforeAndAfter() async throws {
        let code = Self.code("AUD")
        let made = try await call("POST", "/v1/coupons", ["code": code, "kind": "freePeriod", "duration": ["unit": "month", "count": 1], "maxRedemptions": 5],
                                  requestId: "req-create-\(code)")
        XCTAssertEqual(made.status, 201, made.text)
        // A dry run and a refused change change nothing, so they are not recorded.
        let dry = try await call("POST", "/v1/coupons?dryRun=true", ["code": Self.code("DRY"), "kind": "freePeriod", "duration": ["unit": "month", "count": 1]])
        XCTAssertEqual(dry.status, 200, dry.text)
        let again = try await call("POST", "/v1/coupons", ["code": code, "kind": "freePeriod", "duration": ["unit": "month", "count": 1]])
        XCTAssertEqual(again.status, 409, again.text)
        let lowered = try await call("PATCH", "/v1/coupons/\(code)", ["maxRedemptions": 3], requestId: "req-patch-\(code)")
        XCTAssertEqual(lowered.status, 200, lowered.text)
        let refused = try await call("PATCH", "/v1/coupons/\(code)", ["maxRedemptions": 0])
        XCTAssertEqual(refused.status, 422, refused.text)
        let gone = try await call("DELETE", "/v1/coupons/\(code)")
        XCTAssertEqual(gone.status, 204, gone.text)

        let keyId = try await adminKeyId()
        let rows = try await entries("objectType=coupon&objectId=\(code)")
        XCTAssertEqual(rows.map { $0["action"] as? String }, ["coupon.deactivate", "coupon.update", "coupon.create"], "\(rows)")
        for row in rows {
            let actor = row["actor"] as? [String: Any]
            XCTAssertEqual(actor?["type"] as? String, "apiKey")
            XCTAssertEqual(actor?["id"] as? String, keyId)
            XCTAssertEqual(row["mode"] as? String, "live")
            XCTAssertEqual(row["objectType"] as? String, "coupon")
            XCTAssertNotNil(row["createdAt"] as? String)
        }
        let create = rows[2], patch = rows[1], deactivate = rows[0]
        XCTAssertTrue(create["before"] is NSNull)
        XCTAssertEqual((create["after"] as? [String: Any])?["code"] as? String, code)
        XCTAssertEqual(create["requestId"] as? String, "req-create-\(code)")
        XCTAssertEqual((patch["before"] as? [String: Any])?["maxRedemptions"] as? Int, 5)
        XCTAssertEqual((patch["after"] as? [String: Any])?["maxRedemptions"] as? Int, 3)
        XCTAssertEqual(patch["requestId"] as? String, "req-patch-\(code)")
        XCTAssertEqual((deactivate["before"] as? [String: Any])?["active"] as? Bool, true)
        XCTAssertEqual((deactivate["after"] as? [String: Any])?["active"] as? Bool, false)
    }

    func test2_keysWebhooksAndPlansAreRecordedWithoutTheirSecrets() async throws {
        let madeKey = try await call("POST", "/v1/api-keys", ["name": "audited", "role": "readonly"])
        XCTAssertEqual(madeKey.status, 201, madeKey.text)
        let key = try XCTUnwrap(try madeKey.json()["key"] as? String)
        let keyId = try XCTUnwrap(try madeKey.json()["id"] as? String)
        expect(204, try await call("DELETE", "/v1/api-keys/\(keyId)"))

        let hook = try await call("POST", "/v1/webhooks", ["url": "http://127.0.0.1:9/hook", "events": ["coupon.redeemed"]])
        XCTAssertEqual(hook.status, 201, hook.text)
        let secret = try XCTUnwrap(try hook.json()["secret"] as? String)
        let hookId = try XCTUnwrap(try hook.json()["id"] as? String)
        expect(204, try await call("DELETE", "/v1/webhooks/\(hookId)"))

        let plan = "audit." + UUID().uuidString.prefix(6).lowercased()
        expect(201, try await call("POST", "/v1/plans", ["productId": plan, "name": "Pro"]))
        expect(200, try await call("PATCH", "/v1/plans/\(plan)", ["name": "Pro yearly"]))

        let keyRows = try await entries("objectType=apiKey&objectId=\(keyId)")
        XCTAssertEqual(keyRows.map { $0["action"] as? String }, ["apiKey.revoke", "apiKey.create"])
        XCTAssertEqual((keyRows[1]["after"] as? [String: Any])?["role"] as? String, "readonly")
        XCTAssertTrue(keyRows[0]["after"] is NSNull)
        let hookRows = try await entries("objectType=webhook&objectId=\(hookId)")
        XCTAssertEqual(hookRows.map { $0["action"] as? String }, ["webhook.delete", "webhook.create"])
        XCTAssertEqual((hookRows[1]["after"] as? [String: Any])?["url"] as? String, "http://127.0.0.1:9/hook")
        let planRows = try await entries("objectType=plan&objectId=\(plan)")
        XCTAssertEqual(planRows.map { $0["action"] as? String }, ["plan.update", "plan.create"])
        XCTAssertEqual((planRows[0]["before"] as? [String: Any])?["name"] as? String, "Pro")
        XCTAssertEqual((planRows[0]["after"] as? [String: Any])?["name"] as? String, "Pro yearly")

        // No secret is ever in the log, nor any part of one after its prefix.
        let all = try await call("GET", "/v1/audit?limit=100")
        XCTAssertFalse(all.text.contains(key), "an API key's secret is in the audit log")
        XCTAssertFalse(all.text.contains(String(key.suffix(20))))
        XCTAssertFalse(all.text.contains(secret), "a webhook secret is in the audit log")
        XCTAssertFalse(all.text.contains("whsec_"))
        XCTAssertFalse(all.text.contains("\"secret\""))
    }

    func test3_onlyAdminsReadItAndEachModeItsOwn() async throws {
        for role in ["readonly", "support"] {
            let made = try await call("POST", "/v1/api-keys", ["name": role, "role": role])
            let key = try XCTUnwrap(try made.json()["key"] as? String)
            let r = try await call("GET", "/v1/audit", token: key)
            XCTAssertEqual(r.status, 403, r.text)
            XCTAssertEqual(r.errorCode, "forbidden")
        }
        let user = try Self.minter.user()
        expect(403, try await call("GET", "/v1/audit", token: user.token))
        expect(401, try await client.get("/v1/audit"))

        let testMade = try await call("POST", "/v1/api-keys", ["name": "test admin", "role": "admin", "mode": "test"])
        let testKey = try XCTUnwrap(try testMade.json()["key"] as? String)
        let testKeyId = try XCTUnwrap(try testMade.json()["id"] as? String)
        let code = Self.code("TST")
        expect(201, try await call("POST", "/v1/coupons", ["code": code, "kind": "freePeriod", "duration": ["unit": "week", "count": 1]], token: testKey))
        let testRows = try await entries("limit=100", token: testKey)
        XCTAssertFalse(testRows.isEmpty)
        XCTAssertTrue(testRows.allSatisfy { $0["mode"] as? String == "test" }, "a test key reads only test-mode records")
        XCTAssertEqual(testRows.first?["objectId"] as? String, code)
        XCTAssertEqual((testRows.first?["actor"] as? [String: Any])?["id"] as? String, testKeyId)
        let liveRows = try await entries("objectId=\(code)")
        XCTAssertTrue(liveRows.isEmpty, "a live key reads no test-mode record")
        // By actor: every record of the test key, and nothing else.
        let byActor = try await entries("actorId=\(testKeyId)", token: testKey)
        XCTAssertEqual(byActor.map { $0["objectId"] as? String }, [code])

        for bad in ["objectType=cake", "actorId=nope", "limit=0", "cursor=abc"] {
            let r = try await call("GET", "/v1/audit?" + bad)
            XCTAssertEqual(r.status, 422, bad + " " + r.text)
        }
    }

    func test5_aTestEventReachesOneEndpointSigned() async throws {
        let receiver = try WebhookReceiver()
        defer { let done = DispatchSemaphore(value: 0); Task { await receiver.stop(); done.signal() }; done.wait() }
        let hook = try await call("POST", "/v1/webhooks", ["url": receiver.url.absoluteString, "events": ["coupon.redeemed"]])
        expect(201, hook)
        let id = try XCTUnwrap(try hook.json()["id"] as? String)
        let secret = try XCTUnwrap(try hook.json()["secret"] as? String)
        let refused = try await call("POST", "/v1/webhooks", ["url": receiver.url.absoluteString, "events": ["webhook.test"]])
        expect(422, refused)
        let sent = try await call("POST", "/v1/webhooks/\(id)/test")
        expect(201, sent)
        XCTAssertEqual(try sent.json()["type"] as? String, "webhook.test")
        let webhookId = try XCTUnwrap(try sent.json()["webhookId"] as? String)
        var got: WebhookReceiver.Delivery?
        for _ in 0..<100 where got == nil {
            got = receiver.received.first { $0.id == webhookId }
            if got == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        let delivery = try XCTUnwrap(got, "the test event did not arrive")
        let body = try XCTUnwrap(try JSONSerialization.jsonObject(with: delivery.body) as? [String: Any])
        XCTAssertEqual(body["type"] as? String, "webhook.test")
        XCTAssertEqual((body["data"] as? [String: Any])?["endpointId"] as? String, id)
        // Signed per Standard Webhooks with the endpoint's secret.
        let key = try XCTUnwrap(Data(base64Encoded: String(secret.dropFirst("whsec_".count))))
        let signed = Data("\(delivery.id).\(delivery.timestamp).".utf8) + delivery.body
        XCTAssertTrue(delivery.signature.contains("v1," + Data(Crypto.hmacSHA256(key: Array(key), signed)).base64EncodedString()))
        expect(404, try await call("POST", "/v1/webhooks/\(UUID().uuidString)/test"))
    }

    func test4_pagesWalkTheWholeLogOnceAcrossServices() async throws {
        // Records from all three services: coupons, accounts and grants.
        for i in 0..<3 {
            expect(201, try await call("POST", "/v1/coupons", ["code": Self.code("PG\(i)"), "kind": "freePeriod", "duration": ["unit": "day", "count": 1]]))
            expect(201, try await call("POST", "/v1/api-keys", ["name": "page \(i)", "role": "readonly"]))
            expect(201, try await call("POST", "/v1/webhooks", ["url": "http://127.0.0.1:9/p\(i)", "events": ["coupon.redeemed"]]))
        }
        let whole = try await entries("limit=100")
        var walked: [String] = []
        var cursor: String?
        repeat {
            let r = try await call("GET", "/v1/audit?limit=4" + (cursor.map { "&cursor=\($0)" } ?? ""))
            XCTAssertEqual(r.status, 200, r.text)
            let o = try r.json()
            let page = o["data"] as? [[String: Any]] ?? []
            XCTAssertLessThanOrEqual(page.count, 4)
            walked += page.compactMap { $0["id"] as? String }
            cursor = o["nextCursor"] as? String
        } while cursor != nil
        XCTAssertEqual(walked, whole.compactMap { $0["id"] as? String }, "pages are the whole log, newest first, each record once")
        XCTAssertEqual(Set(whole.compactMap { $0["objectType"] as? String }).intersection(["coupon", "apiKey", "webhook"]).count, 3)
        let times = whole.compactMap { $0["createdAt"] as? String }
        XCTAssertEqual(times, times.sorted(by: >), "newest first")
    }
}
