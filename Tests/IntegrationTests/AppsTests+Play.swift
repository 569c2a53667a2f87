import Core
import Foundation
import TestSupport
import XCTest

/// An app's coupons make their Google Play offers, and its Android purchases are read, with the
/// app's own Google Play settings (docs/apps.md): the fake token endpoint takes only app B's
/// service account, the fake Play Developer API only B's package, and the default app has none.
extension AppsTests {
    /// App B with its own Google Play settings (`package`, B's by default), a plan on a Play base
    /// plan in B, and its admin key.
    func playApp(
        _ name: String, package: String = AppsTests.playPackageB
    ) async throws -> (app: App, admin: String, plan: String) {
        let b = try await makeApp(name)
        let adminB = try await key(in: b.id, by: admin)
        let set = try await send(
            "PUT", "/v1/apps/\(b.id)/stores/googleplay",
            [
                "serviceAccount": try String(contentsOf: Self.playB.keyFile, encoding: .utf8),
                "packageName": package
            ], token: adminB.key)
        XCTAssertEqual(set.status, 200, set.text)
        let plan = "pro.play." + UUID().uuidString.prefix(6).lowercased()
        let basePlan = "monthly-" + UUID().uuidString.prefix(4).lowercased()
        Self.play.addBasePlan(productId: "vpro_sub", basePlanId: basePlan, [.init("US", "USD", "9.99")])
        let made = try await send(
            "POST", "/v1/plans",
            ["productId": plan, "name": "Pro", "playStore": ["productId": "vpro_sub", "basePlanIds": [basePlan]]],
            token: adminB.key)
        XCTAssertEqual(made.status, 201, made.text)
        return (b, adminB.key, plan)
    }

    /// A 30 % off coupon on `plan` for Android, made by `token` in its app.
    func playDiscount(_ code: String, plan: String, token: String, cap: Int = 100) async throws -> HTTPClient.Response {
        try await send(
            "POST", "/v1/coupons",
            [
                "code": code, "kind": "percentOff", "percentOff": 30, "duration": ["unit": "month", "count": 1],
                "periodCount": 3, "productIds": [plan], "platforms": ["android"], "maxRedemptions": cap,
                "expiresAt": Timestamp.iso8601(Date().addingTimeInterval(30 * 86_400))
            ], token: token)
    }

