import Core
import Foundation
import TestSupport
import XCTest

/// An app's coupons make their App Store offers with the app's own App Store settings
/// (docs/apps.md): the fake App Store Connect takes only app B's key, and the default app has none.
extension AppsTests {
    func testAnAppsCouponMakesItsAppStoreOfferWithTheAppsOwnKey() async throws {
        let b = try await makeApp("Offers B")
        let adminB = try await key(in: b.id, by: admin)
        let c = try await makeApp("Offers C")
        let adminC = try await key(in: c.id, by: admin)
        let subscription = "64480\(Int.random(in: 10_000...99_999))"
        Self.appStoreConnect.addSubscription(
            subscription,
            [.init(territory: "USA", currency: "USD", current: "9.99", points: ["2.99", "4.99", "9.99"])])
        let apple = try XCTUnwrap(Self.appleB)
        let set = try await send(
            "PUT", "/v1/apps/\(b.id)/stores/appstore",
            [
                "issuerId": apple.issuerId, "keyId": apple.keyId, "appAppleId": "6450000002",
                "privateKey": try String(contentsOf: apple.privateKeyFile, encoding: .utf8)
            ], token: adminB.key)
        XCTAssertEqual(set.status, 200, set.text)
        let product = "pro.offers." + UUID().uuidString.prefix(6).lowercased()
        for token in [adminB.key, adminC.key] {
            let plan = try await send(
                "POST", "/v1/plans",
                ["productId": product, "name": "Pro", "appStore": ["subscriptionId": subscription]],
                token: token)
            XCTAssertEqual(plan.status, 201, plan.text)
        }
        func discount(_ code: String, token: String) async throws -> HTTPClient.Response {
            try await send(
                "POST", "/v1/coupons",
                [
                    "code": code, "kind": "percentOff", "percentOff": 50, "duration": ["unit": "month", "count": 1],
                    "periodCount": 3, "productIds": [product], "platforms": ["ios"], "maxRedemptions": 100,
                    "expiresAt": Timestamp.iso8601(Date().addingTimeInterval(30 * 86_400))
                ], token: token)
        }

        // B's coupon: the offer and its code are made at App Store Connect, which took B's key
        // (its key id and issuer), and become ready.
        let code = "APPB-" + UUID().uuidString.prefix(6).uppercased()
        let made = try await discount(code, token: adminB.key)
        XCTAssertEqual(made.status, 201, made.text)
        func state() async throws -> String? {
            try await send("GET", "/v1/coupons/\(code)", token: adminB.key).decode(CouponBody.self).storeOffers?.first?
                .state
        }
        let ready = try await Self.stack.eventually(30) { try await state() == "ready" }
        let last = try await state()
        XCTAssertTrue(ready, "B's offer became ready, not \(last ?? "none")\n\(Self.stack.logs())")
        let offers = Self.appStoreConnect.offers.filter { $0.subscriptionId == subscription }
        XCTAssertEqual(offers.count, 1, "one offer made with B's key")
        XCTAssertEqual(Self.appStoreConnect.customCodes.filter { $0.customCode == code }.count, 1)
        XCTAssertTrue(
            Self.appStoreConnect.received.allSatisfy { $0.status != 401 },
            "every call was signed with B's key id and issuer")

        // B's iOS clients are handed the offer-code page of B's own Apple id, not the
        // environment's REDEEM_APPLE_APP_ID (the default app's), by validate and by redeem.
        let page = "https://apps.apple.com/redeem?ctx=offercodes&id=6450000002&code=\(code)"
        let user = try Self.minter.user()
        let valid = try await send(
            "POST", "/v1/coupons/validate", ["code": code, "platform": "ios"], token: user.token, app: b.id)
        XCTAssertEqual(valid.status, 200, valid.text)
        let handoff = try XCTUnwrap(try valid.json()["appStore"] as? [String: Any], valid.text)
        XCTAssertEqual(handoff["redemptionUrl"] as? String, page, valid.text)
        XCTAssertEqual(handoff["redemptionUrls"] as? [String: String], [product: page], valid.text)
        let redeemed = try await send(
            "POST", "/v1/redemptions", ["code": code, "platform": "ios", "productId": product], token: user.token,
            app: b.id)
        XCTAssertEqual(redeemed.status, 201, redeemed.text)
        XCTAssertEqual(try redeemed.decode(RedemptionBody.self).appStore?.redemptionUrl, page, redeemed.text)
        XCTAssertFalse(redeemed.text.contains(Self.defaultAppleAppId), "not the environment's page")

        // C has no App Store settings: its coupon is refused, naming the store, and nothing is made.
        let refused = try await discount("APPC-" + UUID().uuidString.prefix(6).uppercased(), token: adminC.key)
        XCTAssertEqual(refused.status, 422, refused.text)
        XCTAssertEqual([refused.errorCode, refused.errorField], ["invalid", "platforms"], refused.text)
        XCTAssertTrue(refused.text.contains("App Store settings"), refused.text)
        XCTAssertEqual(
            Self.appStoreConnect.offers.filter { $0.subscriptionId == subscription }.count, 1, "C made no offer")
    }
}
