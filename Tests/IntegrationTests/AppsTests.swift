import Core
import Foundation
import TestSupport
import XCTest

/// Apps (docs/apps.md): deployment admins make apps; each API key works in one app and sees only
/// its app's keys, coupons, plans, redemptions and audit entries; a member names the app with
/// `Redeem-App` and has a role in each app (`AppsTests+Members.swift`, with MCP in a key's app), and
/// an end user's app names it too (`AppsTests+Users.swift`); a route of the whole deployment (the
/// members' settings) serves the default app's keys only, so another app's key reads nothing there.
final class AppsTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!

    nonisolated(unsafe) static var minter: TokenMinter!

    nonisolated(unsafe) static var revenueCat: FakeRevenueCat!

    /// App Store Connect, taking only the API key of app B's own settings (`appleB`).
    nonisolated(unsafe) static var appStoreConnect: FakeAppStoreConnect!
    nonisolated(unsafe) static var appleB: TestAppleAPIKey!
    /// The environment's `REDEEM_APPLE_APP_ID`: the default app's offer-code page, never another app's.
    static let defaultAppleAppId = "6450000001"

    /// Google Play, taking only the service account and package of app B's own settings (`playB`).
    nonisolated(unsafe) static var playB: TestGoogleServiceAccount!
    nonisolated(unsafe) static var googleOAuth: FakeGoogleOAuth!
    nonisolated(unsafe) static var play: FakePlayDeveloperAPI!
    static let playPackageB = "com.example.appb"
    /// Pub/Sub's pushes of Google Play's notifications; the default app has no package of its own.
    nonisolated(unsafe) static var pusher: GooglePushSender!

    /// Stripe: the default app has no Stripe settings here; apps add their own accounts' keys
    /// (`FakeStripe.addAccount`), and the fake records which key each call carried.
    nonisolated(unsafe) static var stripe: FakeStripe!

    override class func startSuite() throws {
        // Webhook endpoints on loopback: receivers of this suite's own. The default app keeps its
        // grants in Redeem's ledger; an app's own RevenueCat project is the fake's. The default
        // app has no App Store or Google Play settings (only its Apple id): only an app's own reach
        // the fake App Store Connect and the fake Google Play.
        revenueCat = try FakeRevenueCat()
        appleB = try TestAppleAPIKey()
        appStoreConnect = try FakeAppStoreConnect(key: appleB)
        playB = try TestGoogleServiceAccount(email: "app-b@redeem-tests.iam.gserviceaccount.com")
        googleOAuth = try FakeGoogleOAuth(account: playB)
        play = try FakePlayDeveloperAPI(oauth: googleOAuth, packageName: playPackageB)
        pusher = try GooglePushSender()
        stripe = try FakeStripe()
        stack = try Stack(environment: [
            "REDEEM_WEBHOOK_ALLOW_PRIVATE": "1", "REDEEM_REVENUECAT_URL": revenueCat.url.absoluteString,
            "REDEEM_ASC_URL": appStoreConnect.url.absoluteString, "REDEEM_APPLE_OFFER_SETTLE": "1",
            "REDEEM_APPLE_APP_ID": defaultAppleAppId,
            "REDEEM_GOOGLE_TOKEN_URL": googleOAuth.url.absoluteString, "REDEEM_PLAY_API_URL": play.url.absoluteString,
            "REDEEM_PLAY_OFFER_SETTLE": "1", "REDEEM_GOOGLE_JWKS": pusher.jwksFile.path,
            "REDEEM_PLAY_PUSH_AUDIENCE": pusher.audience, "REDEEM_PLAY_PUSH_SERVICE_ACCOUNT": pusher.serviceAccount,
            "REDEEM_STRIPE_API_URL": stripe.url.absoluteString,
        ])
        minter = try stack.minter()
    }
    override class func stopSuite() {
        stack?.stop()
        let done = DispatchSemaphore(value: 0)
        Task {
            await appStoreConnect?.stop()
            await play?.stop()
            await googleOAuth?.stop()
            await stripe?.stop()
            done.signal()
        }
        done.wait()
    }

    var client: HTTPClient { Self.stack.client }
    /// The bootstrap key: a live admin key of the default app, so a deployment admin.
    var admin: String { Self.stack.adminKey }

    struct App: Decodable {
        let id: String
        let name: String
    }

    struct Item: Decodable {
        let id: String?
        let code: String?
        let productId: String?
        let name: String?
        let action: String?
        let objectId: String?
    }

    func send(
        _ method: String, _ path: String, _ body: [String: Any]? = nil, token: String, app: String? = nil
    )
        async throws -> HTTPClient.Response
    {
        var headers = ["Authorization": "Bearer \(token)"]
        if let app { headers["Redeem-App"] = app }
        if let body { return try await client.json(method, path, body, headers: headers) }
        return try await client.send(method, path, headers: headers)
    }

    func list(_ r: HTTPClient.Response, file: StaticString = #filePath, line: UInt = #line) throws -> [Item] {
        XCTAssertEqual(r.status, 200, r.text, file: file, line: line)
        return try r.decode(ListBody<Item>.self).data
    }

    func makeApp(_ name: String) async throws -> App {
        let r = try await send("POST", "/v1/apps", ["name": name], token: admin)
        XCTAssertEqual(r.status, 201, r.text)
        return try r.decode(App.self)
    }

    /// A key made in `app` by `token`, as its admin would.
    func key(
        in app: String?, by token: String, role: String = "admin", mode: String = "live"
    ) async throws -> (key: String, id: String) {
        let r = try await send(
            "POST", "/v1/api-keys", ["name": "\(role) key", "role": role, "mode": mode], token: token, app: app)
        XCTAssertEqual(r.status, 201, r.text)
        let o = try r.decode(APIKeyBody.self)
        return (try XCTUnwrap(o.key), o.id)
    }

    /// Invites `role` in the default app and accepts: the member's access token.
    func member(_ role: String) async throws -> String {
        let email = "apps-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let invited = try await send("POST", "/v1/members", ["email": email, "role": role], token: admin)
        XCTAssertEqual(invited.status, 201, invited.text)
        let token = try XCTUnwrap(try invited.json()["token"] as? String)
        let accepted = try await client.json(
            "POST", "/v1/members/accept", ["token": token, "password": "a long operator passphrase"])
        XCTAssertEqual(accepted.status, 201, accepted.text)
        return try accepted.decode(AccountSessionBody.self).session.accessToken
    }

    func testADeploymentAdminMakesAppsAndListsThemDefaultFirst() async throws {
        let app = try await makeApp("  Vulture Pro  ")
        XCTAssertEqual(app.name, "Vulture Pro", "the name is trimmed")
        let listed = try await send("GET", "/v1/apps?limit=100", token: admin)
        XCTAssertEqual(listed.status, 200, listed.text)
        let apps = try listed.decode(ListBody<App>.self).data
        XCTAssertEqual(apps.first?.id.lowercased(), DefaultApp.id.lowercasedString, "the default app comes first")
        XCTAssertTrue(apps.contains { $0.id == app.id })

        let bad = try await send("POST", "/v1/apps", ["name": ""], token: admin)
        XCTAssertEqual(bad.status, 422, bad.text)
        XCTAssertEqual(bad.errorCode, "invalid")

        // Only an admin of the whole deployment: not a test key, not another app's admin, not support.
        let testAdmin = try await key(in: nil, by: admin, mode: "test")
        let otherAdmin = try await key(in: app.id, by: admin)
        let support = try await key(in: nil, by: admin, role: "support")
        for token in [testAdmin.key, otherAdmin.key] {
            let r = try await send("POST", "/v1/apps", ["name": "Not mine"], token: token)
            XCTAssertEqual(r.status, 403, r.text)
            let r1 = try await send("GET", "/v1/apps", token: token)
            XCTAssertEqual(r1.status, 403, r1.text)
        }
        let r2 = try await send("GET", "/v1/apps", token: support.key)
        XCTAssertEqual(r2.status, 403, r2.text)
    }

    func testAKeySeesAndRevokesOnlyItsOwnAppsKeys() async throws {
        let a = try await makeApp("App A")
        let b = try await makeApp("App B")
        let adminA = try await key(in: a.id, by: admin)
        let adminB = try await key(in: b.id, by: admin)
        // A key makes keys in its own app; a Redeem-App naming another is refused.
        let readerA = try await key(in: nil, by: adminA.key, role: "readonly")
        let refused = try await send(
            "POST", "/v1/api-keys", ["name": "x", "role": "readonly"], token: adminA.key, app: b.id)
        XCTAssertEqual(refused.status, 403, refused.text)
        // A key below the route's role is refused before its Redeem-App is read, whatever it names;
        // a key of the role gets the header's own answer.
        for app in ["vulture", UUID().uuidString, b.id] {
            let r = try await coupon("ROLE-FIRST", token: readerA.key, app: app)
            XCTAssertEqual(r.status, 403, "\(app): \(r.text)")
            XCTAssertEqual(r.errorCode, "forbidden", app)
        }
        let malformed = try await coupon("ROLE-FIRST", token: adminA.key, app: "vulture")
        XCTAssertEqual(malformed.status, 422, malformed.text)
        XCTAssertEqual(malformed.errorCode, "invalid")
        let unknown = try await coupon("ROLE-FIRST", token: adminA.key, app: UUID().uuidString)
        XCTAssertEqual(unknown.status, 403, "another app than the key's, known or not: \(unknown.text)")

        let keysA = try list(try await send("GET", "/v1/api-keys?limit=100", token: adminA.key)).compactMap(\.id)
        XCTAssertEqual(Set(keysA), [adminA.id, readerA.id])
        let keysB = try list(try await send("GET", "/v1/api-keys?limit=100", token: adminB.key)).compactMap(\.id)
        XCTAssertEqual(keysB, [adminB.id])
        let keysDefault = try list(try await send("GET", "/v1/api-keys?limit=100", token: admin)).compactMap(\.id)
        XCTAssertTrue(
            Set(keysDefault).isDisjoint(with: [adminA.id, readerA.id, adminB.id]),
            "the default app lists its own keys only")

        // B cannot revoke A's key, nor can the default app's admin: 404, and the key still works.
        for token in [adminB.key, admin] {
            let r = try await send("DELETE", "/v1/api-keys/\(readerA.id)", token: token)
            XCTAssertEqual(r.status, 404, r.text)
        }
        let r3 = try await send("GET", "/v1/api-keys", token: adminA.key)
        XCTAssertEqual(r3.status, 200, r3.text)
        let r4 = try await send("DELETE", "/v1/api-keys/\(readerA.id)", token: adminA.key)
        XCTAssertEqual(r4.status, 204, r4.text)
    }

    func testAnAppsAuditLogHoldsItsOwnChangesOnly() async throws {
        let a = try await makeApp("Audited")
        let adminA = try await key(in: a.id, by: admin)
        let made = try await key(in: nil, by: adminA.key, role: "support")
        let entries = try list(try await send("GET", "/v1/audit?limit=100", token: adminA.key))
        XCTAssertEqual(Set(entries.compactMap(\.action)), ["app.create", "apiKey.create"])
        XCTAssertTrue(
            entries.contains { $0.action == "apiKey.create" && $0.objectId?.lowercased() == made.id.lowercased() })
        XCTAssertTrue(entries.contains { $0.action == "app.create" && $0.objectId?.lowercased() == a.id.lowercased() })

        let ofDefault = try list(try await send("GET", "/v1/audit?limit=100&action=apiKey.create", token: admin))
        XCTAssertFalse(
            ofDefault.contains { $0.objectId?.lowercased() == made.id.lowercased() },
            "another app's change is not in the default app's log")
    }

    func testAnotherAppsKeyReadsNothingOnARouteNotYetScopedByApp() async throws {
        let a = try await makeApp("Unscoped")
        let adminA = try await key(in: a.id, by: admin)
        let coupon = try await send(
            "POST", "/v1/coupons",
            [
                "code": "APPS-" + UUID().uuidString.prefix(8).uppercased(), "kind": "freePeriod",
                "duration": ["unit": "month", "count": 1],
                "platforms": ["web"], "entitlementIds": ["pro"]
            ], token: admin)
        XCTAssertEqual(coupon.status, 201, coupon.text)
        for path in ["/v1/members/settings"] {
            let r = try await send("GET", path, token: adminA.key)
            XCTAssertEqual(r.status, 403, "\(path): \(r.text)")
            XCTAssertEqual(r.errorCode, "forbidden", path)
        }
    }

    func testAMemberNamesTheAppWithRedeemApp() async throws {
        let a = try await makeApp("Member's")
        let admin = try await member("admin")
        let support = try await member("support")
        // An admin member (the default app's admin: the deployment's) works in any app.
        let made = try await key(in: a.id, by: admin, role: "readonly")
        let keysA = try list(try await send("GET", "/v1/api-keys", token: admin, app: a.id)).compactMap(\.id)
        XCTAssertEqual(keysA, [made.id])
        let r5 = try await send("GET", "/v1/api-keys?limit=100", token: admin)
        XCTAssertFalse(try list(r5).contains { $0.id == made.id })
        // An admin member makes and lists coupons in the app it names.
        let code = "MEMBER-" + UUID().uuidString.prefix(8).uppercased()
        let made2 = try await send(
            "POST", "/v1/coupons", ["code": code, "kind": "freePeriod", "duration": ["unit": "day", "count": 7]],
            token: admin, app: a.id)
        XCTAssertEqual(made2.status, 201, made2.text)
        let r101 = try await send("GET", "/v1/coupons", token: admin, app: a.id)
        XCTAssertEqual(try list(r101).compactMap(\.code), [code])
        // Other members work in the default app only.
        let r6 = try await send("GET", "/v1/coupons", token: support)
        XCTAssertEqual(r6.status, 200, r6.text)
        let r7 = try await send("GET", "/v1/coupons", token: support, app: a.id)
        XCTAssertEqual(r7.status, 403, r7.text)

        let unknown = try await send("GET", "/v1/api-keys", token: admin, app: UUID().uuidString)
        XCTAssertEqual(unknown.status, 404, unknown.text)
        let malformed = try await send("GET", "/v1/api-keys", token: admin, app: "vulture")
        XCTAssertEqual(malformed.status, 422, malformed.text)
        XCTAssertEqual(malformed.errorCode, "invalid")
    }

    func coupon(_ code: String, token: String, app: String? = nil) async throws -> HTTPClient.Response {
        try await send(
            "POST", "/v1/coupons",
            [
                "code": code, "kind": "freePeriod", "duration": ["unit": "day", "count": 7],
                "platforms": ["web"], "maxRedemptions": 10
            ], token: token, app: app)
    }

    func testCouponsAndPlansBelongToTheirAppAndACodeIsUniquePerApp() async throws {
        let a = try await makeApp("Coupons A")
        let adminA = try await key(in: a.id, by: admin)
        let readerA = try await key(in: nil, by: adminA.key, role: "readonly")
        let shared = "SHARED-" + UUID().uuidString.prefix(8).uppercased()
        let onlyA = "ONLY-A-" + UUID().uuidString.prefix(8).uppercased()
        let onlyDefault = "ONLY-D-" + UUID().uuidString.prefix(8).uppercased()
        // The same code in two apps: each app has its own coupon.
        for (code, token) in [(shared, adminA.key), (shared, admin), (onlyA, adminA.key), (onlyDefault, admin)] {
            let r = try await coupon(code, token: token)
            XCTAssertEqual(r.status, 201, r.text)
        }
        let again = try await coupon(shared, token: adminA.key)
        XCTAssertEqual(again.status, 409, again.text)
        XCTAssertEqual(again.errorCode, "codeInUse")

        let codesA = Set(
            try list(try await send("GET", "/v1/coupons?limit=100", token: readerA.key)).compactMap(\.code))
        XCTAssertEqual(codesA, [shared, onlyA])
        let codesDefault = Set(
            try list(try await send("GET", "/v1/coupons?limit=100", token: admin)).compactMap(\.code))
        XCTAssertTrue(codesDefault.contains(onlyDefault) && codesDefault.contains(shared))
        XCTAssertFalse(codesDefault.contains(onlyA), "another app's coupon is not listed")

        // Every route of one coupon answers another app's key with 404, and changes nothing.
        for (method, path) in [
            ("GET", "/v1/coupons/\(onlyDefault)"), ("GET", "/v1/coupons/\(onlyDefault)/redemptions"),
            ("DELETE", "/v1/coupons/\(onlyDefault)")
        ] {
            let r = try await send(method, path, token: adminA.key)
            XCTAssertEqual(r.status, 404, "\(method) \(path): \(r.text)")
        }
        let patched = try await send("PATCH", "/v1/coupons/\(onlyDefault)", ["maxRedemptions": 1], token: adminA.key)
        XCTAssertEqual(patched.status, 404, patched.text)
        let exported = try await send("POST", "/v1/coupons/\(onlyDefault)/redemption-exports", [:], token: adminA.key)
        XCTAssertEqual(exported.status, 404, exported.text)
        let codes = try await send("POST", "/v1/coupons/\(onlyDefault)/codes", ["count": 2], token: adminA.key)
        XCTAssertEqual(codes.status, 404, codes.text)
        let stillThere = try await send("GET", "/v1/coupons/\(onlyDefault)", token: admin)
        XCTAssertEqual(stillThere.status, 200, stillThere.text)
        XCTAssertEqual(try stillThere.json()["active"] as? Bool, true)
        XCTAssertEqual(try stillThere.json()["maxRedemptions"] as? Int, 10)

        // Plans: the same product id in each app, each listed and read in its own.
        let product = "pro.apps." + UUID().uuidString.prefix(6).lowercased()
        for (token, name) in [(adminA.key, "A's"), (admin, "Default's")] {
            let r = try await send("POST", "/v1/plans", ["productId": product, "name": name], token: token)
            XCTAssertEqual(r.status, 201, r.text)
        }
        let planA = try await send("GET", "/v1/plans/\(product)", token: adminA.key)
        XCTAssertEqual(try planA.json()["name"] as? String, "A's")
        let planDefault = try await send("GET", "/v1/plans/\(product)", token: admin)
        XCTAssertEqual(try planDefault.json()["name"] as? String, "Default's")
        let plansA = try list(try await send("GET", "/v1/plans?limit=100", token: adminA.key)).compactMap(\.productId)
        XCTAssertEqual(plansA, [product])

        // The app's audit log holds its coupon and plan, the default app's does not.
        let auditA = try list(try await send("GET", "/v1/audit?limit=100&objectType=coupon", token: adminA.key))
            .compactMap(\.objectId)
        XCTAssertEqual(Set(auditA), [shared, onlyA])
        let auditDefault = try list(try await send("GET", "/v1/audit?limit=100&objectId=\(onlyA)", token: admin))
        XCTAssertTrue(auditDefault.isEmpty)
    }

    func testEndUsersRedeemTheDefaultAppsCouponsAndOperatorsReadOnlyTheirAppsRedemptions() async throws {
        let a = try await makeApp("Redemptions A")
        let adminA = try await key(in: a.id, by: admin)
        let onlyA = "USER-A-" + UUID().uuidString.prefix(8).uppercased()
        let shared = "USER-S-" + UUID().uuidString.prefix(8).uppercased()
        for (code, token) in [(onlyA, adminA.key), (shared, adminA.key), (shared, admin)] {
            let r = try await coupon(code, token: token)
            XCTAssertEqual(r.status, 201, r.text)
        }
        let user = try Self.minter.user()
        // A user's request that names no app reaches the default app's coupons only.
        let refused = try await client.json(
            "POST", "/v1/redemptions", ["code": onlyA, "platform": "web"], token: user.token)
        XCTAssertEqual(refused.status, 422, refused.text)
        XCTAssertEqual(refused.errorCode, "notFound")
        let redeemed = try await client.json(
            "POST", "/v1/redemptions", ["code": shared, "platform": "web"], token: user.token)
        XCTAssertEqual(redeemed.status, 201, redeemed.text)
        let id = try XCTUnwrap(try redeemed.json()["redemptionId"] as? String)

        // The redemption is the default app's: its operators read it, app A's do not.
        let r102 = try await send("GET", "/v1/redemptions/\(id)", token: admin)
        XCTAssertEqual(r102.status, 200, r102.text)
        let hidden = try await send("GET", "/v1/redemptions/\(id)", token: adminA.key)
        XCTAssertEqual(hidden.status, 404, hidden.text)
        let r103 = try await send("GET", "/v1/coupons/\(shared)/redemptions", token: adminA.key)
        XCTAssertTrue(try list(r103).isEmpty)
        let r104 = try await send("GET", "/v1/coupons/\(shared)/redemptions", token: admin)
        XCTAssertEqual(try list(r104).count, 1)
        let usedA = try await send("GET", "/v1/coupons/\(shared)", token: adminA.key)
        XCTAssertEqual(try usedA.json()["remaining"] as? Int, 10, "app A's coupon of the same code kept its uses")
    }

    func testWebhookEndpointsBelongToTheirApp() async throws {
        let a = try await makeApp("Hooks A")
        let adminA = try await key(in: a.id, by: admin)
        var ids: [String: String] = [:]
        for (name, token) in [("a", adminA.key), ("default", admin)] {
            let r = try await send(
                "POST", "/v1/webhooks", ["url": "http://127.0.0.1:9/\(name)", "events": ["coupon.redeemed"]],
                token: token)
            XCTAssertEqual(r.status, 201, r.text)
            ids[name] = try XCTUnwrap(try r.json()["id"] as? String)
        }
        let listedA = try list(try await send("GET", "/v1/webhooks?limit=100", token: adminA.key)).compactMap(\.id)
        XCTAssertEqual(listedA, [ids["a"]!])
        let listedDefault = try list(try await send("GET", "/v1/webhooks?limit=100", token: admin)).compactMap(\.id)
        XCTAssertFalse(listedDefault.contains(ids["a"]!))
        // Every route of the default app's endpoint answers app A's key with 404, and changes nothing.
        let other = ids["default"]!
        for (method, path, body) in [
            ("PATCH", "/v1/webhooks/\(other)", ["enabled": false] as [String: Any]?),
            ("POST", "/v1/webhooks/\(other)/rotate-secret", [:]), ("POST", "/v1/webhooks/\(other)/test", [:]),
            ("GET", "/v1/webhooks/\(other)/deliveries", nil), ("DELETE", "/v1/webhooks/\(other)", nil)
        ] {
            let r = try await send(method, path, body, token: adminA.key)
            XCTAssertEqual(r.status, 404, "\(method) \(path): \(r.text)")
        }
        let still = try list(try await send("GET", "/v1/webhooks?limit=100", token: admin))
        XCTAssertTrue(still.contains { $0.id == other }, "the default app's endpoint is still there")
        let r = try await send("DELETE", "/v1/webhooks/\(ids["a"]!)", token: adminA.key)
        XCTAssertEqual(r.status, 204, r.text)
    }
}
