import Cryptography
import Foundation
import TestSupport
import XCTest

/// `docker-compose.yml` run for real: docker-compose against podman's API socket, on images built here
/// from Debian packages with this test run's executables (`deploy/compose-test`, `deploy/images`),
/// with two coupons and two grants. The test talks only to 127.0.0.1: the gateway and the fakes'
/// control port are published there. The fakes (RevenueCat and a webhook receiver, `compose-fakes`)
/// run in a container on the stack's network, where grants calls them by name; the test reads what
/// they took over the control port. Skipped, with the reason in one line, where podman cannot run.
final class ComposeStackTests: StackTestCase {
    nonisolated(unsafe) static var runner: Subprocess?
    nonisolated(unsafe) static var directory: URL?
    nonisolated(unsafe) static var skipReason: String?
    nonisolated(unsafe) static var gateway: HTTPClient!
    nonisolated(unsafe) static var fakes: HTTPClient!
    nonisolated(unsafe) static var adminKey = ""
    nonisolated(unsafe) static var revenueCatKey = ""

    static var script: String { Project.root.appendingPathComponent("deploy/compose-test").path }

    static func hex(_ count: Int) -> String {
        (0..<count).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    override class func startSuite() throws {
        let dir = try Project.temporaryDirectory("compose")
        directory = dir
        let log = dir.appendingPathComponent("compose-test.log").path
        // Made for this run only, and given to docker-compose through its environment.
        adminKey = "sk_live_" + hex(24)
        revenueCatKey = "sk_rc_compose_" + hex(12)
        var environment = ProcessInfo.processInfo.environment
        environment["REDEEM_ADMIN_KEY"] = adminKey
        environment["REDEEM_REVENUECAT_KEY"] = revenueCatKey
        environment["REDEEM_RATE_LIMITS"] = "off"
        environment["REDEEM_BUS_RESOLVE_MS"] = "500"
        environment["COMPOSE_TEST_PARENT_PID"] = String(getpid())
        environment["COMPOSE_TEST_BIN_DIR"] = Project.binDirectory.path
        let started = Date()
        let runner = try Subprocess(script, ["up", dir.path], environment: environment, stdout: log, stderr: log)
        self.runner = runner
        let ready = dir.appendingPathComponent("ready").path
        // From nothing: a Debian base (mmdebstrap), two images, and the stack; minutes, not more.
        let deadline = Date().addingTimeInterval(900)
        while !FileManager.default.fileExists(atPath: ready) {
            if let status = runner.wait(seconds: 0.5) {
                let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                if status == 3 {
                    skipReason =
                        text.split(separator: "\n").last { $0.contains("skipped:") }.map(String.init)
                        ?? "compose-test: skipped: podman cannot run here"
                    print(skipReason!)
                    return
                }
                throw TestFailure("deploy/compose-test exited \(status): \(text.suffix(3000))")
            }
            if Date() > deadline {
                throw TestFailure("the compose stack was not ready within 900 s; \(log) ends: \(tail(log))")
            }
        }
        let values = Dictionary(
            uniqueKeysWithValues: try String(contentsOfFile: ready, encoding: .utf8).split(separator: "\n").compactMap {
                line -> (String, String)? in
                let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
                return parts.count == 2 ? (parts[0], parts[1]) : nil
            })
        gateway = HTTPClient(base: URL(string: try XCTUnwrap(values["GATEWAY_URL"]))!, maxConnections: 128)
        fakes = HTTPClient(base: URL(string: try XCTUnwrap(values["FAKES_URL"]))!)
        print(
            "compose stack ready in \(String(format: "%.1f", Date().timeIntervalSince(started))) s "
                + "(images and stack; deploy/compose-test said ready after \(values["UP_SECONDS"] ?? "?") s)")
    }

    static func tail(_ path: String) -> String {
        String(((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").suffix(3000))
    }

    override class func stopSuite() {
        if let runner {
            let started = Date()
            runner.signal(SIGTERM)
            if runner.wait(seconds: 120) == nil {
                print("compose-test did not stop within 120 s; killing it")
                runner.signal(SIGKILL)
                runner.wait()
                _ = try? Subprocess.run(script, ["cleanup"])
            }
            print("compose stack down in \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
        }
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        if let reason = Self.skipReason { throw XCTSkip(reason) }
    }

    nonisolated(unsafe) static var peersAnswered = false

    /// Healthy containers are not yet a gateway whose bus reaches every peer: once per suite, the
    /// operator routes that go to coupons and grants must answer (60 s at most) before a test
    /// counts their answers. A stack that never does fails here, saying so.
    override func setUp() async throws {
        try await super.setUp()
        // XCTest calls this before `setUpWithError`, which reports a failed start: report it here
        // too, before `gateway` (nil then) is read.
        try SuiteStart.check(Self.self)
        guard Self.skipReason == nil, !Self.peersAnswered else { return }
        let deadline = Date().addingTimeInterval(60)
        var last = ""
        while Date() < deadline {
            let coupons = try await gateway.get("/v1/coupons?limit=1", token: admin)
            let grants = try await gateway.get("/v1/webhooks?limit=1", token: admin)
            if coupons.status == 200 && grants.status == 200 {
                Self.peersAnswered = true
                return
            }
            last = "coupons \(coupons.status), grants \(grants.status): \(coupons.text.prefix(200))"
            try await Task.sleep(for: .milliseconds(500))
        }
        XCTFail("the gateway did not reach coupons and grants within 60 s of a healthy stack; last: \(last)")
    }

    var gateway: HTTPClient { Self.gateway }
    var admin: String { Self.adminKey }

    /// Polls until `check` holds, or `seconds` pass.
    func eventually(_ seconds: Double, _ check: () async throws -> Bool) async throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if (try? await check()) == true { return true }
            try await Task.sleep(for: .milliseconds(250))
        }
        return try await check()
    }

    /// A user signed up through the gateway (as an app does).
    struct User: Sendable {
        let appUserId: String
        let token: String
    }

    func signUp() async throws -> User { try await Self.signUp(gateway) }

    static func signUp(_ gateway: HTTPClient) async throws -> User {
        let email = "compose-\(UUID().uuidString.prefix(12).lowercased())@example.com"
        let body = ["email": email, "password": "correct horse battery \(UUID().uuidString)"]
        for _ in 0..<20 {
            let r = try await gateway.json("POST", "/v1/accounts", body)
            if r.status == 201 {
                let made = try r.decode(AccountSessionBody.self)
                return User(appUserId: try XCTUnwrap(made.account.appUserId), token: made.session.accessToken)
            }
            // A restarted instance's moment of 503 is retried, as an app would.
            XCTAssertTrue(r.status >= 500, "sign-up: \(r.status) \(r.text)")
            try await Task.sleep(for: .milliseconds(500))
        }
        throw TestFailure("sign-up failed 20 times")
    }

    func freePeriod(entitlement: String, cap: Int) async throws -> String {
        let code = "COMPOSE-" + UUID().uuidString.prefix(8).uppercased()
        let r = try await gateway.json(
            "POST", "/v1/coupons",
            [
                "code": code, "kind": "freePeriod", "duration": ["unit": "month", "count": 1], "maxRedemptions": cap,
                "entitlementId": entitlement
            ], token: admin)
        guard r.status == 201 else { throw TestFailure("the coupon was not made: \(r.status) \(r.text)") }
        return code
    }

    /// What the fake RevenueCat took (GET /revenuecat/calls on the fakes' control port).
    struct Call: Decodable {
        let appUserId: String
        let entitlementId: String
        let endTimeMs: Int64?
        let authorization: String?
        let status: Int
    }

    /// What the webhook receiver took.
    struct Delivery: Decodable {
        let id: String
        let timestamp: String
        let signature: String
        let body: String
        var data: Data { Data(base64Encoded: body) ?? Data() }
    }

    func calls() async throws -> [Call] { try await Self.fakes.get("/revenuecat/calls").decode([Call].self) }
    func deliveries() async throws -> [Delivery] {
        try await Self.fakes.get("/webhooks/deliveries").decode([Delivery].self)
    }

    /// Sign up, a coupon, validate, redeem, completion with a free month granted at the fake
    /// RevenueCat (with the run's key), the entitlement read back, and a `coupon.redeemed` webhook
    /// delivered to the fakes container and signed with the endpoint's secret (Standard Webhooks).
    func testSignUpRedeemCompleteAndASignedWebhook() async throws {
        // A 503 `unavailable` with Retry-After is an answer to try again, as a client does (a few
        // times here): grants resolves the URL's host before it stores it, and just after a
        // container restarts podman's DNS can leave a lookup unanswered for seconds; and an
        // instance still migrating answers every request so.
        var hook = try await gateway.json(
            "POST", "/v1/webhooks", ["url": "http://fakes:9002/hooks", "events": ["coupon.redeemed"]], token: admin)
        for _ in 0..<3 where hook.status == 503 {
            print("compose: POST /v1/webhooks answered 503 (\(hook.text)); trying again")
            try await Task.sleep(for: .seconds(1))
            hook = try await gateway.json(
                "POST", "/v1/webhooks", ["url": "http://fakes:9002/hooks", "events": ["coupon.redeemed"]], token: admin)
        }
        XCTAssertEqual(hook.status, 201, hook.text)
        let endpoint = try hook.decode(WebhookEndpointBody.self)
        let secret = try XCTUnwrap(endpoint.secret)

        let user = try await signUp()
        let entitlement = "pro-" + UUID().uuidString.prefix(6).lowercased()
        let code = try await freePeriod(entitlement: entitlement, cap: 10)
        let valid = try await gateway.json(
            "POST", "/v1/coupons/validate", ["code": code, "platform": "web"], token: user.token)
        XCTAssertEqual(valid.status, 200, valid.text)
        XCTAssertEqual(try valid.decode(ValidationBody.self).valid, true, valid.text)
        let redeemed = try await gateway.json(
            "POST", "/v1/redemptions", ["code": code, "platform": "web"], token: user.token)
        XCTAssertEqual(redeemed.status, 201, redeemed.text)
        let id = try redeemed.decode(RedemptionBody.self).redemptionId
        let done = try await gateway.get("/v1/redemptions/\(id)?wait=30", token: user.token).decode(RedemptionBody.self)
        XCTAssertEqual(done.status, "completed", "\(done)")

        let granted = try await calls().filter { $0.appUserId == user.appUserId && $0.status == 201 }
        XCTAssertEqual(granted.map(\.entitlementId), [entitlement], "one grant at RevenueCat")
        XCTAssertEqual(granted.first?.authorization, "Bearer \(Self.revenueCatKey)", "grants used the run's key")
        let entitlements = try await gateway.get("/v1/me/entitlements", token: user.token)
        XCTAssertEqual(entitlements.status, 200, entitlements.text)
        XCTAssertNotNil(try entitlements.decode(EntitlementsBody.self).entry(entitlement), entitlements.text)

        var delivery: Delivery?
        let delivered = try await eventually(30) {
            delivery = try await deliveries().first { String(decoding: $0.data, as: UTF8.self).contains(id) }
            return delivery != nil
        }
        XCTAssertTrue(delivered, "the coupon.redeemed webhook reached the fakes container")
        let d = try XCTUnwrap(delivery)
        let key = try XCTUnwrap(Data(base64Encoded: String(secret.dropFirst("whsec_".count))))
        let mac = Crypto.hmacSHA256(key: Array(key), Data("\(d.id).\(d.timestamp).".utf8) + d.data)
        let expected = "v1," + Data(mac).base64EncodedString()
        XCTAssertTrue(
            d.signature.split(separator: " ").contains { $0 == expected }, "signed with the secret: \(d.signature)")
        let event = try JSONSerialization.jsonObject(with: d.data) as? [String: Any]
        XCTAssertEqual(event?["type"] as? String, "coupon.redeemed")

        _ = try await gateway.send(
            "DELETE", "/v1/webhooks/\(endpoint.id)", headers: ["Authorization": "Bearer \(admin)"])
    }

    /// 30 users redeem 4 coupons each (a coupon per entitlement) while one of the two coupons
    /// containers is SIGKILLed (`podman kill`) among the requests. A client tries again after a
    /// failure, as the apps do (a retry answers the same redemption). Then every accepted
    /// redemption completes, each coupon counts each user once, and the fake RevenueCat holds
    /// exactly one grant (one end time) per user and entitlement: nothing lost, nothing granted twice.
    func testACouponsContainerKilledMidLoadLosesNothingAndGrantsOnce() async throws {
        let dir = try XCTUnwrap(Self.directory)
        let entitlements = (0..<4).map { "kill-\($0)-" + UUID().uuidString.prefix(6).lowercased() }
        var made: [String] = []
        for e in entitlements { made.append(try await freePeriod(entitlement: e, cap: 1000)) }
        let codes = made
        let gateway = self.gateway
        let users = try await withThrowingTaskGroup(of: User.self) { group in
            for _ in 0..<30 { group.addTask { try await Self.signUp(gateway) } }
            return try await group.reduce(into: [User]()) { $0.append($1) }
        }
        let killedAt = Date().addingTimeInterval(1)
        struct Outcome: Sendable {
            let user: String
            let token: String
            let code: String
            let ids: Set<String>
            let startedAt: Date
            let answeredAt: Date
            let failures: Int
        }
        let load = Task {
            try await withThrowingTaskGroup(of: Outcome.self) { group in
                for (i, user) in users.enumerated() {
                    for code in codes {
                        group.addTask {
                            // Spread over two seconds, so requests are in flight on both sides of the kill.
                            try await Task.sleep(for: .milliseconds(66 * i))
                            let startedAt = Date()
                            var ids = Set<String>(), failures = 0
                            func redeem() async -> String? {
                                guard
                                    let r = try? await gateway.json(
                                        "POST", "/v1/redemptions", ["code": code, "platform": "web"], token: user.token),
                                    r.status == 200 || r.status == 201
                                else { return nil }
                                return try? r.decode(RedemptionBody.self).redemptionId
                            }
                            for _ in 0..<60 {
                                if let id = await redeem() {
                                    ids.insert(id)
                                    break
                                }
                                failures += 1
                                try await Task.sleep(for: .milliseconds(250))  // the app's pause between its tries
                            }
                            // Asked again after the answer: the same redemption.
                            if i % 5 == 0, !ids.isEmpty, let again = await redeem() { ids.insert(again) }
                            return Outcome(
                                user: user.appUserId, token: user.token, code: code, ids: ids, startedAt: startedAt,
                                answeredAt: Date(), failures: failures)
                        }
                    }
                }
                return try await group.reduce(into: [Outcome]()) { $0.append($1) }
            }
        }
        // The pause places the kill among the requests, which no condition outside the process tells.
        try await Task.sleep(for: .seconds(killedAt.timeIntervalSinceNow))
        let killed = try await offThePool { try Subprocess.run(Self.script, ["kill", dir.path, "coupons", "1"]) }
        print("compose kill: coupons instance 1 (\(killed.prefix(12))) SIGKILLed")
        let outcomes = try await load.value
        XCTAssertEqual(outcomes.count, 120)
        XCTAssertEqual(outcomes.filter { $0.ids.isEmpty }.count, 0, "every redemption was accepted in the end")
        XCTAssertEqual(outcomes.filter { $0.ids.count > 1 }.count, 0, "a retry answers the same redemption")
        XCTAssertGreaterThan(
            outcomes.filter { $0.answeredAt > killedAt }.count, 0, "redemptions went on after the kill")
        let across = outcomes.filter { $0.startedAt < killedAt && $0.answeredAt > killedAt }.count
        print(
            "compose kill: \(across) redemptions in flight across the kill, "
                + "\(outcomes.map(\.failures).reduce(0, +)) failed tries retried by the clients")

        for o in outcomes {
            let id = try XCTUnwrap(o.ids.first)
            let done = try await gateway.get("/v1/redemptions/\(id)?wait=30", token: o.token).decode(
                RedemptionBody.self)
            XCTAssertEqual(done.status, "completed", "\(id): \(done)")
        }
        for code in codes {
            let coupon = try await gateway.get("/v1/coupons/\(code)", token: admin).decode(CouponBody.self)
            XCTAssertEqual(coupon.redeemedCount, 30, "\(code) counts each user once")
            XCTAssertEqual(coupon.remaining, 970)
        }
        // One grant per redemption at the provider: a repeat carries the same end time.
        let mine = Set(entitlements)
        let granted = try await calls().filter { $0.status == 201 && mine.contains($0.entitlementId) }
        let byPair = Dictionary(grouping: granted) { "\($0.appUserId)|\($0.entitlementId)" }
        XCTAssertEqual(byPair.count, 120, "every user granted every entitlement")
        for (pair, list) in byPair {
            XCTAssertEqual(Set(list.compactMap(\.endTimeMs)).count, 1, "\(pair) granted twice")
        }

        // The killed instance comes back (compose's restart policy, or started here) and serves again.
        _ = try? await offThePool { try Subprocess.run(Self.script, ["start", dir.path, "coupons", "1"]) }
        let back = try await eventually(120) {
            try await offThePool { try Subprocess.run(Self.script, ["healthy", dir.path, "coupons"]) } == "2"
        }
        XCTAssertTrue(back, "both coupons instances are healthy again")
    }
}
