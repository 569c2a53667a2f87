import Foundation
import XCTest
import TestSupport
import Shared

/// The stack as the runner starts it: readiness, crash and recovery of one service, bad input at
/// the edge and on the bus, and a clean SIGTERM shutdown. Tests run in name order on one stack.
final class FoundationStackTests: XCTestCase {
    nonisolated(unsafe) static var stack: Stack!

    override class func setUp() {
        super.setUp()
        stack = Stack.forSuite()
    }

    override class func tearDown() {
        stack?.stop()
        super.tearDown()
    }

    var stack: Stack { Self.stack }
    var client: HTTPClient { stack.client }

    func readiness() async throws -> (Int, [String: [String: Any]]) {
        let resp = try await client.get("/readyz")
        let services = try resp.json()["services"] as? [String: [String: Any]] ?? [:]
        return (resp.status, services)
    }

    func test1_readyzNamesEveryService() async throws {
        let (status, services) = try await readiness()
        XCTAssertEqual(status, 200)
        XCTAssertEqual(Set(services.keys), ["gateway", "accounts", "coupons", "grants"])
        for name in ["accounts", "coupons", "grants"] {
            XCTAssertEqual(services[name]?["status"] as? String, "up", name)
            XCTAssertEqual(services[name]?["database"] as? String, "up", name)
        }
        let health = try await client.get("/healthz")
        XCTAssertEqual(health.status, 200)
        let metrics = try await client.get("/metrics")
        XCTAssertEqual(metrics.status, 200)
        XCTAssertTrue(metrics.text.contains("redeem_bus_request_duration_seconds_bucket{service=\"coupons\",type=\"ping\""))
        XCTAssertTrue(metrics.text.contains("redeem_http_requests_total{method=\"GET\",route=\"/readyz\",status=\"200\"}"))
    }

    func test2_badInputAtTheEdgeGetsJSONErrors() async throws {
        let missing = try await client.get("/v1/nothing-here")
        XCTAssertEqual(missing.status, 404)
        XCTAssertEqual(missing.errorCode, "routeNotFound")
        let wrongMethod = try await client.send("DELETE", "/readyz")
        XCTAssertEqual(wrongMethod.status, 405)
        XCTAssertEqual(wrongMethod.errorCode, "methodNotAllowed")
        let big = try await client.send("POST", "/readyz", body: Data(repeating: 0x7b, count: 2 << 20), headers: ["Content-Type": "application/json"])
        XCTAssertEqual(big.status, 413)
        XCTAssertEqual(big.errorCode, "tooLarge")
        // Garbage that is not HTTP at all: answered (or dropped) by libmicrohttpd; the gateway lives on.
        _ = try? RawHTTP.exchange(port: stack.gateway.port!, Data("\u{1}\u{2}GARBAGE / NOPE\r\n\r\n".utf8))
        let after = try await client.get("/healthz")
        XCTAssertEqual(after.status, 200)
    }

    func test3_malformedBusMessagesAreAnsweredAndLogged() async throws {
        let wiring = try stack.wiring()
        let endpoints = try XCTUnwrap(wiring["REDEEM_COUPONS_BUS"]).split(separator: ",").map(String.init)
        let context = ZMQContext()
        let bus = try BusClient(context: context, service: "coupons", connect: endpoints)
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

    func test4_killedServiceTurnsReadinessRedAndBackAfterRestart() async throws {
        let others = try ["accounts", "grants", "gateway"].map { try stack.pid($0) }
        kill(try stack.pid("coupons"), SIGKILL)
        let red = try await stack.eventually(10) {
            let (status, services) = try await readiness()
            return status == 503 && services["coupons"]?["status"] as? String == "down"
                && services["accounts"]?["status"] as? String == "up"
        }
        XCTAssertTrue(red, "readyz did not report coupons down")
        try stack.startService("coupons")
        let green = try await stack.eventually(20) { try await readiness().0 == 200 }
        XCTAssertTrue(green, "readyz did not recover after coupons restarted")
        // Nothing else was restarted.
        XCTAssertEqual(try ["accounts", "grants", "gateway"].map { try stack.pid($0) }, others)
        for pid in others { XCTAssertEqual(kill(pid, 0), 0) }
    }

    func test9_sigtermStopsEveryProcessWithExitZero() throws {
        let pids = try Stack.services.map { try stack.pid($0) }
        let statuses = stack.stop()
        XCTAssertEqual(statuses["accounts"], 0)
        XCTAssertEqual(statuses["grants"], 0)
        XCTAssertEqual(statuses["gateway"], 0)
        XCTAssertEqual(statuses["restarted#0"], 0, "the restarted coupons")
        XCTAssertEqual(statuses["coupons"], 137, "the first coupons was killed with SIGKILL")
        for pid in pids { XCTAssertNotEqual(kill(pid, 0), 0, "pid \(pid) still running") }
    }
}
