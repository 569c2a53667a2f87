import Core
import Foundation
import Runtime
import TestSupport
import XCTest

/// Every list route follows the API's list rules over HTTP: `{data, nextCursor}`, `limit` 1–100 (default 20),
/// a cursor that walks every item exactly once and is null on the last page, and 422 (never a 5xx)
/// for a bad limit or a cursor the API did not give out.
final class ListPagingTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var minter: TokenMinter!

    override class func startSuite() throws {
        stack = try Stack(environment: ["REDEEM_WEBHOOK_ALLOW_PRIVATE": "1"])
        minter = try stack.minter()
    }

    override class func stopSuite() {
        stack?.stop()
    }

    var client: HTTPClient { Self.stack.client }
    var admin: String { Self.stack.adminKey }
    /// Nothing listens here: deliveries to it fail and wait for their retry, which is all the log needs.
    static let deadEndpoint = "http://127.0.0.1:9/hook"

    /// Walks a list `limit` at a time and answers every item; each page but the last is full.
    func walk(_ path: String, token: String, limit: Int) async throws -> [[String: Any]] {
        var items: [[String: Any]] = []
        var cursor: String?
        var pages = 0
        repeat {
            let sep = path.contains("?") ? "&" : "?"
            let r = try await client.get(path + sep + "limit=\(limit)" + (cursor.map { "&cursor=\($0)" } ?? ""), token: token)
            XCTAssertEqual(r.status, 200, r.text)
            let o = try r.json()
            let page = try XCTUnwrap(o["data"] as? [[String: Any]], r.text)
            XCTAssertTrue(o.keys.contains("nextCursor"), "nextCursor is always present: \(r.text.prefix(200))")
            cursor = o["nextCursor"] as? String
            XCTAssertTrue(cursor == nil || page.count == limit, "only the last page is short")
            XCTAssertLessThanOrEqual(page.count, limit)
            items += page
            pages += 1
        } while cursor != nil && pages < 1000
        return items
    }

    /// The default page is 20 items with a cursor, and walks of several sizes see `made` (in
    /// `order` when asked) with every item once.
    func checkPages(_ path: String, token: String, made: [String], key: String = "id", newestFirst: Bool = true,
                    file: StaticString = #filePath, line: UInt = #line) async throws {
        let first = try await client.get(path, token: token)
        XCTAssertEqual(first.status, 200, first.text, file: file, line: line)
        let o = try first.json()
        XCTAssertEqual((o["data"] as? [[String: Any]])?.count, 20, "default limit 20 on \(path)", file: file, line: line)
        XCTAssertNotNil(o["nextCursor"] as? String, "more than 20 items: a cursor on \(path)", file: file, line: line)
        for limit in [7, 100] {
            let ids = try await walk(path, token: token, limit: limit).compactMap { $0[key] as? String }
            XCTAssertEqual(Set(ids).count, ids.count, "each item once on \(path), limit \(limit)", file: file, line: line)
            let mine = ids.filter(made.contains)
            if newestFirst {
                XCTAssertEqual(mine, made.reversed(), "newest first on \(path), limit \(limit)", file: file, line: line)
            } else {
                XCTAssertEqual(Set(mine), Set(made), "every item on \(path), limit \(limit)", file: file, line: line)
            }
        }
    }

    func freePeriod() async throws -> String {
        let code = "PAGE-" + UUID().uuidString.prefix(8).uppercased()
        let r = try await client.json("POST", "/v1/coupons", ["code": code, "kind": "freePeriod", "duration": ["unit": "month", "count": 1]], token: admin)
        XCTAssertEqual(r.status, 201, r.text)
        return code
    }

    func webhook(_ events: [String]) async throws -> String {
        let r = try await client.json("POST", "/v1/webhooks", ["url": Self.deadEndpoint, "events": events], token: admin)
        XCTAssertEqual(r.status, 201, r.text)
        return try XCTUnwrap(try r.json()["id"] as? String)
    }

    // MARK: -

    func testAPIKeysArePaged() async throws {
        var made: [String] = []
        for i in 0..<25 {
            let r = try await client.json("POST", "/v1/api-keys", ["name": "paged \(i)", "role": "readonly", "mode": "test"], token: admin)
            XCTAssertEqual(r.status, 201, r.text)
            made.append(try XCTUnwrap(try r.json()["id"] as? String))
        }
        try await checkPages("/v1/api-keys", token: admin, made: made)
    }

    func testWebhooksArePaged() async throws {
        var made: [String] = []
        for _ in 0..<25 { made.append(try await webhook(["redemption.failed"])) }
        try await checkPages("/v1/webhooks", token: admin, made: made)
        for id in made { _ = try await client.send("DELETE", "/v1/webhooks/\(id)", headers: ["Authorization": "Bearer \(admin)"]) }
    }

    /// One user's 25 redemptions page newest first; each completion queues a delivery to the
    /// endpoint, and its delivery log pages too (deliveries queued together share a time).
    func testMyRedemptionsAndDeliveriesArePaged() async throws {
        let hook = try await webhook(["coupon.redeemed"])
        let u = try Self.minter.user()
        let other = try Self.minter.user()
        var made: [String] = []
        for _ in 0..<25 {
            let code = try await freePeriod()
            let r = try await client.json("POST", "/v1/redemptions", ["code": code, "platform": "web"], token: u.token)
            XCTAssertEqual(r.status, 201, r.text)
            made.append(try XCTUnwrap(try r.json()["redemptionId"] as? String))
        }
        _ = try await client.json("POST", "/v1/redemptions", ["code": try await freePeriod(), "platform": "web"], token: other.token)
        try await checkPages("/v1/me/redemptions", token: u.token, made: made, key: "redemptionId")
        let everyOne = try await walk("/v1/me/redemptions", token: u.token, limit: 100).compactMap { $0["redemptionId"] as? String }
        XCTAssertEqual(everyOne, made.reversed(), "only the user's own")

        let deliveries = "/v1/webhooks/\(hook)/deliveries"
        let queued = try await Self.stack.eventually(30) { try await self.walk(deliveries, token: self.admin, limit: 100).count >= 26 }
        XCTAssertTrue(queued, "a delivery for every completed redemption")
        let webhookIds = try await walk(deliveries, token: admin, limit: 100).compactMap { $0["webhookId"] as? String }
        XCTAssertEqual(webhookIds.count, 26)
        try await checkPages(deliveries, token: admin, made: webhookIds, key: "webhookId", newestFirst: false)
        _ = try await client.send("DELETE", "/v1/webhooks/\(hook)", headers: ["Authorization": "Bearer \(admin)"])
        // Deleting the endpoint drops its queue: nothing is left pending to be sent to it.
        let left = try await walk(deliveries, token: admin, limit: 100)
        XCTAssertEqual(left.count, 26)
        XCTAssertEqual(Set(left.compactMap { $0["status"] as? String }), ["failed"], "\(left.prefix(2))")
        XCTAssertEqual(Set(left.compactMap { $0["lastError"] as? String }), ["endpoint deleted"])
    }

    /// A bad limit is 422 on `limit`; a garbage, negative, fractional, offset-like or forged cursor
    /// (a time PostgreSQL can't hold included) is 422 on `cursor`, on every list route.
    func testBadLimitsAndCursorsAre422OnEveryList() async throws {
        let code = try await freePeriod()
        let hook = try await webhook(["redemption.failed"])
        let u = try Self.minter.user()
        let routes: [(String, String)] = [
            ("/v1/api-keys", admin), ("/v1/webhooks", admin), ("/v1/webhooks/\(hook)/deliveries", admin), ("/v1/me/redemptions", u.token),
            ("/v1/coupons", admin), ("/v1/coupons/\(code)/redemptions", admin),
        ]
        let id = "b8f0c8fa-f9ad-407d-96e3-be8ea6477056"
        let forged = ["9223372036854775807|\(id)", "-9223372036854775808|\(id)", "-1|\(id)", "99999999999999999999|\(id)", "1.5|\(id)"]
            .map { Base64URL.encode(Array($0.utf8)) }
        let cursors = ["garbage", "zzz", "-1", "1.5", "0", "20", "MjA", ""] + forged
        for (path, token) in routes {
            for limit in ["0", "101", "abc", "-1", "1.5"] {
                let r = try await client.get("\(path)?limit=\(limit)", token: token)
                XCTAssertEqual(r.status, 422, "\(path) limit=\(limit): \(r.text)")
                XCTAssertEqual(r.errorField, "limit", "\(path) limit=\(limit)")
            }
            for cursor in cursors {
                let r = try await client.get("\(path)?cursor=\(cursor)", token: token)
                XCTAssertEqual(r.status, 422, "\(path) cursor=\(cursor): \(r.text)")
                XCTAssertEqual(r.errorCode, "invalid", "\(path) cursor=\(cursor)")
                XCTAssertEqual(r.errorField, "cursor", "\(path) cursor=\(cursor)")
            }
            let last = try await client.get("\(path)?limit=100", token: token)
            XCTAssertEqual(last.status, 200, last.text)
            XCTAssertTrue(try last.json()["nextCursor"] is NSNull, "null on the last page of \(path): \(last.text.prefix(200))")
        }
        _ = try await client.send("DELETE", "/v1/webhooks/\(hook)", headers: ["Authorization": "Bearer \(admin)"])
    }
}
