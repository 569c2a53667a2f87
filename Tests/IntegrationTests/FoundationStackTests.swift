import Bus
import Core
import Cryptography
import Database
import Foundation
import Runtime
import TestSupport
import XCTest

/// The stack as the runner starts it: readiness, crash and recovery of one service, bad input at
/// the edge and on the bus, and a clean SIGTERM shutdown. The tests share one stack; one that kills
/// a service starts it again, and those that stop a whole stack start their own.
final class FoundationStackTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!

    override class func startSuite() throws {
        stack = try Stack()
    }

    override class func stopSuite() {
        stack?.stop()
    }

    var stack: Stack { Self.stack }
    var client: HTTPClient { stack.client }

    /// `/backends`: each service's state, and its database's, as the gateway sees them.
    struct Readiness: Decodable {
        struct Service: Decodable {
            let status: String
            let database: String?
        }
        let services: [String: Service]
    }

    static func readiness(_ stack: Stack) async throws -> (Int, [String: Readiness.Service]) {
        let resp = try await stack.ops.get("/backends")
        return (resp.status, try resp.decode(Readiness.self).services)
    }

    func readiness() async throws -> (Int, [String: Readiness.Service]) { try await Self.readiness(stack) }

    /// `/backends` names every service; the gateway's `/readyz` is its own state alone.
    func testBackendsNamesEveryServiceAndReadyzTheGatewayAlone() async throws {
        let (status, services) = try await readiness()
        XCTAssertEqual(status, 200)
        XCTAssertEqual(Set(services.keys), ["gateway", "accounts", "coupons", "grants"])
        for name in ["accounts", "coupons", "grants"] {
            XCTAssertEqual(services[name]?.status, "up", name)
            XCTAssertEqual(services[name]?.database, "up", name)
        }
        let ready = try await stack.ops.get("/readyz")
        XCTAssertEqual(ready.status, 200, ready.text)
        XCTAssertEqual(Set(try ready.decode(Readiness.self).services.keys), ["gateway"])
        let health = try await client.get("/healthz")
        XCTAssertEqual(health.status, 200)
        let metrics = try await stack.ops.get("/metrics")
        XCTAssertEqual(metrics.status, 200)
        XCTAssertTrue(metrics.text.contains("redeem_bus_request_duration_seconds_bucket{service=\"coupons\",type=\"ping\""))
        XCTAssertTrue(metrics.text.contains("redeem_http_requests_total{method=\"GET\",route=\"/healthz\",status=\"200\"}"))
        // Readiness and metrics are on the operations port only; the public port has liveness.
        for path in ["/readyz", "/backends", "/metrics"] {
            let hidden = try await client.get(path)
            XCTAssertEqual(hidden.status, 404, path)
        }
        let opsHealth = try await stack.ops.get("/healthz").status
        XCTAssertEqual(opsHealth, 200)
    }

    func testBadInputAtTheEdgeGetsJSONErrors() async throws {
        let missing = try await client.get("/v1/nothing-here")
        XCTAssertEqual(missing.status, 404)
        XCTAssertEqual(missing.errorCode, "routeNotFound")
        let wrongMethod = try await client.send("DELETE", "/healthz")
        XCTAssertEqual(wrongMethod.status, 405)
        XCTAssertEqual(wrongMethod.errorCode, "methodNotAllowed")
        let big = try await client.send("POST", "/healthz", body: Data(repeating: 0x7b, count: 2 << 20), headers: ["Content-Type": "application/json"])
        XCTAssertEqual(big.status, 413)
        XCTAssertEqual(big.errorCode, "tooLarge")
        // Garbage that is not HTTP at all: answered (or dropped) by libmicrohttpd; the gateway lives on.
        _ = try? RawHTTP.exchange(port: stack.gateway.port!, Data("\u{1}\u{2}GARBAGE / NOPE\r\n\r\n".utf8))
        let after = try await client.get("/healthz")
        XCTAssertEqual(after.status, 200)
    }

    func testMalformedBusMessagesAreAnsweredAndLogged() async throws {
        let wiring = try stack.wiring()
        let endpoints = try XCTUnwrap(wiring["REDEEM_COUPONS_BUS"]).split(separator: ",").map(String.init)
        let node = try stack.busNode()
        defer { node.stop() }
        let bus = try BusClient(bus: node, service: "coupons", connect: endpoints)
        defer { bus.stop() }
        let first = try await bus.request(Ping(), timeout: .seconds(3))
        XCTAssertEqual(first.service, "coupons")
        let unknown = try await bus.requestRaw(Data(#"{"v":1,"id":"x1","type":"coupons.nope","body":{}}"#.utf8), id: "x1")
        XCTAssertTrue(String(decoding: unknown, as: UTF8.self).contains("unknownMessageType"))
        let garbage = try await bus.requestRaw(Data("{not json".utf8), id: "")
        XCTAssertTrue(String(decoding: garbage, as: UTF8.self).contains("malformedMessage"))
        let after = try await bus.request(Ping(), timeout: .seconds(3))
        XCTAssertEqual(after.database, "up")
        XCTAssertTrue(stack.logs().contains("unknown bus message type"))
    }

    func testKilledServiceTurnsReadinessRedAndBackAfterRestart() async throws {
        let others = try ["accounts", "grants", "gateway"].map { try stack.pid($0) }
        kill(try stack.pid("coupons"), SIGKILL)
        let red = try await stack.eventually(10) {
            let (status, services) = try await readiness()
            return status == 503 && services["coupons"]?.status == "down" && services["accounts"]?.status == "up"
        }
        XCTAssertTrue(red, "/backends did not report coupons down")
        // One back-end down does not take the gateway out of its Service: it answers what it can.
        let gatewayReady = try await stack.ops.get("/readyz").status
        XCTAssertEqual(gatewayReady, 200, "the gateway stays ready while coupons is down")
        let account = ["email": "up-\(UUID().uuidString.prefix(8))@example.com", "password": "correct horse battery"]
        let signUp = try await client.json("POST", "/v1/accounts", account)
        XCTAssertEqual(signUp.status, 201, "a request that needs no coupons is served: \(signUp.text)")
        try await stack.restart("coupons", seconds: 20)  // throws unless /backends is green again
        // Nothing else was restarted.
        XCTAssertEqual(try ["accounts", "grants", "gateway"].map { try stack.pid($0) }, others)
        for pid in others { XCTAssertEqual(kill(pid, 0), 0) }
    }

    /// Access tokens moved from Ed25519 to RS256: tokens signed with a key of an earlier version
    /// still verify until they expire, because accounts publishes every stored key and a gateway
    /// asks again for a key id it does not know. New tokens are RS256.
    func testTokensOfAnEarlierEd25519KeyStillVerify() async throws {
        let db = try PGConnection(url: try stack.adminDatabaseURL())
        let seed = Crypto.randomBytes(32)
        try db.query("""
            INSERT INTO accounts.signing_keys (kid, algorithm, private_key, created_at) VALUES ('k0', 'EdDSA', $1, now() - interval '1 day')
            """, [PGBytes(Data(seed))])
        kill(try stack.pid("accounts"), SIGKILL)  // accounts reads its keys when it starts
        try await stack.restart("accounts", seconds: 20)

        let account = UUID()
        let claims = AccessClaims(account: account, appUserId: account.uuidString.lowercased(), session: UUID(),
                                  issuedAt: Date(), expiresAt: Date().addingTimeInterval(300))
        let earlier = try JWT.sign(claims, key: try XCTUnwrap(AsymmetricKey.ed25519(privateKey: seed)), kid: "k0")
        let accepted = try await client.get("/v1/me/redemptions", token: earlier)
        XCTAssertEqual(accepted.status, 200, accepted.text)
        let forged = try JWT.sign(claims, key: try XCTUnwrap(AsymmetricKey.ed25519(privateKey: Crypto.randomBytes(32))), kid: "k0")
        let refused = try await client.get("/v1/me/redemptions", token: forged)
        XCTAssertEqual(refused.status, 401)
        let current = try stack.signingKey()
        XCTAssertEqual(current.key.algorithm, .rs256)
        XCTAssertNotEqual(current.kid, "k0")
    }

    /// A test process that dies (a crash) takes its stack with it: the runner watches its parent
    /// and stops everything it started, PostgreSQL included.
    func testAStackWhoseParentDiesStopsItself() async throws {
        let parent = try Subprocess("/bin/sleep", ["600"])
        let orphan = try await offThePool { try Stack(environment: ["REDEEM_PARENT_PID": String(parent.pid)]) }
        let pids = try Stack.services.map { try orphan.pid($0) }
        parent.signal(SIGKILL)
        parent.wait()
        _ = try await orphan.eventually(20) { !pids.contains { kill($0, 0) == 0 } }
        for pid in pids { XCTAssertNotEqual(kill(pid, 0), 0, "pid \(pid) outlived the process that started the stack") }
        let statuses = try await offThePool { orphan.stop() }
        XCTAssertEqual(statuses["gateway"], 0, "stopped with SIGTERM, not left running")
    }

    /// Under the runner's default supervision a service killed with SIGKILL is started again by
    /// itself and serves, while one stopped with SIGTERM (exit 0) stays down.
    func testTheRunnerStartsACrashedServiceAgainButNotAStoppedOne() async throws {
        let supervised = try await offThePool { try Stack(environment: ["REDEEM_RESTART": "on-failure"]) }
        let killed = try supervised.pid("coupons")
        kill(killed, SIGKILL)
        let again = try await supervised.eventually(30) {
            guard try supervised.pid("coupons") != killed else { return false }
            return try await supervised.ops.get("/backends").status == 200
        }
        let runnerErr = { (try? String(contentsOf: supervised.directory.appendingPathComponent("runner.err"), encoding: .utf8)) ?? "" }
        XCTAssertTrue(again, "coupons was not started again: \(runnerErr())")
        XCTAssertTrue(runnerErr().contains("coupons exited with status 137"), runnerErr())
        let created = try await supervised.client.json("POST", "/v1/coupons", ["code": "AFTER-RESTART", "kind": "freePeriod",
                                                                             "duration": ["unit": "month", "count": 1]],
                                                       token: supervised.adminKey)
        XCTAssertEqual(created.status, 201, created.text)

        let stopped = try supervised.pid("grants")
        kill(stopped, SIGTERM)
        let down = try await supervised.eventually(20) {
            try await Self.readiness(supervised).1["grants"]?.status == "down"
        }
        XCTAssertTrue(down, "/backends did not report grants down")
        // Past the runner's next look (every second), for a start that must not come: no condition
        // says that it never will.
        try await Task.sleep(for: .seconds(3))
        XCTAssertEqual(kill(stopped, 0), -1, "the stopped grants is gone")
        XCTAssertFalse(FileManager.default.fileExists(atPath: supervised.stateDirectory.appendingPathComponent("grants.pid").path),
                       "grants was started again after a clean stop: \(runnerErr())")
        let statuses = try await offThePool { supervised.stop() }
        XCTAssertEqual(statuses["coupons"], 0, "the restarted coupons stopped with SIGTERM")
        XCTAssertEqual(statuses["gateway"], 0)
    }

    /// On a stack of its own, whose coupons was killed with SIGKILL and started again by hand.
    /// A second gateway on the ports the first holds cannot start: it says why and exits 1, every
    /// time. (It once ended with SIGSEGV about 1 start in 15: `exit` ran OpenSSL's cleanup under a
    /// thread still using it; `ServiceMain.end` runs no `atexit` handler.)
    func testAGatewayWhosePortsAreTakenExitsOneEveryTime() throws {
        let env = ProcessInfo.processInfo.environment.merging(try stack.wiring()) { $1 }
            .merging(try stack.wiring(of: "gateway")) { $1 }
        let log = stack.directory.appendingPathComponent("ports-taken.log").path
        var statuses: [Int32] = []
        for _ in 0..<20 {
            let gateway = try Subprocess(
                Project.binDirectory.appendingPathComponent("gateway").path, [], environment: env, stderr: log)
            guard let status = gateway.wait(seconds: 30) else {
                gateway.signal(SIGKILL)
                return XCTFail("a gateway whose ports are taken did not end within 30 s")
            }
            statuses.append(status)
        }
        XCTAssertEqual(statuses, Array(repeating: 1, count: 20))
        let text = try String(contentsOfFile: log, encoding: .utf8)
        XCTAssertTrue(text.contains("(in use?)"), text)
    }

    func testSigtermStopsEveryProcessWithExitZero() async throws {
        let stack = try await offThePool { try Stack() }
        kill(try stack.pid("coupons"), SIGKILL)
        try await stack.restart("coupons")
        let pids = try Stack.services.map { try stack.pid($0) }
        let statuses = try await offThePool { stack.stop() }
        XCTAssertEqual(statuses["accounts"], 0)
        XCTAssertEqual(statuses["grants"], 0)
        XCTAssertEqual(statuses["gateway"], 0)
        XCTAssertEqual(statuses["restarted#0"], 0, "the restarted coupons")
        XCTAssertEqual(statuses["coupons"], 137, "the first coupons was killed with SIGKILL")
        for pid in pids { XCTAssertNotEqual(kill(pid, 0), 0, "pid \(pid) still running") }
    }
}