    func testAnAppsCouponMakesItsGooglePlayOfferAndReadsItsPurchasesWithItsOwnSettings() async throws {
        let b = try await playApp("Play B")
        let exchangesBefore = Self.googleOAuth.exchanges

        // B's coupon: its offer is made at Google Play in B's package, with B's service account
        // (the token endpoint takes no other), and becomes ready.
        let code = "PLAYB" + UUID().uuidString.prefix(6).uppercased().replacingOccurrences(of: "-", with: "")
        let made = try await playDiscount(code, plan: b.plan, token: b.admin, cap: 1)
        XCTAssertEqual(made.status, 201, made.text)
        func offer() async throws -> StoreOfferBody? {
            try await send("GET", "/v1/coupons/\(code)", token: b.admin).decode(CouponBody.self).storeOffers?.first
        }
        let ready = try await Self.stack.eventually(30) { try await offer()?.state == "ready" }
        let last = try await offer()
        XCTAssertTrue(ready, "B's offer became ready, not \(last?.state ?? "none")\n\(Self.stack.logs())")
        XCTAssertEqual(last?.store, "playStore")
        let offerId = try XCTUnwrap(last?.offerId)
        let atGoogle = try XCTUnwrap(Self.play.offers.first { $0.offerId == offerId })
        XCTAssertEqual(atGoogle.state, "ACTIVE")
        XCTAssertEqual(atGoogle.document["packageName"] as? String, Self.playPackageB)
        XCTAssertGreaterThan(Self.googleOAuth.exchanges, exchangesBefore, "B's service account got a token")
        XCTAssertEqual(Self.googleOAuth.refusals, 0, "no assertion signed by another account")
        XCTAssertTrue(
            Self.play.received.allSatisfy {
                ![401, 403].contains($0.status) && $0.path.contains("/applications/\(Self.playPackageB)/")
            },
            "every call named B's package, with B's token: \(Self.play.received.map { "\($0.status) \($0.path)" })")

        // A user of B reserves on Android.
        let u = try Self.minter.user()
        let r = try await send(
            "POST", "/v1/redemptions", ["code": code, "platform": "android"], token: u.token, app: b.app.id)
        XCTAssertEqual(r.status, 201, r.text)
        let reserved = try r.decode(RedemptionBody.self)
        let obfuscated = try XCTUnwrap(reserved.playStore?.obfuscatedAccountId, r.text)
        XCTAssertEqual(reserved.playStore?.offerId, offerId)
        func post(_ token: String, app: String?) async throws -> HTTPClient.Response {
            try await send(
                "POST", "/v1/redemptions/\(reserved.redemptionId)/purchase", ["purchaseToken": token], token: u.token,
                app: app)
        }
        func status() async throws -> String {
            try await send("GET", "/v1/redemptions/\(reserved.redemptionId)", token: u.token, app: b.app.id)
                .decode(RedemptionBody.self).status
        }

        // A purchase of app A's package, even of B's offer, is not B's: Google knows its token
        // only under A's package, and B's settings read B's.
        let elsewhere = "gp-a-" + UUID().uuidString.lowercased()
        var other = FakePlayDeveloperAPI.Purchase(
            productId: "vpro_sub", basePlanId: atGoogle.basePlanId, offerId: offerId, obfuscatedAccountId: obfuscated)
        other.package = "com.example.appa"
        Self.play.addPurchase(token: elsewhere, other)
        let refused = try await post(elsewhere, app: b.app.id)
        XCTAssertEqual(refused.status, 404, refused.text)
        let state1 = try await status()
        XCTAssertEqual(state1, "reserved")

        // B's own purchase, posted in the default app (whose Google Play is not connected here), is
        // not read with B's settings.
        let token = "gp-b-" + UUID().uuidString.lowercased()
        Self.play.addPurchase(
            token: token,
            .init(
                productId: "vpro_sub", basePlanId: atGoogle.basePlanId, offerId: offerId,
                obfuscatedAccountId: obfuscated))
        let unnamed = try await post(token, app: nil)
        XCTAssertNotEqual(unnamed.status, 200, unnamed.text)
        let state2 = try await status()
        XCTAssertEqual(state2, "reserved")

        // Read with another app's settings (C, set to the same package and account), it completes
        // none of B's coupons: a purchase completes only the coupons of the app that read it.
        let c = try await makeApp("Play C")
        let adminC = try await key(in: c.id, by: admin)
        let setC = try await send(
            "PUT", "/v1/apps/\(c.id)/stores/googleplay",
            [
                "serviceAccount": try String(contentsOf: Self.playB.keyFile, encoding: .utf8),
                "packageName": Self.playPackageB
            ], token: adminC.key)
        XCTAssertEqual(setC.status, 200, setC.text)
        let crossed = try await post(token, app: c.id)
        XCTAssertEqual(crossed.status, 422, crossed.text)
        XCTAssertEqual([crossed.errorCode, crossed.errorField], ["invalid", "purchaseToken"], crossed.text)
        let state3 = try await status()
        XCTAssertEqual(state3, "reserved")

        // Posted in B: read with B's settings, acknowledged in B's package, and completed.
        let posted = try await post(token, app: b.app.id)
        XCTAssertEqual(posted.status, 200, posted.text)
        XCTAssertEqual(try posted.decode(RedemptionBody.self).status, "completed", posted.text)
        XCTAssertEqual(Self.play.purchase(token)?.acknowledged, true)

        // The cap is reached: the offer is switched off with the settings it was made with.
        let off = try await Self.stack.eventually(15) {
            Self.play.offers.first { $0.offerId == offerId }?.state == "INACTIVE"
        }
        XCTAssertTrue(off, Self.stack.logs())
        XCTAssertEqual(Self.googleOAuth.refusals, 0)
    }

    func testAnAppWithoutGooglePlaySettingsOfTheModeCantMakePlayOffers() async throws {
        let b = try await playApp("Play modes B")
        // B has live Google Play settings only: its test key's Android discount is refused,
        // naming the Google Play settings, and so is the coupon of an app with none.
        let testKey = try await key(in: b.app.id, by: admin, mode: "test")
        let testPlan = try await send(
            "POST", "/v1/plans",
            ["productId": b.plan, "name": "Pro", "playStore": ["productId": "vpro_sub", "basePlanIds": ["monthly"]]],
            token: testKey.key)
        XCTAssertEqual(testPlan.status, 201, testPlan.text)
        let c = try await makeApp("Play modes C")
        let adminC = try await key(in: c.id, by: admin)
        let planC = try await send(
            "POST", "/v1/plans",
            ["productId": b.plan, "name": "Pro", "playStore": ["productId": "vpro_sub", "basePlanIds": ["monthly"]]],
            token: adminC.key)
        XCTAssertEqual(planC.status, 201, planC.text)
        let offers = Self.play.offers.count
        for token in [testKey.key, adminC.key] {
            let refused = try await playDiscount(
                "PLAYX" + UUID().uuidString.prefix(6).uppercased().replacingOccurrences(of: "-", with: ""),
                plan: b.plan,
                token: token)
            XCTAssertEqual(refused.status, 422, refused.text)
            XCTAssertEqual([refused.errorCode, refused.errorField], ["invalid", "platforms"], refused.text)
            XCTAssertTrue(refused.text.contains("Google Play settings"), refused.text)
        }
        XCTAssertEqual(Self.play.offers.count, offers, "nothing made")
    }

