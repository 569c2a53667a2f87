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

    /// One audit record; `before` and `after` hold the fields these tests read.
    struct Entry: Decodable {
        struct Actor: Decodable {
            let type: String
            let id: String?
        }
        struct Snapshot: Decodable {
            let code: String?
            let maxRedemptions: Int?
            let active: Bool?
            let role: String?
            let url: String?
            let name: String?
        }
        let id: String
        let action: String
        let mode: String
        let objectType: String
        let objectId: String
        let requestId: String?
        let createdAt: String
        let actor: Actor?
        let before: Snapshot?
        let after: Snapshot?
    }

    func entries(_ query: String, token: String? = nil) async throws -> [Entry] {
        try await page(query, token: token).data
    }

    func page(_ query: String, token: String? = nil) async throws -> ListBody<Entry> {
        let r = try await call("GET", "/v1/audit?" + query, token: token)
        XCTAssertEqual(r.status, 200, r.text)
        return try r.decode()
    }

    /// The id of the bootstrap admin key, the actor of every change this suite makes with it.
    func adminKeyId() async throws -> String {
        let keys = try await call("GET", "/v1/api-keys?limit=100").decode(ListBody<APIKeyBody>.self).data
        return try XCTUnwrap(keys.first { $0.name == "bootstrap admin" }?.id)
    }

    /// Deletes an endpoint this test made when the test ends.
    func deleteAtTheEnd(_ webhook: HTTPClient.Response) throws {
        let id = try webhook.decode(WebhookEndpointBody.self).id, client = self.client, admin = self.admin
        addTeardownBlock {
            _ = try await client.send("DELETE", "/v1/webhooks/\(id)", headers: ["Authorization": "Bearer \(admin)"])
        }
    }

    func testEveryCouponChangeIsRecordedWithBeforeAndAfter() async throws {
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
        XCTAssertEqual(rows.map(\.action), ["coupon.deactivate", "coupon.update", "coupon.create"], "\(rows)")
        for row in rows {
            XCTAssertEqual(row.actor?.type, "apiKey")
            XCTAssertEqual(row.actor?.id, keyId)
            XCTAssertEqual(row.mode, "live")
            XCTAssertEqual(row.objectType, "coupon")
            XCTAssertNotNil(Timestamp.parse(row.createdAt))
        }
        let create = rows[2], patch = rows[1], deactivate = rows[0]
        XCTAssertNil(create.before)
        XCTAssertEqual(create.after?.code, code)
        XCTAssertEqual(create.requestId, "req-create-\(code)")
        XCTAssertEqual(patch.before?.maxRedemptions, 5)
        XCTAssertEqual(patch.after?.maxRedemptions, 3)
        XCTAssertEqual(patch.requestId, "req-patch-\(code)")
        XCTAssertEqual(deactivate.before?.active, true)
        XCTAssertEqual(deactivate.after?.active, false)
    }

    func testKeysWebhooksAndPlansAreRecordedWithoutTheirSecrets() async throws {
        let madeKey = try await call("POST", "/v1/api-keys", ["name": "audited", "role": "readonly"])
        XCTAssertEqual(madeKey.status, 201, madeKey.text)
        let key = try XCTUnwrap(try madeKey.decode(APIKeyBody.self).key)
        let keyId = try madeKey.decode(APIKeyBody.self).id
        expect(204, try await call("DELETE", "/v1/api-keys/\(keyId)"))

        let hook = try await call("POST", "/v1/webhooks", ["url": "http://127.0.0.1:9/hook", "events": ["coupon.redeemed"]])
        XCTAssertEqual(hook.status, 201, hook.text)
        let secret = try XCTUnwrap(try hook.decode(WebhookEndpointBody.self).secret)
        let hookId = try hook.decode(WebhookEndpointBody.self).id
        expect(204, try await call("DELETE", "/v1/webhooks/\(hookId)"))

        let plan = "audit." + UUID().uuidString.prefix(6).lowercased()
        expect(201, try await call("POST", "/v1/plans", ["productId": plan, "name": "Pro"]))
        expect(200, try await call("PATCH", "/v1/plans/\(plan)", ["name": "Pro yearly"]))

        let keyRows = try await entries("objectType=apiKey&objectId=\(keyId)")
        XCTAssertEqual(keyRows.map(\.action), ["apiKey.revoke", "apiKey.create"])
        XCTAssertEqual(keyRows[1].after?.role, "readonly")
        XCTAssertNil(keyRows[0].after)
        let hookRows = try await entries("objectType=webhook&objectId=\(hookId)")
        XCTAssertEqual(hookRows.map(\.action), ["webhook.delete", "webhook.create"])
        XCTAssertEqual(hookRows[1].after?.url, "http://127.0.0.1:9/hook")
        let planRows = try await entries("objectType=plan&objectId=\(plan)")
        XCTAssertEqual(planRows.map(\.action), ["plan.update", "plan.create"])
        XCTAssertEqual(planRows[0].before?.name, "Pro")
        XCTAssertEqual(planRows[0].after?.name, "Pro yearly")

        // No secret is ever in the log, nor any part of one after its prefix.
        let all = try await call("GET", "/v1/audit?limit=100")
        XCTAssertFalse(all.text.contains(key), "an API key's secret is in the audit log")
        XCTAssertFalse(all.text.contains(String(key.suffix(20))))
        XCTAssertFalse(all.text.contains(secret), "a webhook secret is in the audit log")
        XCTAssertFalse(all.text.contains("whsec_"))
        XCTAssertFalse(all.text.contains("\"secret\""))
    }

    func testOnlyAdminsReadItAndEachModeItsOwn() async throws {
        for role in ["readonly", "support"] {
            let made = try await call("POST", "/v1/api-keys", ["name": role, "role": role])
            let key = try XCTUnwrap(try made.decode(APIKeyBody.self).key)
            let r = try await call("GET", "/v1/audit", token: key)
            XCTAssertEqual(r.status, 403, r.text)
            XCTAssertEqual(r.errorCode, "forbidden")
        }
        let user = try Self.minter.user()
        expect(403, try await call("GET", "/v1/audit", token: user.token))
        expect(401, try await client.get("/v1/audit"))

        let testMade = try await call("POST", "/v1/api-keys", ["name": "test admin", "role": "admin", "mode": "test"])
        let testKey = try XCTUnwrap(try testMade.decode(APIKeyBody.self).key)
        let testKeyId = try testMade.decode(APIKeyBody.self).id
        let code = Self.code("TST")
        expect(201, try await call("POST", "/v1/coupons", ["code": code, "kind": "freePeriod", "duration": ["unit": "week", "count": 1]], token: testKey))
        let testRows = try await entries("limit=100", token: testKey)
        XCTAssertFalse(testRows.isEmpty)
        XCTAssertTrue(testRows.allSatisfy { $0.mode == "test" }, "a test key reads only test-mode records")
        XCTAssertEqual(testRows.first?.objectId, code)
        XCTAssertEqual(testRows.first?.actor?.id, testKeyId)
        let liveRows = try await entries("objectId=\(code)")
        XCTAssertTrue(liveRows.isEmpty, "a live key reads no test-mode record")
        // By actor: every record of the test key, and nothing else.
        let byActor = try await entries("actorId=\(testKeyId)", token: testKey)
        XCTAssertEqual(byActor.map(\.objectId), [code])

        for bad in ["objectType=cake", "actorId=nope", "limit=0", "cursor=abc"] {
            let r = try await call("GET", "/v1/audit?" + bad)
            XCTAssertEqual(r.status, 422, bad + " " + r.text)
        }
    }

    /// What `POST /v1/webhooks/{id}/test` answers, and its event's data.
    struct TestEvent: Decodable {
        struct Payload: Decodable, Sendable { let endpointId: String }
        let type: String
        let webhookId: String?
    }

    func testATestEventReachesOneEndpointSigned() async throws {
        let receiver = try WebhookReceiver()
        addTeardownBlock { await receiver.stop() }
        let hook = try await call("POST", "/v1/webhooks", ["url": receiver.url.absoluteString, "events": ["coupon.redeemed"]])
        expect(201, hook)
        try deleteAtTheEnd(hook)
        let id = try hook.decode(WebhookEndpointBody.self).id
        let secret = try XCTUnwrap(try hook.decode(WebhookEndpointBody.self).secret)
        let refused = try await call("POST", "/v1/webhooks", ["url": receiver.url.absoluteString, "events": ["webhook.test"]])
        expect(422, refused)
        let sent = try await call("POST", "/v1/webhooks/\(id)/test")
        expect(201, sent)
        let test = try sent.decode(TestEvent.self)
        XCTAssertEqual(test.type, "webhook.test")
        let webhookId = try XCTUnwrap(test.webhookId)
        _ = try await Self.stack.eventually(10) { receiver.received.contains { $0.id == webhookId } }
        let delivery = try XCTUnwrap(receiver.received.first { $0.id == webhookId }, "the test event did not arrive")
        let body = try JSONDecoder().decode(WebhookEventBody<TestEvent.Payload>.self, from: delivery.body)
        XCTAssertEqual(body.type, "webhook.test")
        XCTAssertEqual(body.data.endpointId, id)
        // Signed per Standard Webhooks with the endpoint's secret.
        let key = try XCTUnwrap(Data(base64Encoded: String(secret.dropFirst("whsec_".count))))
        let signed = Data("\(delivery.id).\(delivery.timestamp).".utf8) + delivery.body
        XCTAssertTrue(delivery.signature.contains("v1," + Data(Crypto.hmacSHA256(key: Array(key), signed)).base64EncodedString()))
        expect(404, try await call("POST", "/v1/webhooks/\(UUID().uuidString)/test"))
    }

    func testPagesWalkTheWholeLogOnceAcrossServices() async throws {
        // Records from all three services: coupons, accounts and grants.
        for i in 0..<3 {
            expect(201, try await call("POST", "/v1/coupons", ["code": Self.code("PG\(i)"), "kind": "freePeriod", "duration": ["unit": "day", "count": 1]]))
            expect(201, try await call("POST", "/v1/api-keys", ["name": "page \(i)", "role": "readonly"]))
            let hook = try await call(
                "POST", "/v1/webhooks", ["url": "http://127.0.0.1:9/p\(i)", "events": ["coupon.redeemed"]])
            expect(201, hook)
            try deleteAtTheEnd(hook)
        }
        let whole = try await entries("limit=100")
        var walked: [String] = []
        var cursor: String?
        repeat {
            let r = try await call("GET", "/v1/audit?limit=4" + (cursor.map { "&cursor=\($0)" } ?? ""))
            XCTAssertEqual(r.status, 200, r.text)
            let page = try r.decode(ListBody<Entry>.self)
            XCTAssertLessThanOrEqual(page.data.count, 4)
            walked += page.data.map(\.id)
            cursor = page.nextCursor
        } while cursor != nil
        XCTAssertEqual(walked, whole.map(\.id), "pages are the whole log, newest first, each record once")
        XCTAssertEqual(Set(whole.map(\.objectType)).intersection(["coupon", "apiKey", "webhook"]).count, 3)
        let times = whole.map(\.createdAt)
        XCTAssertEqual(times, times.sorted(by: >), "newest first")
    }
}
