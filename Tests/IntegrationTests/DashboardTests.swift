import Core
import Cryptography
import Foundation
import TestSupport
import XCTest

/// The operator dashboard in a real browser (headless Chromium over the DevTools protocol,
/// Tests/Browser/dashboard_flow.py): a member signs in, gets a store-limit error next to its field,
/// creates a valid coupon, a user redeems it through /redeem, and the redemption shows on the coupon
/// page and in the CSV download. Screenshots of each page go to test-output/.
final class DashboardTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!

    override class func startSuite() throws { stack = try Stack(environment: ["REDEEM_WEBHOOK_ALLOW_PRIVATE": "1"]) }
    override class func stopSuite() { stack?.stop() }

    /// Runs a script of Tests/Browser and answers what it printed, also when it failed (its last
    /// line says what it saw, which the test reads).
    func browser(_ script: String, _ arguments: [String]) throws -> String {
        let printed = try Project.temporaryDirectory("browser").appendingPathComponent("out").path
        let run = try Subprocess(
            "/usr/bin/python3", [Project.root.appendingPathComponent("Tests/Browser/\(script)").path] + arguments,
            stdout: printed)
        guard run.wait(seconds: 300) != nil else {
            run.signal(SIGKILL)
            throw TestFailure("\(script) did not finish in 300 s")
        }
        return (try? String(contentsOfFile: printed, encoding: .utf8)) ?? ""
    }

    /// A new member of `role`, joined through an invitation as the dashboard's invite link does:
    /// its email, password and the acceptance's account and session.
    func member(
        _ prefix: String, role: String
    ) async throws -> (email: String, password: String, joined: AccountSessionBody) {
        let client = Self.stack.client
        let email = "\(prefix)-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let password = "a long dashboard passphrase"
        let invited = try await client.json(
            "POST", "/v1/members", ["email": email, "role": role], token: Self.stack.adminKey)
        XCTAssertEqual(invited.status, 201, invited.text)
        let token = try XCTUnwrap(try invited.decode(Invitation.self).token)
        let joined = try await client.json("POST", "/v1/members/accept", ["token": token, "password": password])
        XCTAssertEqual(joined.status, 201, joined.text)
        return (email, password, try joined.decode(AccountSessionBody.self))
    }

    var output: URL {
        let dir = Project.root.appendingPathComponent("test-output")
        try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    func testAMemberCreatesACouponSeesItRedeemedAndDownloadsTheCSV() async throws {
        let client = Self.stack.client
        let (email, password, joined) = try await member("dash", role: "admin")
        let memberId = joined.account.id
        // Something on every page: an older coupon, a webhook endpoint.
        _ = try await client.json("POST", "/v1/coupons", ["code": "OLD-" + UUID().uuidString.prefix(6), "kind": "freePeriod",
                                                          "duration": ["unit": "week", "count": 1]], token: Self.stack.adminKey)
        _ = try await client.json("POST", "/v1/webhooks", ["url": "http://127.0.0.1:9/redeem-hooks", "events": ["coupon.redeemed"]], token: Self.stack.adminKey)

        let code = "DASH-" + UUID().uuidString.prefix(6)
        let out = try browser(
            "dashboard_flow.py", [Self.stack.gateway.absoluteString, email, password, code, output.path])
        let r: Flow
        do {
            r = try JSONDecoder().decode(
                Flow.self, from: Data((out.split(separator: "\n").last.map(String.init) ?? "").utf8))
        } catch { throw TestFailure("\(error): \(out)") }
        XCTAssertEqual(r.ok, true, "\(r)")
        XCTAssertEqual(r.labelled, true, "every input and select has a label")
        XCTAssertEqual(r.who, email)
        XCTAssertEqual(r.reloadSignedIn, true, "a reload keeps the member signed in")
        XCTAssertEqual(r.cookieReadable, false, "the session cookie is HttpOnly")
        XCTAssertEqual(r.tokenStored, false, "no refresh token in the page's storage")
        XCTAssertEqual(r.reloadAfterSignOut, true, "signed out, a reload stays signed out")
        XCTAssertEqual(r.exceptions, [], "no script error")
        XCTAssertEqual(r.violations, [], "nothing the CSP refused")
        // The store-limit error is the server's, next to the field it names.
        XCTAssertTrue((r.storeLimitError ?? "").contains("25000"), r.storeLimitError ?? "")
        XCTAssertTrue((r.storeLimitState ?? "").hasPrefix("Over a store limit"))
        XCTAssertEqual(r.errorsCleared, true)
        let row = r.redemptionRow ?? []
        XCTAssertEqual(row.count, 8)
        XCTAssertEqual(row[safe: 1], "web")
        XCTAssertEqual(row[safe: 4], "completed")
        XCTAssertEqual(row[safe: 6], "no")
        XCTAssertEqual(row[safe: 7], "—", "redeemed with the coupon's own code, not a unique one")
        XCTAssertEqual(r.uniqueCodes, 5, "Create codes saved a CSV of five codes")
        XCTAssertEqual(r.narrowOverflow, false, "the page fits 390 px (wide tables scroll inside it)")
        let csv = r.csv ?? ""
        let lines = csv.split(whereSeparator: \.isNewline)
        XCTAssertEqual(lines.count, 2, csv)
        XCTAssertTrue(lines.last?.contains(code.uppercased()) == true, csv)
        XCTAssertTrue(lines.last?.contains("completed") == true, csv)
        XCTAssertEqual(r.testModeHasCoupon, false, "test mode does not show live coupons")
        XCTAssertEqual(r.testEvent, "Test event queued.")
        XCTAssertEqual(r.retried, "Delivery sent again.", "the delivery log's Retry button sends the delivery again")
        // The overview: 30 days, today's bar with the web redemption.
        XCTAssertEqual(r.overviewDays, 30)
        XCTAssertGreaterThanOrEqual(r.overviewBars ?? 0, 1)
        XCTAssertEqual(r.overviewPlatforms, "iOS 0 · Android 0 · web 1")
        let stats = try await client.get("/v1/stats/redemptions?days=7", token: Self.stack.adminKey)
        XCTAssertEqual(stats.status, 200, stats.text)
        let figures = try stats.json()
        XCTAssertEqual((figures["days"] as? [Any])?.count, 7)
        let top = (figures["coupons"] as? [[String: Any]]) ?? []
        XCTAssertEqual(top.first { $0["code"] as? String == code.uppercased() }?["redemptions"] as? Int, 1, stats.text)
        let badDays = try await client.get("/v1/stats/redemptions?days=0", token: Self.stack.adminKey)
        XCTAssertEqual(badDays.status, 422, badDays.text)
        XCTAssertEqual(badDays.errorField, "days")
        XCTAssertEqual(r.planNameError, "Name must be 1 to 200 characters.", "the server's error, next to the name")
        let plan = r.planRow ?? []
        XCTAssertEqual(plan[safe: 0], "plan.\(code.lowercased())")
        XCTAssertEqual(plan[safe: 1], "Pro monthly")
        XCTAssertEqual(plan[safe: 2], "6450000001")
        XCTAssertEqual(plan[safe: 3], "pro_monthly (monthly, monthly-intro)")
        let audit = r.auditFirst ?? []
        XCTAssertEqual(audit[safe: 1], "coupon.createCodes", "the last change: the codes made on the coupon page")
        XCTAssertEqual(audit[safe: 0], "member " + memberId, "the dashboard's change is audited with the member as actor")
        for page in ["signin", "coupons", "new-store-limit", "new-valid", "coupon-new", "coupon-redeemed", "coupon-390", "webhooks", "keys",
                     "members", "audit", "test-mode", "plans", "overview"] {
            XCTAssertTrue(FileManager.default.fileExists(atPath: output.appendingPathComponent("dashboard-\(page).png").path), page)
        }
    }

    /// A member with TOTP signs in on the dashboard: the page asks for the code when the server
    /// answers `totpRequired`, and signs in with it (Tests/Browser/dashboard_totp.py).
    func testAMemberWithTOTPSignsInWithTheirCode() async throws {
        let client = Self.stack.client
        let (email, password, joined) = try await member("totp", role: "readonly")
        let session = joined.session.accessToken
        let started = try await client.json("POST", "/v1/me/totp", [:], token: session)
        XCTAssertEqual(started.status, 200, started.text)
        let secret = try XCTUnwrap(try started.json()["secret"] as? String)
        let step = TOTP.step(at: Date())
        let code = TOTP(secret: try XCTUnwrap(Base32.decode(secret))).code(step: step)
        let confirmed = try await client.json("POST", "/v1/me/totp/confirm", ["code": code], token: session)
        XCTAssertEqual(confirmed.status, 200, confirmed.text)

        let out = try Subprocess.run("/usr/bin/python3", [Project.root.appendingPathComponent("Tests/Browser/dashboard_totp.py").path,
                                                          Self.stack.gateway.absoluteString, email, password, secret, String(step), output.path])
        let r = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data((out.split(separator: "\n").last.map(String.init) ?? "").utf8)) as? [String: Any], out)
        XCTAssertEqual(r["ok"] as? Bool, true, "\(r)")
        XCTAssertEqual(r["codeFieldAtFirst"] as? Bool, false, "the code field shows only when the server asks for it")
        XCTAssertEqual(r["codeFocused"] as? Bool, true)
        XCTAssertEqual(r["who"] as? String, email)
        XCTAssertEqual(r["exceptions"] as? [String], [])
    }

    /// The Customers page (Tests/Browser/dashboard_customer.py): a readonly member finds an end user
    /// by email and by appUserId and sees its account, entitlement and redemption; an unknown id is
    /// told, test mode hides the live redemption, and the coupon's redemptions link to the customer.
    func testAMemberFindsACustomerWithItsRedemptionAndEntitlement() async throws {
        let client = Self.stack.client
        let (email, password, _) = try await member("support", role: "readonly")
        let customerEmail = "buyer-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let signedUp = try await client.json(
            "POST", "/v1/accounts", ["email": customerEmail, "password": "a long buyer passphrase"])
        XCTAssertEqual(signedUp.status, 201, signedUp.text)
        let customer = try signedUp.decode(AccountSessionBody.self)
        let appUserId = try XCTUnwrap(customer.account.appUserId)
        let code = "CUST-" + UUID().uuidString.prefix(6).uppercased()
        let made = try await client.json(
            "POST", "/v1/coupons",
            ["code": code, "kind": "freePeriod", "entitlementId": "gold", "duration": ["unit": "month", "count": 1]],
            token: Self.stack.adminKey)
        XCTAssertEqual(made.status, 201, made.text)
        let redeemed = try await client.json(
            "POST", "/v1/redemptions", ["code": code, "platform": "web"], token: customer.session.accessToken)
        XCTAssertEqual(redeemed.status, 201, redeemed.text)
        let id = try redeemed.decode(RedemptionBody.self).redemptionId
        let done = try await client.get("/v1/redemptions/\(id)?wait=20", token: customer.session.accessToken)
        XCTAssertEqual(try done.decode(RedemptionBody.self).status, "completed", done.text)
        let granted = try await Self.stack.eventually(10) {
            let e = try await client.get("/v1/me/entitlements", token: customer.session.accessToken)
            return try e.decode(EntitlementsBody.self).entry("gold") != nil
        }
        XCTAssertTrue(granted, "the redemption's entitlement is in the ledger")

        let out = try browser(
            "dashboard_customer.py",
            [Self.stack.gateway.absoluteString, email, password, customerEmail, appUserId, code, output.path])
        let r = try XCTUnwrap(
            try JSONSerialization.jsonObject(with: Data((out.split(separator: "\n").last.map(String.init) ?? "").utf8))
                as? [String: Any], out)
        XCTAssertEqual(r["ok"] as? Bool, true, "\(r)")
        XCTAssertEqual(r["navCurrent"] as? String, "#customers")
        XCTAssertEqual(r["hash"] as? String, "#customer/\(appUserId)", "found by email, the page is the customer's")
        let facts = r["facts"] as? [String] ?? []
        XCTAssertTrue(facts.contains("appUserId\(appUserId)"), "\(facts)")
        XCTAssertTrue(facts.contains("Email\(customerEmail) (not verified)"), "\(facts)")
        XCTAssertTrue(facts.contains("Signs in withpassword"), "\(facts)")
        let entitlements = r["entitlements"] as? [[String]] ?? []
        XCTAssertEqual(entitlements.count, 1, "\(entitlements)")
        XCTAssertEqual(entitlements.first?[safe: 0], "gold")
        XCTAssertEqual(entitlements.first?[safe: 1], "active")
        let redemptions = r["redemptions"] as? [[String]] ?? []
        XCTAssertEqual(redemptions.count, 1, "\(redemptions)")
        XCTAssertEqual(redemptions.first?[safe: 0], code)
        XCTAssertEqual(redemptions.first?[safe: 1], "web")
        XCTAssertEqual(redemptions.first?[safe: 3], "completed")
        XCTAssertEqual(redemptions.first?[safe: 6], "no")
        XCTAssertEqual(r["unknown"] as? String, "No account has this appUserId.")
        XCTAssertEqual(r["unknownHidesCustomer"] as? Bool, true)
        XCTAssertEqual(r["byIdRedemptions"] as? Int, 1)
        XCTAssertEqual((r["testMode"] as? [[String]])?.first?.first, "No redemptions in test mode.")
        XCTAssertEqual(r["fromCoupon"] as? String, "#customer/\(appUserId)")
        XCTAssertEqual(r["exceptions"] as? [String], [])
        XCTAssertEqual(r["violations"] as? [String], [])
        let shot = output.appendingPathComponent("dashboard-customer.png").path
        XCTAssertTrue(FileManager.default.fileExists(atPath: shot))
    }

    /// The app switcher (Tests/Browser/dashboard_apps.py): a member with a role in two apps and none
    /// in the default app is offered exactly those two, sees the second one's coupon after
    /// switching, and finds that choice again after a reload.
    func testAMemberSwitchesBetweenTheAppsTheyWorkIn() async throws {
        let client = Self.stack.client
        let admin = ["Authorization": "Bearer \(Self.stack.adminKey)"]
        var apps: [String] = []
        for name in ["Switcher A", "Switcher B"] {
            let made = try await client.json("POST", "/v1/apps", ["name": name], headers: admin)
            XCTAssertEqual(made.status, 201, made.text)
            apps.append(try XCTUnwrap(try made.json()["id"] as? String))
        }
        let email = "switcher-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let password = "a long dashboard passphrase"
        for (app, role) in zip(apps, ["support", "admin"]) {
            let invited = try await client.json(
                "POST", "/v1/members", ["email": email, "role": role],
                headers: admin.merging(["Redeem-App": app]) { $1 })
            XCTAssertEqual(invited.status, 201, invited.text)
            let token = try XCTUnwrap(try invited.decode(Invitation.self).token)
            let joined = try await client.json("POST", "/v1/members/accept", ["token": token, "password": password])
            XCTAssertTrue([200, 201].contains(joined.status), joined.text)
        }
        let code = "SWITCH-" + UUID().uuidString.prefix(6).uppercased()
        let made = try await client.json(
            "POST", "/v1/coupons", ["code": code, "kind": "freePeriod", "duration": ["unit": "month", "count": 1]],
            headers: admin.merging(["Redeem-App": apps[1]]) { $1 })
        XCTAssertEqual(made.status, 201, made.text)

        let out = try browser(
            "dashboard_apps.py", [Self.stack.gateway.absoluteString, email, password, code, output.path])
        let r = try XCTUnwrap(
            try JSONSerialization.jsonObject(with: Data((out.split(separator: "\n").last.map(String.init) ?? "").utf8))
                as? [String: Any], out)
        XCTAssertEqual(r["ok"] as? Bool, true, "\(r)")
        XCTAssertEqual(r["apps"] as? [String], ["Switcher A", "Switcher B"])
        XCTAssertEqual(r["first"] as? String, "Switcher A")
        XCTAssertEqual(r["firstListsCode"] as? Bool, false, "the first app has no such coupon")
        XCTAssertEqual(r["switched"] as? String, "Switcher B")
        XCTAssertEqual(r["afterReload"] as? String, "Switcher B", "the choice is remembered")
        XCTAssertEqual(r["exceptions"] as? [String], [])
        XCTAssertEqual(r["violations"] as? [String], [])
    }

    /// The Stores page (Tests/Browser/dashboard_stores.py): a support member of the default app,
    /// admin of app B, is told the default app's settings are the environment's, sets B's RevenueCat
    /// settings with the form after seeing the API's error next to its field, sees the secret's ending
    /// listed (and the API holds them, the secret nowhere in the page), none in test mode, and
    /// removes them; the audit log records both, never the secret.
    func testAnAppsAdminSetsAndRemovesItsRevenueCatSettingsInTheDashboard() async throws {
        let client = Self.stack.client
        let admin = ["Authorization": "Bearer \(Self.stack.adminKey)"]
        let made = try await client.json("POST", "/v1/apps", ["name": "Stores B"], headers: admin)
        XCTAssertEqual(made.status, 201, made.text)
        let app = try XCTUnwrap(try made.json()["id"] as? String)
        let (email, password, _) = try await member("stores", role: "support")
        let invited = try await client.json(
            "POST", "/v1/members", ["email": email, "role": "admin"], headers: admin.merging(["Redeem-App": app]) { $1 }
        )
        XCTAssertEqual(invited.status, 201, invited.text)
        let token = try XCTUnwrap(try invited.decode(Invitation.self).token)
        let joined = try await client.json("POST", "/v1/members/accept", ["token": token, "password": password])
        XCTAssertTrue([200, 201].contains(joined.status), joined.text)
        let secret = "sk_dash" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12) + "Wq9z"

        let out = try browser(
            "dashboard_stores.py",
            [Self.stack.gateway.absoluteString, email, password, app, Self.stack.adminKey, secret, output.path])
        let r = try XCTUnwrap(
            try JSONSerialization.jsonObject(with: Data((out.split(separator: "\n").last.map(String.init) ?? "").utf8))
                as? [String: Any], out)
        XCTAssertEqual(r["ok"] as? Bool, true, "\(r)")
        XCTAssertEqual(r["defaultFormHidden"] as? Bool, true, "the default app has no form")
        XCTAssertEqual(r["emptyBefore"] as? [[String]], [["No settings in live mode yet.", "", "", "", "", ""]])
        XCTAssertEqual(r["labelled"] as? Bool, true, "every field has its label")
        XCTAssertEqual(r["secretInputsHidden"] as? Bool, true)
        XCTAssertEqual(
            r["fieldError"] as? String, "SecretKey must be the RevenueCat project's secret API key.",
            "the API's message")
        let listed = try XCTUnwrap(r["listed"] as? [[String]], "\(r)")
        XCTAssertEqual(listed.count, 1, "\(listed)")
        XCTAssertEqual(Array(listed[0].prefix(4)), ["RevenueCat", "live", "—", "…Wq9z"])
        XCTAssertEqual(r["errorCleared"] as? String, "")
        XCTAssertEqual(r["secretInPage"] as? Bool, false, "the secret left the page once saved")
        let stored = try XCTUnwrap(r["storedLive"] as? [[String: Any]], "\(r)")
        XCTAssertEqual(stored.map { $0["provider"] as? String }, ["revenuecat"])
        XCTAssertEqual(stored.first?["secretEnding"] as? String, "Wq9z")
        XCTAssertEqual(r["testMode"] as? [[String]], [["No settings in test mode yet.", "", "", "", "", ""]])
        XCTAssertEqual(r["removedStatus"] as? String, "RevenueCat settings removed.")
        XCTAssertEqual((r["storedAfter"] as? [Any])?.count, 0, "removed at the API too")
        XCTAssertEqual(r["exceptions"] as? [String], [])
        XCTAssertEqual(r["violations"] as? [String], [])
        XCTAssertFalse(out.contains(secret), "the script saw no secret echoed")

        let audit = try await client.send(
            "GET", "/v1/audit?limit=10&objectType=appStores", headers: admin.merging(["Redeem-App": app]) { $1 })
        XCTAssertEqual(audit.status, 200, audit.text)
        let actions = try XCTUnwrap(try audit.json()["data"] as? [[String: Any]]).compactMap { $0["action"] as? String }
        XCTAssertEqual(Set(actions), ["appStores.set", "appStores.clear"], audit.text)
        XCTAssertFalse(audit.text.contains(secret), "the audit log holds no secret")
    }

    /// The dashboard's session over HTTP: the refresh token only in a strict cookie, a refresh from
    /// the cookie rotating it, and a sign-out ending it and clearing the cookie.
    func testTheDashboardSessionKeepsItsRefreshTokenInAStrictCookie() async throws {
        // A client that keeps no cookies: each request carries exactly the cookie the test gives it.
        let client = HTTPClient(base: Self.stack.gateway, followRedirects: false)
        let (email, password, _) = try await member("cookie", role: "readonly")

        func cookie(_ r: HTTPClient.Response) -> String? {
            r.header("Set-Cookie").flatMap { $0.split(separator: ";").first.map(String.init) }
        }
        let signedIn = try await client.json("POST", "/dashboard/session", ["email": email, "password": password])
        XCTAssertEqual(signedIn.status, 200, signedIn.text)
        let setCookie = try XCTUnwrap(signedIn.header("Set-Cookie"))
        XCTAssertTrue(setCookie.hasPrefix("redeem_dashboard=rt_"), setCookie)
        for attribute in ["Path=/dashboard", "HttpOnly", "Secure", "SameSite=Strict"] {
            XCTAssertTrue(setCookie.contains("; \(attribute)"), "\(attribute) in \(setCookie)")
        }
        let body = try signedIn.json()
        XCTAssertNil(body["refreshToken"])
        // The cookie's token itself, not its "rt_" prefix: three base64url letters of the access
        // token's signature spell "rt_" in about one answer in 400.
        let refreshToken = String(setCookie.dropFirst("redeem_dashboard=".count).prefix { $0 != ";" })
        XCTAssertGreaterThan(refreshToken.count, "rt_".count, setCookie)
        XCTAssertFalse(signedIn.text.contains(refreshToken), "the answer holds no refresh token")
        let access = try XCTUnwrap(body["accessToken"] as? String)
        let coupons = try await client.get("/v1/coupons?limit=1", token: access)
        XCTAssertEqual(coupons.status, 200, coupons.text)

        // A reload: the cookie alone gets a new access token, and the refresh token rotates.
        let first = try XCTUnwrap(cookie(signedIn))
        let renewed = try await client.send("POST", "/dashboard/session/refresh", headers: ["Cookie": first])
        XCTAssertEqual(renewed.status, 200, renewed.text)
        let second = try XCTUnwrap(cookie(renewed))
        XCTAssertNotEqual(second, first)
        let renewedAccess = try XCTUnwrap(try renewed.json()["accessToken"] as? String)
        let withRenewed = try await client.get("/v1/coupons?limit=1", token: renewedAccess)
        XCTAssertEqual(withRenewed.status, 200, withRenewed.text)

        // No cookie: 401, and the answer clears any.
        let none = try await client.send("POST", "/dashboard/session/refresh")
        XCTAssertEqual(none.status, 401, none.text)
        XCTAssertTrue(none.header("Set-Cookie")?.contains("Max-Age=0") == true)

        // Signing out ends the session and clears the cookie: the cookie refreshes nothing more.
        let out = try await client.send(
            "DELETE", "/dashboard/session", headers: ["Authorization": "Bearer \(renewedAccess)"])
        XCTAssertEqual(out.status, 204, out.text)
        XCTAssertTrue(out.header("Set-Cookie")?.contains("Max-Age=0") == true)
        let after = try await client.send("POST", "/dashboard/session/refresh", headers: ["Cookie": second])
        XCTAssertEqual(after.status, 401, after.text)
    }

    func testThePageAndItsAssetsCarryTheStrictPolicy() async throws {
        for path in ["/dashboard", "/dashboard/app.js", "/dashboard/app.css"] {
            let r = try await Self.stack.client.get(path)
            XCTAssertEqual(r.status, 200, path)
            let csp = r.headers["Content-Security-Policy"] ?? ""
            XCTAssertTrue(csp.contains("script-src 'self'") && csp.contains("default-src 'none'"), csp)
        }
        let html = try await Self.stack.client.get("/dashboard")
        XCTAssertFalse(html.text.contains("<script>"), "no inline script")
        XCTAssertFalse(html.text.lowercased().contains(" on") && html.text.range(of: #"\son[a-z]+="#, options: .regularExpression) != nil, "no inline handlers")
        let script = try await Self.stack.client.get("/dashboard/app.js")
        XCTAssertFalse(script.text.contains("innerHTML"), "markup is never built from strings")
        // The one thing kept in storage is the app chosen (an id, no secret).
        let kept = script.text.replacingOccurrences(of: "localStorage.getItem(appKey)", with: "")
            .replacingOccurrences(of: "localStorage.setItem(appKey, app)", with: "")
        XCTAssertFalse(
            kept.contains("localStorage") || kept.contains("sessionStorage") || kept.contains("document.cookie"),
            "tokens stay in memory")
    }
}

/// What `POST /v1/members` answers: the invitation's one-time token.
private struct Invitation: Decodable { let token: String? }

/// What `Tests/Browser/dashboard_flow.py` prints.
private struct Flow: Decodable {
    let ok: Bool
    /// What the script waited for in vain, when `ok` is false.
    let error: String?
    let labelled: Bool?
    let who: String?
    let exceptions: [String]?
    let violations: [String]?
    let storeLimitError: String?
    let storeLimitState: String?
    let errorsCleared: Bool?
    let redemptionRow: [String]?
    /// How many codes the CSV that "Create codes" saved holds.
    let uniqueCodes: Int?
    let narrowOverflow: Bool?
    let csv: String?
    let testModeHasCoupon: Bool?
    let testEvent: String?
    let retried: String?
    let auditFirst: [String]?
    let overviewBars: Int?
    let overviewDays: Int?
    let overviewPlatforms: String?
    let planNameError: String?
    let planRow: [String]?
    let reloadSignedIn: Bool?
    let cookieReadable: Bool?
    let tokenStored: Bool?
    let reloadAfterSignOut: Bool?
}

private extension Array {
    subscript(safe i: Int) -> Element? { indices.contains(i) ? self[i] : nil }
}
