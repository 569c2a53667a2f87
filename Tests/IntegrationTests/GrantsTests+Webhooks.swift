import Core
import Database
import Foundation
import TestSupport
import XCTest

/// Webhooks as an operator runs them after making an endpoint, on GrantsTests' stack: a change
/// (`PATCH`, switching back on one a 410 disabled), a delivery sent again, a rotated secret, and
/// the events coupons commits (`coupon.exhausted`, `redemption.released`), each once.
extension GrantsTests {
    /// What every event of this file carries in `data`, as far as the tests read it.
    struct EventData: Decodable, Sendable {
        struct Coupon: Decodable, Sendable { let code: String }
        let redemptionId: String?
        let status: String?
        let failureReason: String?
        let coupon: Coupon?
        let maxRedemptions: Int?
        let redemptionCount: Int?
    }

    func patch(_ id: String, _ body: [String: Any], token: String? = nil) async throws -> HTTPClient.Response {
        try await client.json("PATCH", "/v1/webhooks/\(id)", body, token: token ?? admin)
    }

    /// Queues a `webhook.test` event to the endpoint: its delivery's id.
    func sendTest(_ endpoint: String) async throws -> String {
        let r = try await client.json("POST", "/v1/webhooks/\(endpoint)/test", [:], token: admin)
        XCTAssertEqual(r.status, 201, r.text)
        return try XCTUnwrap(try r.decode(DeliveryBody.self).id)
    }

    /// The `webhook.test` deliveries `receiver` got for `endpoint`, oldest first.
    static func tests(_ receiver: WebhookReceiver, of endpoint: String) -> [WebhookReceiver.Delivery] {
        receiver.received.filter {
            String(decoding: $0.body, as: UTF8.self).lowercased().contains(endpoint.lowercased())
        }
    }

    /// Whether `secret` verifies the delivery's `webhook-signature` (any of its `v1,` entries),
    /// checked by Python's own hmac and base64 as a receiver would (Standard Webhooks).
    static func verifies(_ secret: String, _ d: WebhookReceiver.Delivery) throws -> Bool {
        let dir = try Project.temporaryDirectory("hook")
        defer { try? FileManager.default.removeItem(at: dir) }
        let bodyFile = dir.appendingPathComponent("body")
        try d.body.write(to: bodyFile)
        let out = try Subprocess.run(
            "/usr/bin/python3",
            [
                "-c",
                """
                import base64, hashlib, hmac, sys
                secret, msg_id, ts, sig, path = sys.argv[1:6]
                body = open(path, 'rb').read()
                key = base64.b64decode(secret[len('whsec_'):])
                expected = base64.b64encode(hmac.new(key, f'{msg_id}.{ts}.'.encode() + body, hashlib.sha256).digest()).decode()
                ok = any(hmac.compare_digest(s.split(',', 1)[1], expected) for s in sig.split(' ') if s.startswith('v1,'))
                print('ok' if ok else 'bad')
                """, secret, d.id, d.timestamp, d.signature, bodyFile.path
            ])
        return out == "ok"
    }

