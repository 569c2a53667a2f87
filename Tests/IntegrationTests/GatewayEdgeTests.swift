import Core
import Foundation
import Runtime
import Synchronization
import TestSupport
import XCTest

/// The gateway as people meet it: abuse limits with real concurrent
/// clients, security headers, the page never reflecting its URL, input hardening and metrics.
final class GatewayEdgeTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var minter: TokenMinter!

    override class func startSuite() throws {
        stack = try Stack(environment: [
            "REDEEM_RATE_LIMITS": "on", "REDEEM_LIMIT_AUTH_PER_MINUTE": "5", "REDEEM_LIMIT_SIGNUP_PER_MINUTE": "3",
            "REDEEM_LIMIT_CODES_PER_MINUTE": "20", "REDEEM_LOCKOUT_INVALID_CODES": "5", "REDEEM_LOCKOUT_SECONDS": "60",
            // The tests' client stands for a proxy: each test's requests name a client address of
            // their own, so that no test's limits or lock-out reach another.
            "REDEEM_TRUSTED_PROXIES": "127.0.0.1/32",
            "REDEEM_CORS_ORIGINS": "https://app.example.com, http://localhost:5173",
        ])
        minter = try stack.minter()
    }

    override class func stopSuite() {
        stack?.stop()
    }

    /// This test's client: behind the trusted proxy, at an address no other test uses.
    lazy var client = HTTPClient(base: Self.stack.gateway, headers: ["X-Forwarded-For": Self.address()])

    static let addresses = Mutex(0)
    /// A client address (TEST-NET-2) not given out before.
    static func address() -> String {
        let n = addresses.withLock {
            $0 += 1
            return $0
        }
        return "198.51.100.\(1 + n % 254)"
    }

    func concurrently(_ n: Int, _ body: @escaping @Sendable (Int) async throws -> HTTPClient.Response) async throws -> [HTTPClient.Response] {
        try await withThrowingTaskGroup(of: HTTPClient.Response.self) { group in
            for i in 0..<n { group.addTask { try await body(i) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    func testSignInAndSignUpAreRateLimitedWithRetryAfter() async throws {
        let client = self.client
        let email = "limited-\(UUID().uuidString.prefix(6))@example.com"
        let attempts = try await concurrently(12) { _ in try await client.json("POST", "/v1/sessions", ["email": email, "password": "wrong wrong wrong"]) }
        let limited = attempts.filter { $0.status == 429 }
        XCTAssertEqual(attempts.filter { $0.status == 401 }.count, 5, "\(attempts.map(\.status))")
        XCTAssertEqual(limited.count, 7)
        XCTAssertTrue(limited.allSatisfy { $0.errorCode == "rateLimited" && Int($0.header("Retry-After") ?? "") ?? 0 >= 1 })
        let signUps = try await concurrently(6) { i in
            try await client.json("POST", "/v1/accounts", ["email": "new-\(i)-\(UUID().uuidString.prefix(6))@example.com", "password": "correct horse battery"])
        }
        XCTAssertEqual(signUps.filter { $0.status == 201 }.count, 3, "\(signUps.map(\.status))")
        XCTAssertEqual(signUps.filter { $0.status == 429 }.count, 3)
    }

    func testValidateAndRedeemAreRateLimitedPerAccount() async throws {
        let code = "EDGE-" + UUID().uuidString.prefix(6)
        let made = try await client.json("POST", "/v1/coupons", ["code": code, "kind": "freePeriod", "duration": ["unit": "day", "count": 1]], token: Self.stack.adminKey)
        XCTAssertEqual(made.status, 201)
        let u = try Self.minter.user()
        let client = self.client
        let answers = try await concurrently(30) { _ in try await client.json("POST", "/v1/coupons/validate", ["code": code], token: u.token) }
        XCTAssertEqual(answers.filter { $0.status == 200 }.count, 20, "\(answers.map(\.status))")
        XCTAssertEqual(answers.filter { $0.status == 429 }.count, 10)
        // Another account still has its own budget.
        let other = try await client.json("POST", "/v1/coupons/validate", ["code": code], token: try Self.minter.user().token)
        XCTAssertEqual(other.status, 200)
    }

    /// A listed web app may call the API from a browser (CORS); another origin gets no CORS header.
    func testCORSAnswersListedOriginsOnly() async throws {
        let preflight = try await client.send(
            "OPTIONS", "/v1/redemptions",
            headers: ["Origin": "https://app.example.com", "Access-Control-Request-Method": "POST",
                      "Access-Control-Request-Headers": "authorization, content-type"])
        XCTAssertEqual(preflight.status, 204)
        XCTAssertEqual(preflight.header("Access-Control-Allow-Origin"), "https://app.example.com")
        let methods = try XCTUnwrap(preflight.header("Access-Control-Allow-Methods"))
        XCTAssertTrue(methods.contains("POST") && methods.contains("PATCH"))
        let headers = try XCTUnwrap(preflight.header("Access-Control-Allow-Headers")).lowercased()
        XCTAssertTrue(
            headers.contains("authorization") && headers.contains("content-type") && headers.contains("idempotency-key"))
        XCTAssertNil(preflight.header("Access-Control-Allow-Credentials"))

        let get = try await client.send("GET", "/v1/me", headers: ["Origin": "http://localhost:5173"])
        XCTAssertEqual(get.status, 401)
        let problem = try XCTUnwrap(try get.json()["error"] as? [String: Any])
        XCTAssertEqual(problem["type"] as? String, "authentication")
        XCTAssertEqual((problem["docUrl"] as? String).map { $0.hasSuffix("docs/errors.md#notidentified") }, true)
        XCTAssertEqual(get.header("Access-Control-Allow-Origin"), "http://localhost:5173")
        XCTAssertTrue(get.header("Access-Control-Expose-Headers")?.contains("X-Request-Id") == true)

        for origin in ["https://evil.example.com", "https://app.example.com.evil.example", "null"] {
            let other = try await client.send(
                "OPTIONS", "/v1/redemptions", headers: ["Origin": origin, "Access-Control-Request-Method": "POST"])
            XCTAssertNil(other.header("Access-Control-Allow-Origin"), origin)
            let plain = try await client.send("GET", "/v1/me", headers: ["Origin": origin])
            XCTAssertNil(plain.header("Access-Control-Allow-Origin"), origin)
        }
        // An OPTIONS that is no preflight is routed as before.
        let notPreflight = try await client.send("OPTIONS", "/v1/redemptions")
        XCTAssertEqual(notPreflight.status, 405)
    }

    func testPageHeadersAndNoReflection() async throws {
        let page = try await client.get("/redeem?code=%3Cscript%3Ealert(1)%3C%2Fscript%3E")
        XCTAssertEqual(page.status, 200)
        XCTAssertEqual(page.header("Content-Type"), "text/html; charset=utf-8")
        let csp = try XCTUnwrap(page.header("Content-Security-Policy"))
        XCTAssertTrue(csp.contains("script-src 'self'"))
        XCTAssertFalse(csp.contains("unsafe-inline"))
        XCTAssertTrue(csp.contains("frame-ancestors 'none'"))
        XCTAssertEqual(page.header("X-Content-Type-Options"), "nosniff")
        XCTAssertEqual(page.header("Referrer-Policy"), "no-referrer")
        XCTAssertEqual(page.header("X-Frame-Options"), "DENY")
        XCTAssertEqual(page.header("Redeem-Version"), Build.version, "every answer names the release")
        XCTAssertFalse(page.text.contains("alert(1)"), "the URL is never reflected into the document")
        XCTAssertFalse(page.text.contains("http://") || page.text.contains("https://"), "no external assets")
        // Every script tag loads a file; none is inline.
        let scripts = page.text.components(separatedBy: "<script").dropFirst()
        XCTAssertFalse(scripts.isEmpty)
        XCTAssertTrue(scripts.allSatisfy { $0.hasPrefix(" type=\"module\" src=\"/redeem/app.js\"") })
        for asset in ["/redeem/app.js", "/redeem/client.js", "/redeem/app.css", "/openapi.json"] {
            let r = try await client.get(asset)
            XCTAssertEqual(r.status, 200, asset)
        }
        let js = try await client.get("/redeem/app.js").text
        XCTAssertFalse(js.contains("innerHTML"), "responses and the URL are only ever set as text")
    }

    func testMalformedInputIsAlwaysA4xxInTheErrorShape() async throws {
        let deep = String(repeating: "[", count: 40) + String(repeating: "]", count: 40)
        let cases: [(Data, String, Int, String)] = [
            (Data("{".utf8), "application/json", 400, "malformedJson"),
            (Data(#"{"email": "#.utf8), "application/json", 400, "malformedJson"),
            (Data(#"{"x": \#(deep)}"#.utf8), "application/json", 400, "malformedJson"),
            (Data("[1,2]".utf8), "application/json", 422, "invalid"),
            (Data("\"str\"".utf8), "application/json", 422, "invalid"),
            (Data(#"{"email":"a@b.co"}"#.utf8), "text/plain", 415, "unsupportedMediaType"),
            (Data(repeating: 0x20, count: (1 << 20) + 10), "application/json", 413, "tooLarge"),
            (Data([0xff, 0xfe, 0x00]), "application/json", 400, "malformedJson"),
        ]
        for (body, type, status, code) in cases {
            let r = try await client.send("POST", "/v1/sessions/refresh", body: body, headers: ["Content-Type": type])
            XCTAssertEqual(r.status, status, "\(code) \(r.text.prefix(200))")
            XCTAssertEqual(r.errorCode, code)
        }
        let unknownFields = try await client.json("POST", "/v1/sessions/refresh", ["refreshToken": "rt_x", "surprise": [1, 2, 3]])
        XCTAssertEqual(unknownFields.status, 401, "unknown fields are ignored")
        let badUUID = try await client.get("/v1/redemptions/not-a-uuid", token: try Self.minter.user().token)
        XCTAssertEqual(badUUID.status, 404)
    }

    func testMetricsUseRouteTemplatesNeverRawPaths() async throws {
        let u = try Self.minter.user()
        _ = try await client.get("/v1/redemptions/\(UUID().uuidString)", token: u.token)
        let text = try await Self.stack.ops.get("/metrics").text
        XCTAssertTrue(text.contains("redeem_http_requests_total{method=\"GET\",route=\"/v1/redemptions/{id}\",status=\"404\"}"), text)
        XCTAssertTrue(text.contains("redeem_http_request_duration_seconds_bucket{method=\"GET\",route=\"/v1/redemptions/{id}\""))
        XCTAssertTrue(text.contains("redeem_bus_request_duration_seconds_count{service=\"coupons\",type=\"coupons.getRedemption\"}"))
        XCTAssertFalse(text.contains("/v1/redemptions/" + String(UUID().uuidString.prefix(4))))
        let coupons = try Self.stack.wiring()["REDEEM_COUPONS_HTTP_PORT"]!
        let internalMetrics = try await HTTPClient(base: URL(string: "http://127.0.0.1:\(coupons)")!).get("/metrics").text
        XCTAssertTrue(internalMetrics.contains("redeem_outbox_depth"))
    }

    /// Behind a trusted proxy the lock-out keys on the client the proxy names: one client's
    /// guesses lock that client out, not everyone behind the proxy.
    func testBehindATrustedProxyTheLockOutIsTheForwardedClients() async throws {
        func validate(_ code: String, _ u: TokenMinter.User, from address: String) async throws -> HTTPClient.Response {
            try await client.json("POST", "/v1/coupons/validate", ["code": code], token: u.token, headers: ["X-Forwarded-For": address])
        }
        let guesser = try Self.minter.user()
        for i in 0..<5 {
            let r = try await validate("GUESS-\(i)-\(UUID().uuidString.prefix(4))", guesser, from: "192.0.2.1")
            XCTAssertEqual(try r.decode(ValidationBody.self).reason, "notFound", r.text)
        }
        let locked = try await validate("ANY-CODE", guesser, from: "192.0.2.1")
        XCTAssertEqual(locked.status, 429)
        // Someone else behind the same proxy is not locked out; a new account at the guesser's address is.
        let other = try await validate("ANY-CODE", try Self.minter.user(), from: "192.0.2.2")
        XCTAssertEqual(other.status, 200, other.text)
        let sameAddress = try await validate("ANY-CODE", try Self.minter.user(), from: "203.0.113.5, 192.0.2.1")
        XCTAssertEqual(sameAddress.status, 429, "the hop the proxy saw, not the one the client wrote")
        // A proxy that sets X-Forwarded-For passes a client's own `Forwarded` on untouched: only
        // the header the operator names (REDEEM_TRUSTED_PROXY_HEADER) is read, so a forged one
        // does not move the guesser to a fresh address.
        let forged = try await client.json("POST", "/v1/coupons/validate", ["code": "ANY-CODE"], token: try Self.minter.user().token,
                                           headers: ["X-Forwarded-For": "192.0.2.1", "Forwarded": "for=198.51.100.77"])
        XCTAssertEqual(forged.status, 429, "the client's own Forwarded header is not read: \(forged.text)")
    }

    func testRepeatedInvalidCodesLockTheCallerOut() async throws {
        let u = try Self.minter.user()
        for i in 0..<5 {
            let r = try await client.json("POST", "/v1/coupons/validate", ["code": "GUESS-\(i)-\(UUID().uuidString.prefix(4))"], token: u.token)
            XCTAssertEqual(r.status, 200)
            XCTAssertEqual(try r.decode(ValidationBody.self).reason, "notFound")
        }
        let locked = try await client.json("POST", "/v1/coupons/validate", ["code": "ANY-CODE"], token: u.token)
        XCTAssertEqual(locked.status, 429)
        XCTAssertEqual(locked.errorCode, "rateLimited")
        XCTAssertGreaterThan(Int(locked.header("Retry-After") ?? "") ?? 0, 30)
        let redeem = try await client.json("POST", "/v1/redemptions", ["code": "ANY-CODE", "platform": "web"], token: u.token)
        XCTAssertEqual(redeem.status, 429, "redeem is locked too")
        // The address is locked as well: guessing from new accounts doesn't get around it.
        let fresh = try await client.json("POST", "/v1/coupons/validate", ["code": "ANY-CODE"], token: try Self.minter.user().token)
        XCTAssertEqual(fresh.status, 429)
    }
}
