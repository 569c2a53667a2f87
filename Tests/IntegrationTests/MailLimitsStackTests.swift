import Foundation
import TestSupport
import XCTest

/// Verification and reset mail is limited per email address and per client address in the
/// database (docs/security.md, "Mail"), so two gateways share one budget and concurrent requests
/// never pass it. The gateways' own in-memory limits are set high here so only the database's
/// decide; the test's client stands for a trusted proxy, so each test names its own client address.
final class MailLimitsStackTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var sink: SMTPSink!
    nonisolated(unsafe) static var gateways: [HTTPClient] = []

    override class func startSuite() throws {
        sink = try SMTPSink()
        stack = try Stack(environment: [
            "REDEEM_SMTP_URL": "smtp+insecure://127.0.0.1:\(sink.port)", "REDEEM_MAIL_FROM": "no-reply@redeem.test",
            "REDEEM_RATE_LIMITS": "on", "REDEEM_LIMIT_AUTH_PER_MINUTE": "10000", "REDEEM_LIMIT_SIGNUP_PER_MINUTE": "10000",
            "REDEEM_TRUSTED_PROXIES": "127.0.0.1/32",
        ])
        let ports = try Project.freePorts(2)
        try stack.startService("gateway", overrides: ["REDEEM_HTTP_PORT": String(ports[0]), "REDEEM_GATEWAY_HTTP_PORT": String(ports[1])])
        gateways = [stack.client, HTTPClient(base: URL(string: "http://127.0.0.1:\(ports[0])")!, maxConnections: 64)]
        secondOps = "http://127.0.0.1:\(ports[1])"
    }

    nonisolated(unsafe) static var secondOps = ""

    override func setUp() async throws {
        try await super.setUp()
        let ops = HTTPClient(base: URL(string: Self.secondOps)!)
        let ready = try await Self.stack.eventually(60) { try await ops.get("/backends").status == 200 }
        XCTAssertTrue(ready, "the second gateway is ready")
    }

    override class func stopSuite() {
        stack?.stop()
        sink?.stop()
    }

    static func client() -> String { "198.51.100.\(Int.random(in: 1...254))" }
    static func email() -> String { "limits-\(UUID().uuidString.prefix(8))@example.com" }

    /// `n` requests at once, alternating between the two gateways.
    func acrossGateways(_ n: Int, _ request: @escaping @Sendable (HTTPClient, Int) async throws -> HTTPClient.Response) async throws -> [HTTPClient.Response] {
        let gateways = Self.gateways
        return try await withThrowingTaskGroup(of: HTTPClient.Response.self) { group in
            for i in 0..<n { group.addTask { try await request(gateways[i % 2], i) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    static func reset(_ gateway: HTTPClient, _ email: String, from client: String) async throws -> HTTPClient.Response {
        try await gateway.json("POST", "/v1/sessions/password/reset", ["email": email], headers: ["X-Forwarded-For": client])
    }

    /// 12 reset requests for one email at once, through two gateways, each from its own client:
    /// exactly 5 (the hour's budget) are taken and 5 mails sent; the rest are 429 with the wait in
    /// `Retry-After`. An email no account has runs out alike, so the limit tells nothing.
    func testResetMailPerEmailIsOneBudgetAcrossGateways() async throws {
        let email = Self.email()
        let made = try await Self.gateways[0].json("POST", "/v1/accounts", ["email": email, "password": "correct horse battery"])
        XCTAssertEqual(made.status, 201, made.text)
        for target in [email, Self.email()] {
            let answers = try await acrossGateways(12) { gateway, _ in try await Self.reset(gateway, target, from: Self.client()) }
            XCTAssertEqual(answers.filter { $0.status == 202 }.count, 5, "\(target): \(answers.map(\.status))")
            let limited = answers.filter { $0.status == 429 }
            XCTAssertEqual(limited.count, 7)
            for r in limited {
                XCTAssertEqual(r.errorCode, "rateLimited")
                // The next of 5 an hour comes within 12 minutes.
                XCTAssertTrue((1...720).contains(Int(r.header("Retry-After") ?? "") ?? 0), r.header("Retry-After") ?? "none")
            }
        }
        let sent = try await Self.stack.eventually(20) { Self.sink.messages(to: email).count >= 5 }
        XCTAssertTrue(sent)
        try await Task.sleep(for: .milliseconds(500))
        XCTAssertEqual(Self.sink.messages(to: email).count, 5, "exactly the budget was mailed")
    }

    /// One client address asks for mail to 25 addresses: 20 an hour go out, then 429; another
    /// client is not held back.
    func testMailPerClientAddressIsLimitedAcrossGateways() async throws {
        let client = Self.client()
        let answers = try await acrossGateways(25) { gateway, _ in try await Self.reset(gateway, Self.email(), from: client) }
        XCTAssertEqual(answers.filter { $0.status == 202 }.count, 20, "\(answers.map(\.status))")
        XCTAssertEqual(answers.filter { $0.status == 429 }.count, 5)
        let other = try await Self.reset(Self.gateways[1], Self.email(), from: "203.0.113.\(Int.random(in: 1...254))")
        XCTAssertEqual(other.status, 202, other.text)
    }

    /// Verification mail draws on the account's email budget too.
    func testVerificationMailIsLimitedPerEmail() async throws {
        let email = Self.email()
        let made = try await Self.gateways[0].json("POST", "/v1/accounts", ["email": email, "password": "correct horse battery"])
        let token = try XCTUnwrap((try made.json()["session"] as? [String: Any])?["accessToken"] as? String)
        let answers = try await acrossGateways(8) { gateway, _ in
            try await gateway.json("POST", "/v1/me/email/verify", [:], token: token, headers: ["X-Forwarded-For": Self.client()])
        }
        XCTAssertEqual(answers.filter { $0.status == 202 }.count, 5, "\(answers.map(\.status))")
        XCTAssertEqual(answers.filter { $0.status == 429 }.count, 3)
        let reset = try await Self.reset(Self.gateways[1], email, from: Self.client())
        XCTAssertEqual(reset.status, 429, "the same mailbox's budget is spent")
    }
}
