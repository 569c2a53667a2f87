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

    var output: URL {
        let dir = Project.root.appendingPathComponent("test-output")
        try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    func testAMemberCreatesACouponSeesItRedeemedAndDownloadsTheCSV() async throws {
        let client = Self.stack.client
        // The member joins through an invitation, as the dashboard's invite link does.
        let email = "dash-\(UUID().uuidString.prefix(8).lowercased())@example.com", password = "a long dashboard passphrase"
        let invited = try await client.json("POST", "/v1/members", ["email": email, "role": "admin"], token: Self.stack.adminKey)
        XCTAssertEqual(invited.status, 201, invited.text)
        let token = try XCTUnwrap(try invited.decode(Invitation.self).token)
        let joined = try await client.json("POST", "/v1/members/accept", ["token": token, "password": password])
        XCTAssertEqual(joined.status, 201, joined.text)
        let memberId = try joined.decode(AccountSessionBody.self).account.id
        // Something on every page: an older coupon, a webhook endpoint.
        _ = try await client.json("POST", "/v1/coupons", ["code": "OLD-" + UUID().uuidString.prefix(6), "kind": "freePeriod",
                                                          "duration": ["unit": "week", "count": 1]], token: Self.stack.adminKey)
        _ = try await client.json("POST", "/v1/webhooks", ["url": "http://127.0.0.1:9/redeem-hooks", "events": ["coupon.redeemed"]], token: Self.stack.adminKey)

        let code = "DASH-" + UUID().uuidString.prefix(6)
        let out = try Subprocess.run("/usr/bin/python3", [Project.root.appendingPathComponent("Tests/Browser/dashboard_flow.py").path,
                                                          Self.stack.gateway.absoluteString, email, password, code, output.path])
        let r: Flow
        do {
            r = try JSONDecoder().decode(
                Flow.self, from: Data((out.split(separator: "\n").last.map(String.init) ?? "").utf8))
        } catch { throw TestFailure("\(error): \(out)") }
        XCTAssertEqual(r.ok, true, "\(r)")
        XCTAssertEqual(r.labelled, true, "every input and select has a label")
        XCTAssertEqual(r.who, email)
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
        let audit = r.auditFirst ?? []
        XCTAssertEqual(audit[safe: 1], "coupon.createCodes", "the last change: the codes made on the coupon page")
        XCTAssertEqual(audit[safe: 0], "member " + memberId, "the dashboard's change is audited with the member as actor")
        for page in ["signin", "coupons", "new-store-limit", "new-valid", "coupon-new", "coupon-redeemed", "coupon-390", "webhooks", "keys",
                     "members", "audit", "test-mode"] {
            XCTAssertTrue(FileManager.default.fileExists(atPath: output.appendingPathComponent("dashboard-\(page).png").path), page)
        }
    }

    /// A member with TOTP signs in on the dashboard: the page asks for the code when the server
    /// answers `totpRequired`, and signs in with it (Tests/Browser/dashboard_totp.py).
    func testAMemberWithTOTPSignsInWithTheirCode() async throws {
        let client = Self.stack.client
        let email = "totp-\(UUID().uuidString.prefix(8).lowercased())@example.com", password = "a long dashboard passphrase"
        let invited = try await client.json("POST", "/v1/members", ["email": email, "role": "readonly"], token: Self.stack.adminKey)
        let token = try XCTUnwrap(try invited.json()["token"] as? String)
        let joined = try await client.json("POST", "/v1/members/accept", ["token": token, "password": password])
        XCTAssertEqual(joined.status, 201, joined.text)
        let session = try XCTUnwrap((try joined.json()["session"] as? [String: Any])?["accessToken"] as? String)
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
        XCTAssertFalse(script.text.contains("localStorage") || script.text.contains("sessionStorage") || script.text.contains("document.cookie"),
                       "tokens stay in memory")
    }
}

/// What `POST /v1/members` answers: the invitation's one-time token.
private struct Invitation: Decodable { let token: String? }

/// What `Tests/Browser/dashboard_flow.py` prints.
private struct Flow: Decodable {
    let ok: Bool
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
}

private extension Array {
    subscript(safe i: Int) -> Element? { indices.contains(i) ? self[i] : nil }
}