    func testPatchChangesAnEndpointAndSwitchesBackOnOneA410Disabled() async throws {
        let receiver = try receiver()
        let endpoint = try await endpoint(receiver.url, ["coupon.redeemed"]).id
        // Bad input: 422 naming the field, and nothing changed.
        let badURL = try await patch(endpoint, ["url": "ftp://example.com/x"])
        XCTAssertEqual(badURL.status, 422, badURL.text)
        XCTAssertEqual(badURL.errorField, "url")
        for events: [Any] in [["coupon.stolen"], [], ["webhook.test"]] {
            let bad = try await patch(endpoint, ["events": events])
            XCTAssertEqual(bad.status, 422, bad.text)
            XCTAssertEqual(bad.errorField, "events", "\(events)")
        }
        let badEnabled = try await patch(endpoint, ["enabled": "yes"])
        XCTAssertEqual(badEnabled.status, 422, badEnabled.text)
        XCTAssertEqual(badEnabled.errorField, "enabled")
        let missing = try await patch(UUID().uuidString, ["enabled": true])
        XCTAssertEqual(missing.status, 404, missing.text)
        // Another mode's key does not reach it.
        let testKey =
            try await client.json("POST", "/v1/api-keys", ["name": "t", "role": "admin", "mode": "test"], token: admin)
            .json()["key"] as? String
        let otherMode = try await patch(endpoint, ["enabled": false], token: try XCTUnwrap(testKey))
        XCTAssertEqual(otherMode.status, 404, otherMode.text)
        let unchanged = try await client.get("/v1/webhooks", token: admin).decode(ListBody<WebhookEndpointBody>.self)
            .data
            .first { $0.id == endpoint }
        XCTAssertEqual(unchanged?.url, receiver.url.absoluteString)
        XCTAssertEqual(unchanged?.active, true)

        // A 410 disables it; enabled: true switches it back on, and it is sent events again.
        receiver.respond(with: 410)
        _ = try await sendTest(endpoint)
        let disabled = try await Self.stack.eventually(10) {
            try await self.client.get("/v1/webhooks", token: self.admin).decode(ListBody<WebhookEndpointBody>.self).data
                .first { $0.id == endpoint }?.active == false
        }
        XCTAssertTrue(disabled, "a 410 disables the endpoint")
        let refused = try await client.json("POST", "/v1/webhooks/\(endpoint)/test", [:], token: admin)
        XCTAssertEqual(refused.status, 404, "a disabled endpoint takes no test event")
        receiver.respond(with: 204)
        let on = try await patch(endpoint, ["enabled": true])
        XCTAssertEqual(on.status, 200, on.text)
        XCTAssertEqual(try on.decode(WebhookEndpointBody.self).active, true)
        let before = Self.tests(receiver, of: endpoint).count
        _ = try await sendTest(endpoint)
        let reached = try await Self.stack.eventually(10) { Self.tests(receiver, of: endpoint).count > before }
        XCTAssertTrue(reached, "switched back on, the endpoint is sent events again")

        // A new URL and events: the next event goes to the new URL.
        let moved = try self.receiver()
        let changed = try await patch(
            endpoint, ["url": moved.url.absoluteString, "events": ["coupon.exhausted", "redemption.released"]])
        XCTAssertEqual(changed.status, 200, changed.text)
        let json = try changed.json()
        XCTAssertEqual(json["url"] as? String, moved.url.absoluteString)
        XCTAssertEqual(json["events"] as? [String], ["coupon.exhausted", "redemption.released"])
        XCTAssertNil(json["secret"], "a change never shows the secret")
        _ = try await sendTest(endpoint)
        let atNewURL = try await Self.stack.eventually(10) { !Self.tests(moved, of: endpoint).isEmpty }
        XCTAssertTrue(atNewURL)
        // Switched off by the operator: no test event, and the change is in the audit log.
        let off = try await patch(endpoint, ["enabled": false])
        XCTAssertEqual(try off.decode(WebhookEndpointBody.self).active, false)
        let none = try await client.json("POST", "/v1/webhooks/\(endpoint)/test", [:], token: admin)
        XCTAssertEqual(none.status, 404)
        let audit = try await client.get("/v1/audit?objectType=webhook&limit=100", token: admin)
        XCTAssertTrue(audit.text.contains("webhook.update"), audit.text)
    }

