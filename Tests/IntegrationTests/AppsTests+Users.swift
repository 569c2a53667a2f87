import Core
import Foundation
import TestSupport
import XCTest

/// End users in several apps, on AppsTests' stack: an account is shared by every app, and its
/// app names the app with `Redeem-App` on every user route. A code is looked up in the named
/// app only, entitlements and redemptions are listed per app, a redemption's events go to its
/// coupon's app's endpoints only, and a customer is shown with the caller's app's records.
extension AppsTests {
    /// A free month of `entitlement` for the web, made by `token` in its app.
    func freeMonth(
        _ code: String, entitlement: String?, token: String, newCustomersOnly: Bool = false
    ) async throws {
        var body: [String: Any] = [
            "code": code, "kind": "freePeriod", "duration": ["unit": "month", "count": 1], "platforms": ["web"],
            "maxRedemptions": 10, "newCustomersOnly": newCustomersOnly
        ]
        if let entitlement { body["entitlementId"] = entitlement }
        let r = try await send("POST", "/v1/coupons", body, token: token)
        XCTAssertEqual(r.status, 201, r.text)
    }

    /// Redeems `code` on the web in `app` (the default one when nil): the answer.
    func redeem(_ code: String, token: String, app: String?) async throws -> HTTPClient.Response {
        try await send("POST", "/v1/redemptions", ["code": code, "platform": "web"], token: token, app: app)
    }

    /// Redeems `code` in `app` and waits (long poll) until the redemption completes: its id.
    func redeemed(_ code: String, token: String, app: String?) async throws -> String {
        let r = try await redeem(code, token: token, app: app)
        XCTAssertEqual(r.status, 201, r.text)
        let id = try r.decode(RedemptionBody.self).redemptionId
        let done = try await send("GET", "/v1/redemptions/\(id)?wait=20", token: token, app: app)
        XCTAssertEqual(try done.decode(RedemptionBody.self).status, "completed", done.text)
        return id
    }

    func remaining(_ code: String, token: String) async throws -> Int? {
        try await send("GET", "/v1/coupons/\(code)", token: token).decode(CouponBody.self).remaining
    }

    func testTheSameCodeRedeemsInTheAppTheUsersRequestNames() async throws {
        let b = try await makeApp("Users B")
        let adminB = try await key(in: b.id, by: admin)
        let tag = UUID().uuidString.prefix(8).uppercased()
        let shared = "SAME-\(tag)", onlyB = "ONLY-B-\(tag)"
        try await freeMonth(shared, entitlement: nil, token: admin)
        try await freeMonth(shared, entitlement: nil, token: adminB.key)
        try await freeMonth(onlyB, entitlement: nil, token: adminB.key)
        let user = try Self.minter.user()

        // Validate looks the code up in the named app only.
        let valid = try await send(
            "POST", "/v1/coupons/validate", ["code": onlyB, "platform": "web"], token: user.token, app: b.id)
        XCTAssertEqual(valid.status, 200, valid.text)
        XCTAssertEqual(try valid.json()["valid"] as? Bool, true, valid.text)
        let elsewhere = try await send(
            "POST", "/v1/coupons/validate", ["code": onlyB, "platform": "web"], token: user.token)
        XCTAssertEqual(try elsewhere.json()["reason"] as? String, "notFound", elsewhere.text)
        let refused = try await redeem(onlyB, token: user.token, app: nil)
        XCTAssertEqual(refused.errorCode, "notFound", refused.text)

        // App B's SHARED is not the default app's: a use of each, one per account and coupon.
        let inB = try await redeem(shared, token: user.token, app: b.id)
        XCTAssertEqual(inB.status, 201, inB.text)
        let idB = try inB.decode(RedemptionBody.self).redemptionId
        let again = try await redeem(shared, token: user.token, app: b.id)
        XCTAssertEqual(again.status, 200, again.text)
        XCTAssertEqual(try again.decode(RedemptionBody.self).redemptionId, idB, "one use per account and coupon")
        let remainingB = try await remaining(shared, token: adminB.key)
        var remainingDefault = try await remaining(shared, token: admin)
        XCTAssertEqual(remainingB, 9)
        XCTAssertEqual(remainingDefault, 10, "the default app's coupon of the same code kept its uses")
        let inDefault = try await redeem(shared, token: user.token, app: nil)
        XCTAssertEqual(inDefault.status, 201, inDefault.text)
        let idDefault = try inDefault.decode(RedemptionBody.self).redemptionId
        XCTAssertNotEqual(idDefault, idB)
        remainingDefault = try await remaining(shared, token: admin)
        XCTAssertEqual(remainingDefault, 9)

        // The user's redemptions, and the operators', are those of one app.
        let mineB = try await send("GET", "/v1/me/redemptions", token: user.token, app: b.id)
        XCTAssertEqual(try mineB.decode(ListBody<RedemptionBody>.self).data.map(\.redemptionId), [idB])
        let mineDefault = try await send("GET", "/v1/me/redemptions", token: user.token)
        XCTAssertEqual(try mineDefault.decode(ListBody<RedemptionBody>.self).data.map(\.redemptionId), [idDefault])
        let readByB = try await send("GET", "/v1/redemptions/\(idB)", token: adminB.key)
        XCTAssertEqual(readByB.status, 200, readByB.text)
        let hidden = try await send("GET", "/v1/redemptions/\(idB)", token: admin)
        XCTAssertEqual(hidden.status, 404, hidden.text)

        // An app id that names no app is 404, a header that is no id 422, on every user route.
        for path in ["/v1/me", "/v1/me/entitlements", "/v1/me/redemptions"] {
            let unknown = try await send("GET", path, token: user.token, app: UUID().uuidString)
            XCTAssertEqual(unknown.status, 404, "\(path): \(unknown.text)")
            let malformed = try await send("GET", path, token: user.token, app: "vulture")
            XCTAssertEqual(malformed.status, 422, "\(path): \(malformed.text)")
            XCTAssertEqual(malformed.errorCode, "invalid", path)
        }
        let unknown = try await redeem(shared, token: user.token, app: UUID().uuidString)
        XCTAssertEqual(unknown.status, 404, unknown.text)

        // A unique code is found in its coupon's app only.
        let gift = "GIFT-B-\(tag)"
        try await freeMonth(gift, entitlement: nil, token: adminB.key)
        let made = try await send("POST", "/v1/coupons/\(gift)/codes", ["count": 1], token: adminB.key)
        XCTAssertEqual(made.status, 201, made.text)
        let csv = try await send("GET", "/v1/coupons/\(gift)/codes.csv", token: adminB.key)
        XCTAssertEqual(csv.status, 200, csv.text)
        let uniqueCode = try XCTUnwrap(csv.text.split(separator: "\n").dropFirst().first.map(String.init))
        let notHere = try await redeem(uniqueCode, token: user.token, app: nil)
        XCTAssertEqual(notHere.errorCode, "notFound", notHere.text)
        let redeemedInB = try await redeem(uniqueCode, token: user.token, app: b.id)
        XCTAssertEqual(redeemedInB.status, 201, redeemedInB.text)
    }

