import Core
import Cryptography
import Database
import Foundation
import TestSupport
import XCTest

/// An app's own store and RevenueCat settings (docs/apps.md): set, shown and removed per mode by
/// the app's admins or a deployment admin, checked field by field, sealed under
/// `REDEEM_SECRET_KEY` in the database, audited, and never answered or recorded in clear.
extension AppsTests {
    struct StoreSettings: Decodable {
        let provider: String
        let mode: String
        let issuerId: String?
        let keyId: String?
        let appAppleId: String?
        let packageName: String?
        let serviceAccountEmail: String?
        let secretEnding: String
        let webhookSecretSet: Bool?
    }

    func stores(_ app: String, token: String) async throws -> [StoreSettings] {
        let r = try await send("GET", "/v1/apps/\(app)/stores", token: token)
        XCTAssertEqual(r.status, 200, r.text)
        return try r.decode(ListBody<StoreSettings>.self).data
    }

    func testAnAppsGrantsGoToItsOwnRevenueCatProjectOfTheirMode() async throws {
        let b = try await makeApp("RevenueCat B")
        let adminB = try await key(in: b.id, by: admin)
        let liveKey = "sk_rcB" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        let set = try await send("PUT", "/v1/apps/\(b.id)/stores/revenuecat", ["secretKey": liveKey], token: adminB.key)
        XCTAssertEqual(set.status, 200, set.text)
        let code = "RCB-" + UUID().uuidString.prefix(8).uppercased()
        let made = try await coupon(code, token: adminB.key)
        XCTAssertEqual(made.status, 201, made.text)
        let inDefault = "RCD-" + UUID().uuidString.prefix(8).uppercased()
        let madeDefault = try await coupon(inDefault, token: admin)
        XCTAssertEqual(madeDefault.status, 201, madeDefault.text)

        // A production redemption in B is granted in B's live project, with B's key; the sandbox
        // one has no test project set, so it stays in Redeem's ledger; the default app's too.
        let user = try Self.minter.user()
        let sandboxUser = try Self.minter.user()
        for (who, code, app, environment) in [
            (user, code, b.id, "production"), (sandboxUser, code, b.id, "sandbox"), (user, inDefault, nil, "production")
        ] {
            var headers: [String: String] = [:]
            if let app { headers["Redeem-App"] = app }
            let r = try await client.json(
                "POST", "/v1/redemptions", ["code": code, "platform": "web", "environment": environment],
                token: who.token, headers: headers)
            XCTAssertEqual(r.status, 201, r.text)
        }
        let granted = try await Self.stack.eventually(20) {
            Self.revenueCat.received.contains { $0.appUserId == user.appUserId && $0.status == 201 }
        }
        XCTAssertTrue(granted, "B's live grant reached B's RevenueCat project")
        // The sandbox grant is stored (in the ledger) before the calls are counted.
        let stored = try await Self.stack.eventually(20) {
            let r = try await self.send("GET", "/v1/me/entitlements", token: sandboxUser.token, app: b.id)
            return try r.decode(EntitlementsBody.self).data.first?.source == "local-sandbox"
        }
        XCTAssertTrue(stored, "B's sandbox grant is kept in Redeem's ledger")
        let calls = Self.revenueCat.received.filter { [user.appUserId, sandboxUser.appUserId].contains($0.appUserId) }
        XCTAssertEqual(calls.map(\.authorization), ["Bearer \(liveKey)"], "one call, with B's own key: \(calls)")
    }

