import Core
import Foundation
import TestSupport
import XCTest

/// Isolation between apps on every route a key may call (docs/apps.md): app A's objects are
/// made, then app B's admin key calls every operation of `/openapi.json` that takes the
/// `Redeem-Mode` header (a key route), with A's codes and ids in its path. Each route must answer 404 for A's
/// object, or a body without any of A's codes and ids; afterwards A's objects read exactly as
/// before. A route added later without an entry for its path parameters fails this test, so a new
/// route cannot skip the check.
final class AppIsolationTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!

    nonisolated(unsafe) static var minter: TokenMinter!

    override class func startSuite() throws {
        // Webhook endpoints on loopback; A's endpoint listens for an event these tests never cause.
        stack = try Stack(environment: ["REDEEM_WEBHOOK_ALLOW_PRIVATE": "1"])
        minter = try stack.minter()
    }
    override class func stopSuite() { stack?.stop() }

    var client: HTTPClient { Self.stack.client }

    /// The routes only a deployment admin calls: another app's admin is refused there.
    /// The routes only a deployment admin calls (the apps, and the members' settings, which are the
    /// whole deployment's): another app's admin is refused there.
    static let deploymentRoutes: Set<String> = ["/v1/apps", "/v1/members/settings"]

    /// App A's objects in one mode: what B must never see or change.
    struct Fixtures {
        var code = "", productId = "", redemption = "", webhook = "", webhookURL = "", apiKey = ""
        var member = "", memberEmail = "", invite = "", appUserId = ""

        /// The strings no answer to app B may hold.
        var secrets: [String] {
            [code, productId, redemption, webhook, webhookURL, apiKey, member, memberEmail, invite].filter {
                !$0.isEmpty
            }
        }
    }

    func send(
        _ method: String, _ path: String, _ body: [String: Any]? = nil, token: String
    ) async throws
        -> HTTPClient.Response
    {
        let headers = ["Authorization": "Bearer \(token)"]
        if let body { return try await client.json(method, path, body, headers: headers) }
        return try await client.send(method, path, headers: headers)
    }

    func made(
        _ r: HTTPClient.Response, _ field: String = "id", file: StaticString = #filePath, line: UInt = #line
    )
        throws -> String
    {
        XCTAssertTrue([200, 201].contains(r.status), r.text, file: file, line: line)
        return try XCTUnwrap(try r.json()[field] as? String, r.text, file: file, line: line)
    }

    /// A's objects in `mode`, made by the default app's admin key of that mode.
    func fixtures(admin: String, mode: String) async throws -> Fixtures {
        var f = Fixtures()
        let tag = UUID().uuidString.prefix(8).uppercased()
        f.code = "ISO-\(mode.uppercased())-\(tag)"
        f.productId = "iso.\(mode).\(tag.lowercased())"
        _ = try made(
            try await send("POST", "/v1/plans", ["productId": f.productId, "name": "Isolated"], token: admin),
            "productId")
        _ = try made(
            try await send(
                "POST", "/v1/coupons",
                ["code": f.code, "kind": "freePeriod", "duration": ["unit": "day", "count": 7]], token: admin),
            "code")
        let user = try Self.minter.user()
        f.appUserId = user.appUserId
        let environment = mode == "test" ? "sandbox" : "production"
        f.redemption = try made(
            try await client.json(
                "POST", "/v1/redemptions", ["code": f.code, "platform": "web", "environment": environment],
                token: user.token),
            "redemptionId")
        f.webhookURL = "http://127.0.0.1:9/iso-\(tag.lowercased())"
        f.webhook = try made(
            try await send("POST", "/v1/webhooks", ["url": f.webhookURL, "events": ["coupon.exhausted"]], token: admin))
        f.apiKey = try made(
            try await send("POST", "/v1/api-keys", ["name": "iso \(tag)", "role": "readonly"], token: admin))
        if mode == "live" {
            f.memberEmail = "iso-\(tag.lowercased())@example.com"
            let invited = try await send(
                "POST", "/v1/members", ["email": f.memberEmail, "role": "readonly"], token: admin)
            let token = try made(invited, "token")
            let accepted = try await client.json(
                "POST", "/v1/members/accept", ["token": token, "password": "a long operator passphrase"])
            XCTAssertEqual(accepted.status, 201, accepted.text)
            let members = try await send("GET", "/v1/members?limit=100", token: admin)
            let listed = try XCTUnwrap(try members.json()["data"] as? [[String: Any]], members.text)
            f.member = try XCTUnwrap(listed.first { ($0["email"] as? String) == f.memberEmail }?["id"] as? String)
            let pending = try await send(
                "POST", "/v1/members", ["email": "iso-pending-\(tag.lowercased())@example.com", "role": "support"],
                token: admin)
            f.invite = try made(pending)
        }
        return f
    }

    /// What A's admin reads of A's objects: it must not change while B calls every route.
    func snapshot(_ f: Fixtures, admin: String) async throws -> [String: String] {
        var paths = [
            "/v1/coupons/\(f.code)", "/v1/coupons/\(f.code)/redemptions", "/v1/plans/\(f.productId)",
            "/v1/redemptions/\(f.redemption)", "/v1/webhooks?limit=100", "/v1/api-keys?limit=100"
        ]
        if !f.member.isEmpty {
            paths += ["/v1/members?limit=100", "/v1/members/invites?limit=100", "/v1/members/settings"]
        }
        var out: [String: String] = [:]
        for path in paths {
            let r = try await send("GET", path, token: admin)
            XCTAssertEqual(r.status, 200, "\(path): \(r.text)")
            out[path] = r.text
        }
        return out
    }

    /// The value of each path parameter: A's object, or for a parameter naming nothing of A's, a
    /// fresh id. A parameter missing here fails the test.
    func value(of parameter: String, in template: String, _ f: Fixtures) -> String? {
        switch (parameter, template) {
        case ("code", _): f.code
        case ("productId", _): f.productId
        case ("appUserId", _): f.appUserId
        case ("deliveryId", _): UUID().uuidString
        case ("id", let t) where t.hasPrefix("/v1/apps/"): DefaultApp.id.uuidString
        case ("provider", _): "revenuecat"
        case ("id", let t) where t.hasPrefix("/v1/api-keys/"): f.apiKey
        case ("id", let t) where t.hasPrefix("/v1/webhooks/"): f.webhook
        case ("id", let t) where t.hasPrefix("/v1/members/invites/"): f.invite.isEmpty ? UUID().uuidString : f.invite
        case ("id", let t) where t.hasPrefix("/v1/members/"): f.member.isEmpty ? UUID().uuidString : f.member
        case ("id", let t) where t.hasPrefix("/v1/redemptions/") || t.hasPrefix("/v1/test_helpers/redemptions/"):
            f.redemption
        case ("id", let t) where t.hasPrefix("/v1/test_helpers/store_offers/"): "sim_\(UUID().uuidString)"
        default: nil
        }
    }

    /// A well-formed body for each operation that takes one, so that the answer is about A's
    /// object and not about the body.
    func body(_ method: String, _ template: String, _ f: Fixtures) -> [String: Any]? {
        switch "\(method) \(template)" {
        // B makes its own objects under other codes: the same code in B would be B's (AppsTests).
        case "POST /v1/coupons":
            [
                "code": "ISO-B-\(UUID().uuidString.prefix(8))", "kind": "freePeriod",
                "duration": ["unit": "day", "count": 3]
            ]
        case "PATCH /v1/coupons/{code}": ["maxRedemptions": 1]
        case "POST /v1/coupons/{code}/codes": ["count": 2]
        case "POST /v1/plans": ["productId": "iso.b.\(UUID().uuidString.prefix(8).lowercased())", "name": "B's plan"]
        case "PATCH /v1/plans/{productId}": ["name": "changed by B"]
        case "POST /v1/webhooks": ["url": "http://127.0.0.1:9/b", "events": ["coupon.exhausted"]]
        case "PATCH /v1/webhooks/{id}": ["enabled": false]
        case "POST /v1/api-keys": ["name": "B's key", "role": "readonly"]
        case "POST /v1/members":
            ["email": "iso-b-\(UUID().uuidString.prefix(6).lowercased())@example.com", "role": "admin"]
        case "PATCH /v1/members/{id}": ["role": "admin"]
        case "PATCH /v1/members/settings": ["requireTotp": true]
        case "POST /v1/redemptions/{id}/purchase":
            ["pricePaid": ["amount": "1.99", "currency": "USD"], "storeTransactionId": "2000000000000001"]
        case "POST /v1/test_helpers/redemptions/{id}/purchase": ["pricePaid": ["amount": "1.99", "currency": "USD"]]
        case "POST /v1/apps": ["name": "B's app"]
        default: ["POST", "PATCH", "PUT"].contains(method) ? [:] : nil
        }
    }

    struct Document: Decodable {
        struct Operation: Decodable {
            struct Parameter: Decodable {
                let ref: String?
                enum CodingKeys: String, CodingKey { case ref = "$ref" }
            }
            let parameters: [Parameter]?
        }
        let paths: [String: [String: Operation]]
    }

    /// Every operation that takes `Redeem-Mode` (and `Redeem-App`), i.e. every route a key may call.
    func keyOperations() async throws -> [(method: String, template: String)] {
        let paths = try await client.get("/openapi.json").decode(Document.self).paths
        var out: [(String, String)] = []
        for (template, operations) in paths {
            for (method, operation) in operations
            where (operation.parameters ?? []).contains(where: { $0.ref?.hasSuffix("/RedeemMode") == true }) {
                out.append((method.uppercased(), template))
            }
        }
        XCTAssertGreaterThan(out.count, 30, "the document lists the key routes")
        return out.sorted { ($0.1, $0.0) < ($1.1, $1.0) }
    }

    func assertNoLeak(
        _ r: HTTPClient.Response, _ f: Fixtures, _ name: String, file: StaticString = #filePath, line: UInt = #line
    ) {
        let text = r.text.lowercased()
        for secret in f.secrets where text.contains(secret.lowercased()) {
            XCTFail("\(name) answered \(r.status) with A's \(secret): \(r.text.prefix(300))", file: file, line: line)
        }
        XCTAssertLessThan(r.status, 500, "\(name): \(r.text.prefix(300))", file: file, line: line)
    }

    /// B's key calls every key route with A's objects.
    func sweep(_ f: Fixtures, as tokenB: String, mode: String) async throws {
        for (method, template) in try await keyOperations() {
            let name = "\(mode) \(method) \(template)"
            if template == "/mcp" { continue }  // checked tool by tool in `sweepMCP`
            var path = template
            var namesA = false
            for match in template.matches(of: #/\{([A-Za-z]+)\}/#) {
                let parameter = String(match.1)
                guard let v = value(of: parameter, in: template, f) else {
                    XCTFail("\(name): no value for {\(parameter)}; add one to `value(of:in:_:)`")
                    continue
                }
                namesA = namesA || f.secrets.contains(v) || v == DefaultApp.id.uuidString
                path = path.replacingOccurrences(of: "{\(parameter)}", with: v)
            }
            if template == "/v1/customers" { path += "?appUserId=\(f.appUserId)" }
            let r = try await send(method, path, body(method, template, f), token: tokenB)
            assertNoLeak(r, f, name)
            // Members are managed with live keys, and the test helpers take test keys only: the
            // other mode's key is refused before anything is looked up.
            let otherModesRoute =
                mode == "test" ? template.hasPrefix("/v1/members") : template.hasPrefix("/v1/test_helpers/")
            if Self.deploymentRoutes.contains(template) || otherModesRoute {
                XCTAssertEqual(r.status, 403, "\(name) is refused to this key: \(r.text.prefix(200))")
            } else if template == "/v1/customers/{appUserId}" {
                // Accounts are shared: B may find the account (without A's records), or not at all.
                XCTAssertTrue([200, 404].contains(r.status), "\(name): \(r.text.prefix(200))")
            } else if namesA {
                XCTAssertEqual(r.status, 404, "\(name) answered \(r.status) for A's object: \(r.text.prefix(200))")
            } else if method == "GET" {
                XCTAssertEqual(r.status, 200, "\(name): \(r.text.prefix(200))")
            }
        }
    }

    /// MCP in B's key: every tool that names a coupon or a redemption finds none of A's.
    func sweepMCP(_ f: Fixtures, as tokenB: String) async throws {
        let calls: [(String, [String: Any])] = [
            ("list_coupons", [:]), ("get_coupon", ["code": f.code]), ("list_redemptions", ["code": f.code]),
            ("get_redemption", ["id": f.redemption]), ("list_store_offers", ["code": f.code]),
            ("export_redemptions_csv", ["code": f.code]), ("update_coupon", ["code": f.code, "maxRedemptions": 1]),
            ("create_codes", ["code": f.code, "count": 2]), ("deactivate_coupon", ["code": f.code, "active": false])
        ]
        for (tool, arguments) in calls {
            let body: [String: Any] = [
                "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": ["name": tool, "arguments": arguments]
            ]
            let r = try await client.send(
                "POST", "/mcp", body: try JSONSerialization.data(withJSONObject: body),
                headers: [
                    "Authorization": "Bearer \(tokenB)", "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream"
                ])
            XCTAssertEqual(r.status, 200, "MCP \(tool): \(r.text.prefix(200))")
            assertNoLeak(r, f, "MCP \(tool)")
            if tool != "list_coupons" {
                let result = try r.json()["result"] as? [String: Any]
                XCTAssertEqual(result?["isError"] as? Bool, true, "MCP \(tool) found A's object: \(r.text.prefix(300))")
            }
        }
    }

    func isolation(mode: String) async throws {
        let bootstrap = Self.stack.adminKey
        let adminA: String
        if mode == "live" {
            adminA = bootstrap
        } else {
            adminA = try made(
                try await send(
                    "POST", "/v1/api-keys", ["name": "A test admin", "role": "admin", "mode": "test"],
                    token: bootstrap), "key")
        }
        let f = try await fixtures(admin: adminA, mode: mode)
        let before = try await snapshot(f, admin: adminA)

        let app = try made(try await send("POST", "/v1/apps", ["name": "App B \(mode)"], token: bootstrap))
        let keyB = try await client.json(
            "POST", "/v1/api-keys", ["name": "B admin", "role": "admin", "mode": mode],
            headers: ["Authorization": "Bearer \(bootstrap)", "Redeem-App": app])
        let adminB = try made(keyB, "key")

        try await sweep(f, as: adminB, mode: mode)
        try await sweepMCP(f, as: adminB)

        let after = try await snapshot(f, admin: adminA)
        for (path, text) in before {
            XCTAssertEqual(after[path], text, "B changed A's \(path)")
        }
    }

    func testAnotherAppsLiveKeyReadsAndChangesNothingOfThisAppOnAnyRoute() async throws {
        try await isolation(mode: "live")
    }

    func testAnotherAppsTestKeyReadsAndChangesNothingOfThisAppOnAnyRoute() async throws {
        try await isolation(mode: "test")
    }
}