    func testRetrySendsADeliveryAgainWithTheSameEventId() async throws {
        let receiver = try receiver()
        let endpoint = try await endpoint(receiver.url, ["coupon.redeemed"]).id
        let other = try await self.endpoint(receiver.url, ["coupon.redeemed"]).id
        let delivery = try await sendTest(endpoint)
        let first = try await Self.stack.eventually(10) { Self.tests(receiver, of: endpoint).count == 1 }
        XCTAssertTrue(first)
        let delivered = try await Self.stack.eventually(10) {
            try await self.client.get("/v1/webhooks/\(endpoint)/deliveries", token: self.admin).decode(
                ListBody<DeliveryBody>.self
            )
            .data.first { $0.id == delivery }?.status == "delivered"
        }
        XCTAssertTrue(delivered)

        let retried = try await client.json(
            "POST", "/v1/webhooks/\(endpoint)/deliveries/\(delivery)/retry", [:], token: admin)
        XCTAssertEqual(retried.status, 200, retried.text)
        XCTAssertEqual(try retried.decode(DeliveryBody.self).status, "pending")
        let again = try await Self.stack.eventually(10) { Self.tests(receiver, of: endpoint).count == 2 }
        XCTAssertTrue(again, "the receiver gets the delivery again")
        let both = Self.tests(receiver, of: endpoint)
        XCTAssertEqual(Set(both.map(\.id)).count, 1, "the same webhook-id, so the receiver can dedupe")
        XCTAssertEqual(both.first?.body, both.last?.body, "the same event")
        let log = try await Self.stack.eventually(10) {
            let entry = try await self.client.get("/v1/webhooks/\(endpoint)/deliveries", token: self.admin).decode(
                ListBody<DeliveryBody>.self
            )
            .data.first { $0.id == delivery }
            return entry?.status == "delivered" && entry?.attempts == 2
        }
        XCTAssertTrue(log, "the log counts the retry as a second attempt")

        // Not this endpoint's delivery, or no such delivery: 404; a disabled endpoint: 409.
        let elsewhere = try await client.json(
            "POST", "/v1/webhooks/\(other)/deliveries/\(delivery)/retry", [:], token: admin)
        XCTAssertEqual(elsewhere.status, 404, elsewhere.text)
        let unknown = try await client.json(
            "POST", "/v1/webhooks/\(endpoint)/deliveries/\(UUID().uuidString)/retry", [:], token: admin)
        XCTAssertEqual(unknown.status, 404, unknown.text)
        _ = try await patch(endpoint, ["enabled": false])
        let whileOff = try await client.json(
            "POST", "/v1/webhooks/\(endpoint)/deliveries/\(delivery)/retry", [:], token: admin)
        XCTAssertEqual(whileOff.status, 409, whileOff.text)
        XCTAssertEqual(whileOff.errorCode, "invalidState")
    }

    func testARotatedSecretSignsBesideTheOldOneUntilItsWindowEnds() async throws {
        let receiver = try receiver()
        let made = try await endpoint(receiver.url, ["coupon.redeemed"])
        let endpoint = made.id, old = try XCTUnwrap(made.secret)
        let r = try await client.json("POST", "/v1/webhooks/\(endpoint)/rotate-secret", [:], token: admin)
        XCTAssertEqual(r.status, 200, r.text)
        let json = try r.json()
        let new = try XCTUnwrap(json["secret"] as? String)
        XCTAssertTrue(new.hasPrefix("whsec_"))
        XCTAssertNotEqual(new, old)
        let until = try XCTUnwrap((json["previousSecretExpiresAt"] as? String).flatMap(Timestamp.parse))
        XCTAssertEqual(until.timeIntervalSinceNow, 24 * 3600, accuracy: 120)
        let list = try await client.get("/v1/webhooks", token: admin)
        XCTAssertFalse(list.text.contains(new), "the new secret is shown once")

        // In the window: two signatures, each secret verifies.
        _ = try await sendTest(endpoint)
        let got = try await Self.stack.eventually(10) { Self.tests(receiver, of: endpoint).count == 1 }
        XCTAssertTrue(got)
        let during = try XCTUnwrap(Self.tests(receiver, of: endpoint).last)
        XCTAssertEqual(during.signature.split(separator: " ").count, 2, during.signature)
        XCTAssertTrue(try Self.verifies(new, during), "the new secret verifies")
        XCTAssertTrue(try Self.verifies(old, during), "the old secret still verifies")

        // After the window (its end moved to now): the new secret alone.
        let database = try Self.stack.adminDatabaseURL()
        _ = try await offThePool {
            try PGConnection(url: database).query(
                "UPDATE grants.webhook_endpoints SET previous_secret_expires_at = now() WHERE id = $1",
                [UUID(uuidString: endpoint)!])
        }
        _ = try await sendTest(endpoint)
        let second = try await Self.stack.eventually(10) { Self.tests(receiver, of: endpoint).count == 2 }
        XCTAssertTrue(second)
        let after = try XCTUnwrap(Self.tests(receiver, of: endpoint).last)
        XCTAssertEqual(after.signature.split(separator: " ").count, 1, after.signature)
        XCTAssertTrue(try Self.verifies(new, after))
        XCTAssertFalse(try Self.verifies(old, after), "the old secret no longer verifies")
        let missing = try await client.json(
            "POST", "/v1/webhooks/\(UUID().uuidString)/rotate-secret", [:], token: admin)
        XCTAssertEqual(missing.status, 404)
    }