    func testACustomerOfOneAppIsStillANewCustomerOfAnother() async throws {
        let b = try await makeApp("New customers B")
        let adminB = try await key(in: b.id, by: admin)
        let tag = UUID().uuidString.prefix(8).uppercased()
        let first = "FIRST-\(tag)", newHere = "NEW-D-\(tag)", newInB = "NEW-B-\(tag)"
        try await freeMonth(first, entitlement: "pro", token: admin)
        try await freeMonth(newHere, entitlement: "pro", token: admin, newCustomersOnly: true)
        try await freeMonth(newInB, entitlement: "pro", token: adminB.key, newCustomersOnly: true)
        let user = try Self.minter.user()
        func validate(_ code: String, app: String?) async throws -> [String: Any] {
            let r = try await send(
                "POST", "/v1/coupons/validate", ["code": code, "platform": "web"], token: user.token, app: app)
            return try r.json()
        }
        let before = try await validate(newHere, app: nil)
        XCTAssertEqual(before["valid"] as? Bool, true, "a new customer of the default app until it redeems there")

        // A completed redemption in the default app: no longer its new customer, still app B's.
        _ = try await redeemed(first, token: user.token, app: nil)
        let here = try await validate(newHere, app: nil)
        XCTAssertEqual(here["reason"] as? String, "notEligible", "\(here)")
        let refused = try await redeem(newHere, token: user.token, app: nil)
        XCTAssertEqual(refused.errorCode, "notEligible", refused.text)
        let inB = try await validate(newInB, app: b.id)
        XCTAssertEqual(inB["valid"] as? Bool, true, "\(inB)")
        _ = try await redeemed(newInB, token: user.token, app: b.id)
    }