    func testAnAppsPlayOfferWaitsWhileItsSettingsAreRemoved() async throws {
        let b = try await playApp("Play waits B")
        let code = "PLAYW" + UUID().uuidString.prefix(6).uppercased().replacingOccurrences(of: "-", with: "")
        let made = try await playDiscount(code, plan: b.plan, token: b.admin)
        XCTAssertEqual(made.status, 201, made.text)
        func offer() async throws -> StoreOfferBody? {
            try await send("GET", "/v1/coupons/\(code)", token: b.admin).decode(CouponBody.self).storeOffers?.first
        }
        let ready = try await Self.stack.eventually(30) { try await offer()?.state == "ready" }
        XCTAssertTrue(ready, Self.stack.logs())
        let madeOffer = try await offer()
        let offerId = try XCTUnwrap(madeOffer?.offerId)

        // Settings removed: the deactivation's switch waits; set again, it is made.
        let cleared = try await send("DELETE", "/v1/apps/\(b.app.id)/stores/googleplay", token: b.admin)
        XCTAssertLessThan(cleared.status, 300, cleared.text)
        let deactivated = try await send("DELETE", "/v1/coupons/\(code)", token: b.admin)
        XCTAssertLessThan(deactivated.status, 300, deactivated.text)
        try await Task.sleep(for: .seconds(2))
        XCTAssertEqual(Self.play.offers.first { $0.offerId == offerId }?.state, "ACTIVE", "waiting for B's settings")
        let set = try await send(
            "PUT", "/v1/apps/\(b.app.id)/stores/googleplay",
            [
                "serviceAccount": try String(contentsOf: Self.playB.keyFile, encoding: .utf8),
                "packageName": Self.playPackageB
            ], token: b.admin)
        XCTAssertEqual(set.status, 200, set.text)
        let off = try await Self.stack.eventually(30) {
            Self.play.offers.first { $0.offerId == offerId }?.state == "INACTIVE"
        }
        XCTAssertTrue(off, Self.stack.logs())
    }

    func testAnAppsPushedPurchaseCompletesItsRedemption() async throws {
        // An app with a package of its own: a push names only its package.
        let package =
            "com.example.push" + UUID().uuidString.prefix(6).lowercased().replacingOccurrences(of: "-", with: "")
        Self.play.addPackage(package)
        let b = try await playApp("Play push B", package: package)
        let code = "PLAYP" + UUID().uuidString.prefix(6).uppercased().replacingOccurrences(of: "-", with: "")
        let made = try await playDiscount(code, plan: b.plan, token: b.admin)
        XCTAssertEqual(made.status, 201, made.text)
        func offer() async throws -> StoreOfferBody? {
            try await send("GET", "/v1/coupons/\(code)", token: b.admin).decode(CouponBody.self).storeOffers?.first
        }
        let ready = try await Self.stack.eventually(30) { try await offer()?.state == "ready" }
        XCTAssertTrue(ready, Self.stack.logs())
        let madeOffer = try await offer()
        let offerId = try XCTUnwrap(madeOffer?.offerId)
        let basePlan = try XCTUnwrap(madeOffer?.basePlanId)

        let u = try Self.minter.user()
        let r = try await send(
            "POST", "/v1/redemptions", ["code": code, "platform": "android"], token: u.token, app: b.app.id)
        XCTAssertEqual(r.status, 201, r.text)
        let reserved = try r.decode(RedemptionBody.self)
        let token = "gp-push-" + UUID().uuidString.lowercased()
        var bought = FakePlayDeveloperAPI.Purchase(
            productId: "vpro_sub", basePlanId: basePlan, offerId: offerId,
            obfuscatedAccountId: reserved.playStore?.obfuscatedAccountId)
        bought.package = package
        Self.play.addPurchase(token: token, bought)
        func push(_ package: String) async throws -> HTTPClient.Response {
            let body = try JSONSerialization.data(
                withJSONObject: GooglePushSender.body(packageName: package, purchaseToken: token))
            return try await client.send(
                "POST", "/v1/stores/google/notifications", body: body,
                headers: ["Content-Type": "application/json", "Authorization": "Bearer \(try Self.pusher.token())"])
        }

        // A package no app's settings name is acknowledged and ignored.
        let unknown = try await push("com.example.nobody")
        XCTAssertEqual(unknown.status, 200, unknown.text)
        XCTAssertEqual(try unknown.json()["recorded"] as? Bool, false, unknown.text)
        XCTAssertEqual(Self.play.purchase(token)?.acknowledged, false)

        // B's package: read with B's settings, and B's reservation completes.
        let pushed = try await push(package)
        XCTAssertEqual(pushed.status, 200, pushed.text)
        XCTAssertEqual(try pushed.json()["recorded"] as? Bool, true, pushed.text)
        XCTAssertEqual(
            (try pushed.json()["redemptionId"] as? String)?.lowercased(), reserved.redemptionId.lowercased(),
            pushed.text)
        XCTAssertEqual(Self.play.purchase(token)?.acknowledged, true)
        let done = try await send("GET", "/v1/redemptions/\(reserved.redemptionId)", token: u.token, app: b.app.id)
        XCTAssertEqual(try done.decode(RedemptionBody.self).status, "completed", done.text)
    }