    func testAnAppsAdminSetsShowsAndRemovesItsStoreSettingsSealedAndNeverShown() async throws {
        let b = try await makeApp("Stores B")
        let adminB = try await key(in: b.id, by: admin)
        let apple = try TestAppleAPIKey()
        let pem = try String(contentsOf: apple.privateKeyFile, encoding: .utf8)
        let google = try TestGoogleServiceAccount()
        let serviceAccount = try String(contentsOf: google.keyFile, encoding: .utf8)
        let stripeKey = "sk_live_" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        let revenueCatKey = "sk_rc" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        let pemBody = pem.split(separator: "\n")[1]

        let set = try await send(
            "PUT", "/v1/apps/\(b.id)/stores/appstore",
            ["issuerId": apple.issuerId, "keyId": apple.keyId, "privateKey": pem, "appAppleId": "6450000001"],
            token: adminB.key)
        XCTAssertEqual(set.status, 200, set.text)
        let shown = try set.decode(StoreSettings.self)
        XCTAssertEqual(
            [shown.provider, shown.mode, shown.issuerId, shown.keyId, shown.appAppleId],
            ["appstore", "live", apple.issuerId, apple.keyId, "6450000001"])
        XCTAssertEqual(shown.secretEnding.count, 4)
        XCTAssertFalse(set.text.contains(pemBody), "the private key is never answered")
        let play = try await send(
            "PUT", "/v1/apps/\(b.id)/stores/googleplay",
            ["serviceAccount": serviceAccount, "packageName": "com.example.storesb"], token: adminB.key)
        XCTAssertEqual(play.status, 200, play.text)
        XCTAssertEqual(try play.decode(StoreSettings.self).serviceAccountEmail, google.email)
        let stripe = try await send(
            "PUT", "/v1/apps/\(b.id)/stores/stripe", ["secretKey": stripeKey, "webhookSecret": "whsec_abc123"],
            token: adminB.key)
        XCTAssertEqual(stripe.status, 200, stripe.text)
        XCTAssertEqual(try stripe.decode(StoreSettings.self).secretEnding, String(stripeKey.suffix(4)))
        XCTAssertEqual(try stripe.decode(StoreSettings.self).webhookSecretSet, true)
        let rc = try await send(
            "PUT", "/v1/apps/\(b.id)/stores/revenuecat", ["secretKey": revenueCatKey], token: adminB.key)
        XCTAssertEqual(rc.status, 200, rc.text)

        // Shown in StoreProvider's order, without a secret; a test key of the app sees its own mode's (none).
        let listed = try await send("GET", "/v1/apps/\(b.id)/stores", token: adminB.key)
        XCTAssertEqual(try list(listed).count, 4)
        let ofB = try await stores(b.id, token: adminB.key)
        XCTAssertEqual(
            ofB.map(\.provider),
            ["appstore", "googleplay", "stripe", "revenuecat"])
        for secret in [String(pemBody), stripeKey, revenueCatKey, "whsec_abc123", google.keyId] {
            XCTAssertFalse(listed.text.contains(secret), "no secret is shown")
        }
        let testB = try await key(in: nil, by: adminB.key, mode: "test")
        let ofBTest = try await stores(b.id, token: testB.key)
        XCTAssertEqual(ofBTest.count, 0, "settings are per mode")
        let wrongMode = try await send(
            "PUT", "/v1/apps/\(b.id)/stores/stripe", ["secretKey": stripeKey], token: testB.key)
        XCTAssertEqual(wrongMode.status, 422, wrongMode.text)
        XCTAssertEqual(wrongMode.errorField, "secretKey", "a live Stripe key is refused in test mode")

        // The database holds them sealed under the stack's key, bound to their row.
        let db = try PGConnection(url: try Self.stack.adminDatabaseURL())
        let keyring = try Self.stack.secretKeyring()
        let rows = try db.query(
            "SELECT provider, settings::text AS settings, secret, secret_key_id FROM grants.app_store_settings WHERE app_id = $1",
            [try XCTUnwrap(UUID(uuidString: b.id))]
        ).rows
        XCTAssertEqual(rows.count, 4)
        for row in rows {
            let stored = try row.decode("secret", as: String.self) + (try row.decode("settings", as: String.self))
            for secret in [String(pemBody), stripeKey, revenueCatKey, "whsec_abc123"] {
                XCTAssertFalse(stored.contains(secret), "stored in clear")
            }
            XCTAssertEqual(try row.decode("secret_key_id", as: String.self), keyring.current.id)
        }
        let rcRow = try XCTUnwrap(rows.first { (try? $0.decode("provider", as: String.self)) == "revenuecat" })
        let sealed = Array(try XCTUnwrap(Data(base64Encoded: try rcRow.decode("secret", as: String.self))))
        let context = "grants.app_store_settings/\(b.id.lowercased())/live/revenuecat"
        let opened = try keyring.open(sealed, keyId: keyring.current.id, context: context)
        XCTAssertTrue(String(decoding: opened, as: UTF8.self).contains(revenueCatKey))
        XCTAssertThrowsError(
            try keyring.open(
                sealed, keyId: keyring.current.id, context: context.replacingOccurrences(of: "/live/", with: "/test/")),
            "a sealed value moved to another row does not open")

        // Removed, once; each change is in the app's audit log, without a secret.
        let removed = try await send("DELETE", "/v1/apps/\(b.id)/stores/revenuecat", token: adminB.key)
        XCTAssertEqual(removed.status, 204, removed.text)
        let again = try await send("DELETE", "/v1/apps/\(b.id)/stores/revenuecat", token: adminB.key)
        XCTAssertEqual(again.status, 404, again.text)
        let left = try await stores(b.id, token: adminB.key)
        XCTAssertEqual(left.map(\.provider), ["appstore", "googleplay", "stripe"])
        let audit = try await send("GET", "/v1/audit?limit=100&objectType=appStores", token: adminB.key)
        let entries = try list(audit)
        XCTAssertEqual(entries.filter { $0.action == "appStores.set" }.count, 4)
        XCTAssertEqual(
            entries.filter { $0.action == "appStores.clear" }.map(\.objectId), ["\(b.id.uppercased())/revenuecat"])
        for secret in [String(pemBody), stripeKey, revenueCatKey, "whsec_abc123"] {
            XCTAssertFalse(audit.text.contains(secret), "no secret in the audit log")
        }
    }