    func testAnAppsUserAndOperatorsSeeOnlyThatAppsEntitlementsAndRedemptions() async throws {
        let b = try await makeApp("Entitlements B")
        let adminB = try await key(in: b.id, by: admin)
        let tag = UUID().uuidString.prefix(8).uppercased()
        let email = "app-user-\(tag.lowercased())@example.com"
        let signedUp = try await client.json(
            "POST", "/v1/accounts", ["email": email, "password": "a long app user passphrase"])
        XCTAssertEqual(signedUp.status, 201, signedUp.text)
        let account = try signedUp.decode(AccountSessionBody.self)
        let token = account.session.accessToken
        let appUserId = try XCTUnwrap(account.account.appUserId)
        try await freeMonth("ENT-B-\(tag)", entitlement: "pro", token: adminB.key)
        try await freeMonth("ENT-D-\(tag)", entitlement: "pro", token: admin)

        func entitlements(_ app: String?) async throws -> [EntitlementBody] {
            try await send("GET", "/v1/me/entitlements", token: token, app: app).decode(EntitlementsBody.self).data
        }
        let idB = try await redeemed("ENT-B-\(tag)", token: token, app: b.id)
        let grantedB = try await entitlements(b.id)
        XCTAssertEqual(grantedB.map(\.entitlementId), ["pro"])
        XCTAssertEqual(grantedB.first?.source, "local")
        let noneInDefault = try await entitlements(nil)
        XCTAssertTrue(noneInDefault.isEmpty, "app B's grant is no entitlement in the default app")

        // The default app's grant of the same entitlement starts now: periods run per app.
        let idDefault = try await redeemed("ENT-D-\(tag)", token: token, app: nil)
        let inDefault = try await entitlements(nil)
        let inB = try await entitlements(b.id)
        XCTAssertEqual(inDefault.map(\.entitlementId), ["pro"])
        XCTAssertEqual(inB.map(\.expiresAt), grantedB.map(\.expiresAt), "app B's entitlement is as it was")
        let endB = try XCTUnwrap(grantedB.first?.expiresAt.flatMap(Timestamp.parse))
        let endDefault = try XCTUnwrap(inDefault.first?.expiresAt.flatMap(Timestamp.parse))
        XCTAssertLessThan(abs(endDefault.timeIntervalSince(endB)), 86_400, "not stacked after app B's month")

        let me = try await send("GET", "/v1/me", token: token, app: b.id)
        XCTAssertEqual(me.status, 200, me.text)
        XCTAssertEqual(try me.json()["appUserId"] as? String, appUserId, "one account in every app")

        // A customer is shown to each app's operators with that app's records.
        struct Customer: Decodable {
            let appUserId: String
            let redemptions: ListBody<RedemptionBody>
            let entitlements: EntitlementsBody
        }
        let seenByB = try await send("GET", "/v1/customers/\(appUserId)", token: adminB.key).decode(Customer.self)
        XCTAssertEqual(seenByB.redemptions.data.map(\.redemptionId), [idB])
        XCTAssertEqual(seenByB.entitlements.data.map(\.expiresAt), grantedB.map(\.expiresAt))
        let seenByDefault = try await send("GET", "/v1/customers/\(appUserId)", token: admin).decode(Customer.self)
        XCTAssertEqual(seenByDefault.redemptions.data.map(\.redemptionId), [idDefault])
        XCTAssertEqual(seenByDefault.entitlements.data.map(\.expiresAt), inDefault.map(\.expiresAt))
        let found = try await send("GET", "/v1/customers?email=\(email)", token: adminB.key)
        XCTAssertEqual(
            try found.decode(ListBody<Customer>.self).data.map { $0.redemptions.data.map(\.redemptionId) }, [[idB]])
    }

    func testARedemptionsEventsGoToItsCouponsAppsEndpointsOnly() async throws {
        let b = try await makeApp("Events B")
        let adminB = try await key(in: b.id, by: admin)
        var receivers: [String: WebhookReceiver] = [:]
        for (name, token) in [("default", admin), ("b", adminB.key)] {
            let receiver = try WebhookReceiver()
            addTeardownBlock { await receiver.stop() }
            let r = try await send(
                "POST", "/v1/webhooks", ["url": receiver.url.absoluteString, "events": ["coupon.redeemed"]],
                token: token)
            XCTAssertEqual(r.status, 201, r.text)
            let id = try XCTUnwrap(try r.json()["id"] as? String)
            let client = self.client
            addTeardownBlock {
                _ = try await client.send("DELETE", "/v1/webhooks/\(id)", headers: ["Authorization": "Bearer \(token)"])
            }
            receivers[name] = receiver
        }
        let code = "HOOK-" + UUID().uuidString.prefix(8).uppercased()
        try await freeMonth(code, entitlement: "pro", token: admin)
        try await freeMonth(code, entitlement: "pro", token: adminB.key)
        let user = try Self.minter.user()
        func naming(_ receiver: WebhookReceiver?, _ id: String) -> Int {
            (receiver?.received ?? []).filter {
                let body = String(decoding: $0.body, as: UTF8.self)
                return body.contains(id) && body.contains("coupon.redeemed")
            }.count
        }

        let idB = try await redeemed(code, token: user.token, app: b.id)
        let reachedB = try await Self.stack.eventually(15) { naming(receivers["b"], idB) == 1 }
        XCTAssertTrue(reachedB, "app B's endpoint gets its redemption's coupon.redeemed")
        // The default app's own event, sent after app B's, arrives at its endpoint alone.
        let idDefault = try await redeemed(code, token: user.token, app: nil)
        let reachedDefault = try await Self.stack.eventually(15) { naming(receivers["default"], idDefault) == 1 }
        XCTAssertTrue(reachedDefault, "the default app's endpoint gets its own redemption's event")
        XCTAssertEqual(naming(receivers["default"], idB), 0, "app B's event never reaches the default app")
        XCTAssertEqual(naming(receivers["b"], idDefault), 0, "the default app's event never reaches app B")
    }
}