    /// A discount coupon with one use: reserving it exhausts it (`coupon.exhausted`), and the
    /// reservation expiring gives the use back (`redemption.released`); a second reservation
    /// filling the same cap again is not a second exhaustion. Each event arrives once.
    func testCouponExhaustedAndRedemptionReleasedArriveOnceEach() async throws {
        let receiver = try receiver()
        _ = try await endpoint(receiver.url, ["coupon.exhausted", "redemption.released"])
        let code = "X-" + UUID().uuidString.prefix(8).uppercased()
        let made = try await client.json(
            "POST", "/v1/coupons",
            [
                "code": code, "kind": "percentOff", "percentOff": 20, "productIds": ["pro.monthly"],
                "duration": ["unit": "month", "count": 1], "periodCount": 1, "platforms": ["web"], "maxRedemptions": 1
            ], token: admin)
        XCTAssertEqual(made.status, 201, made.text)
        func reserve() async throws -> String {
            let u = try Self.minter.user()
            let r = try await client.json("POST", "/v1/redemptions", ["code": code, "platform": "web"], token: u.token)
            XCTAssertEqual(r.status, 201, r.text)
            XCTAssertEqual(try r.decode(RedemptionBody.self).status, "reserved")
            return try r.decode(RedemptionBody.self).redemptionId
        }
        func events(_ type: String) -> [(WebhookReceiver.Delivery, EventData)] {
            receiver.received.compactMap { d in
                guard let e = try? JSONDecoder().decode(WebhookEventBody<EventData>.self, from: d.body), e.type == type
                else { return nil }
                return (d, e.data)
            }
        }
        let database = try Self.stack.adminDatabaseURL()
        func expire(_ id: String) async throws {
            _ = try await offThePool {
                try PGConnection(url: database).query(
                    "UPDATE coupons.redemptions SET reservation_expires_at = now() WHERE id = $1",
                    [UUID(uuidString: id)!])
            }
        }

        let first = try await reserve()
        let exhausted = try await Self.stack.eventually(15) {
            events("coupon.exhausted").contains { $0.1.coupon?.code == code }
        }
        XCTAssertTrue(exhausted, "coupon.exhausted when the cap's last use is taken")
        let e = try XCTUnwrap(events("coupon.exhausted").first { $0.1.coupon?.code == code }?.1)
        XCTAssertEqual(e.maxRedemptions, 1)
        XCTAssertEqual(e.redemptionCount, 1)
        try await expire(first)
        let released = try await Self.stack.eventually(15) {
            events("redemption.released").contains { $0.1.redemptionId == first }
        }
        XCTAssertTrue(released, "redemption.released when the reservation expires")
        let r = try XCTUnwrap(events("redemption.released").first { $0.1.redemptionId == first }?.1)
        XCTAssertEqual(r.status, "released")
        XCTAssertEqual(r.coupon?.code, code)
        XCTAssertEqual(r.failureReason, "purchase not confirmed in time")

        // The use is back: a second reservation fills the same cap (no new event), then expires.
        let second = try await reserve()
        try await expire(second)
        let secondReleased = try await Self.stack.eventually(15) {
            events("redemption.released").contains { $0.1.redemptionId == second }
        }
        XCTAssertTrue(secondReleased)
        XCTAssertEqual(
            events("coupon.exhausted").filter { $0.1.coupon?.code == code }.count, 1, "once per coupon and cap")
        XCTAssertEqual(events("redemption.released").filter { $0.1.redemptionId == first }.count, 1, "once per release")
        XCTAssertEqual(events("redemption.released").filter { $0.1.redemptionId == second }.count, 1)
    }
}