    func testBadStoreSettingsAreRefusedNamingTheFieldAndStoreNothing() async throws {
        let b = try await makeApp("Stores refused")
        let adminB = try await key(in: b.id, by: admin)
        let apple = try TestAppleAPIKey()
        let pem = try String(contentsOf: apple.privateKeyFile, encoding: .utf8)
        let good: [String: Any] = [
            "issuerId": apple.issuerId, "keyId": apple.keyId, "privateKey": pem, "appAppleId": "6450000002"
        ]
        let cases: [(provider: String, body: [String: Any], field: String)] = [
            (
                "appstore",
                good.merging(["privateKey": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"]) { $1 },
                "privateKey"
            ),
            ("appstore", good.filter { $0.key != "issuerId" }, "issuerId"),
            ("appstore", good.merging(["appAppleId": "app-one"]) { $1 }, "appAppleId"),
            ("appstore", good.merging(["packageName": "com.example.x"]) { $1 }, "packageName"),
            (
                "googleplay", ["serviceAccount": "{\"client_email\": \"x\"}", "packageName": "com.example.x"],
                "serviceAccount"
            ),
            ("stripe", ["secretKey": "pk_live_abc"], "secretKey"),
            ("stripe", ["secretKey": "sk_live_abc", "webhookSecret": "nope"], "webhookSecret"),
            ("revenuecat", ["secretKey": "has spaces in it"], "secretKey")
        ]
        for c in cases {
            let r = try await send("PUT", "/v1/apps/\(b.id)/stores/\(c.provider)", c.body, token: adminB.key)
            XCTAssertEqual(r.status, 422, "\(c.provider) \(c.field): \(r.text)")
            XCTAssertEqual(r.errorCode, "invalid", c.field)
            XCTAssertEqual(r.errorField, c.field, r.text)
        }
        let unknown = try await send(
            "PUT", "/v1/apps/\(b.id)/stores/amazon", ["secretKey": "sk_live_abc"], token: adminB.key)
        XCTAssertEqual(unknown.status, 404, unknown.text)
        let afterRefusals = try await stores(b.id, token: adminB.key)
        XCTAssertEqual(afterRefusals.count, 0, "nothing refused is stored")

        // The default app's settings are the environment's: not stored, not shown here.
        let ofDefault = try await send(
            "PUT", "/v1/apps/\(DefaultApp.id.uuidString)/stores/revenuecat", ["secretKey": "sk_rc_defaultapp"],
            token: admin)
        XCTAssertEqual(ofDefault.status, 422, ofDefault.text)
        XCTAssertEqual(ofDefault.errorField, "app")
        let ofDefaultApp = try await stores(DefaultApp.id.uuidString, token: admin)
        XCTAssertEqual(ofDefaultApp.count, 0)
    }

    func testOnlyTheAppsAdminsOrADeploymentAdminManageItsStoreSettings() async throws {
        let a = try await makeApp("Stores A")
        let b = try await makeApp("Stores C")
        let adminA = try await key(in: a.id, by: admin)
        let adminB = try await key(in: b.id, by: admin)
        let supportB = try await key(in: nil, by: adminB.key, role: "support")
        let body = ["secretKey": "sk_rc_only_b_key"]
        // Another app's admin: 404 as for every object of another app, and nothing changes.
        let put = try await send("PUT", "/v1/apps/\(b.id)/stores/revenuecat", body, token: adminA.key)
        XCTAssertEqual(put.status, 404, put.text)
        let read = try await send("GET", "/v1/apps/\(b.id)/stores", token: adminA.key)
        XCTAssertEqual(read.status, 404, read.text)
        let cleared = try await send("DELETE", "/v1/apps/\(b.id)/stores/revenuecat", token: adminA.key)
        XCTAssertEqual(cleared.status, 404, cleared.text)
        // Below admin in the app itself: 403.
        let bySupport = try await send("GET", "/v1/apps/\(b.id)/stores", token: supportB.key)
        XCTAssertEqual(bySupport.status, 403, bySupport.text)
        // A deployment admin manages any app's; an id that names no app is 404.
        let byDeployment = try await send("PUT", "/v1/apps/\(b.id)/stores/revenuecat", body, token: admin)
        XCTAssertEqual(byDeployment.status, 200, byDeployment.text)
        let setByDeploymentAdmin = try await stores(b.id, token: adminB.key)
        XCTAssertEqual(setByDeploymentAdmin.map(\.secretEnding), ["_key"])
        let ofA = try await stores(a.id, token: adminA.key)
        XCTAssertEqual(ofA.count, 0, "app A has none")
        let noApp = try await send("GET", "/v1/apps/\(UUID().uuidString)/stores", token: admin)
        XCTAssertEqual(noApp.status, 404, noApp.text)
    }
}