    func testAnAppsPlaySubscriberIsSentToTheAppsOwnPackageToManageIt() async throws {
        let b = try await playApp("Play manage B")
        let rcKey = "sk_rc_manage_" + UUID().uuidString.prefix(8).lowercased()
        let set = try await send("PUT", "/v1/apps/\(b.app.id)/stores/revenuecat", ["secretKey": rcKey], token: b.admin)
        XCTAssertEqual(set.status, 200, set.text)
        let signed = try await client.json(
            "POST", "/v1/accounts",
            ["email": "manage-\(UUID().uuidString.prefix(8))@example.com", "password": "correct horse battery"])
        XCTAssertEqual(signed.status, 201, signed.text)
        let user = try signed.decode(AccountSessionBody.self)
        let appUserId = try XCTUnwrap(user.account.appUserId)
        func managementUrl(_ app: String?) async throws -> String? {
            let me = try await send("GET", "/v1/me", token: user.session.accessToken, app: app)
            XCTAssertEqual(me.status, 200, me.text)
            return try me.json()["managementUrl"] as? String
        }
        // A Google Play subscription in B's RevenueCat project: Google's page of B's own package.
        Self.revenueCat.addStorePurchase(
            appUserId,
            .init(
                productId: "vpro_sub", store: "play_store", entitlementId: "pro",
                expires: Date().addingTimeInterval(30 * 86_400), basePlanId: "monthly"))
        let url = try await managementUrl(b.app.id)
        XCTAssertEqual(
            url, "https://play.google.com/store/account/subscriptions?sku=vpro_sub&package=\(Self.playPackageB)")
        // The default app's view is the environment's (Redeem's own ledger here): no URL.
        let inDefault = try await managementUrl(nil)
        XCTAssertNil(inDefault)

        // B's RevenueCat project says the account holds B's Play product: B's Android discount on
        // it is refused as already owned, and nothing is reserved.
        let code = "PLAYO" + UUID().uuidString.prefix(6).uppercased().replacingOccurrences(of: "-", with: "")
        let made = try await playDiscount(code, plan: b.plan, token: b.admin)
        XCTAssertEqual(made.status, 201, made.text)
        let ready = try await Self.stack.eventually(30) {
            try await self.send("GET", "/v1/coupons/\(code)", token: b.admin).decode(CouponBody.self).storeOffers?
                .first?.state == "ready"
        }
        XCTAssertTrue(ready, Self.stack.logs())
        let owned = try await send(
            "POST", "/v1/redemptions", ["code": code, "platform": "android"], token: user.session.accessToken,
            app: b.app.id)
        XCTAssertEqual(owned.status, 422, owned.text)
        XCTAssertEqual(owned.errorCode, "alreadyOwned", owned.text)
        let coupon = try await send("GET", "/v1/coupons/\(code)", token: b.admin).decode(CouponBody.self)
        XCTAssertEqual(coupon.remaining, 100, "nothing reserved")
    }
}
