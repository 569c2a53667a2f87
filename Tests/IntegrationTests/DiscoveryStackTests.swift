import Core
import Database
import Foundation
import Synchronization
import TestSupport
import XCTest

/// Instances found by name. Grants is reached only as `grants.test` (its requests,
/// events and grant commands), a name whose addresses come from a hosts file this test writes
/// (`REDEEM_BUS_HOSTS_FILE`), looked up again every 200 ms. Its instances listen on loopback
/// addresses of their own, on the same ports, as replicas behind one DNS name do. With CURVE on.
final class DiscoveryStackTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var minter: TokenMinter!
    nonisolated(unsafe) static var revenueCat: FakeRevenueCat!
    nonisolated(unsafe) static var hosts: TestHostsFile!
    nonisolated(unsafe) static var directory: URL!
    nonisolated(unsafe) static var ports: [Int] = []

    /// Where instance `n` of grants listens: 127.0.0.(n+1), on the suite's three bus ports.
    static func binds(_ address: String) -> [String: String] {
        ["REDEEM_GRANTS_BUS_BIND": "tcp://\(address):\(ports[0])", "REDEEM_GRANTS_EVENTS_BIND": "tcp://\(address):\(ports[1])",
         "REDEEM_GRANTS_COMMANDS_BIND": "tcp://\(address):\(ports[2])"]
    }

    override class func startSuite() throws {
        directory = try Project.temporaryDirectory("discovery")
        hosts = TestHostsFile(path: directory.appendingPathComponent("hosts").path)
        try hosts.write(["grants.test": ["127.0.0.2"]])
        ports = try Project.freePorts(3)
        revenueCat = try FakeRevenueCat()
        stack = try Stack(environment: [
            "REDEEM_BUS_HOSTS_FILE": hosts.path, "REDEEM_BUS_RESOLVE_MS": "200",
            "REDEEM_GRANTS_BUS": "tcp://grants.test:\(ports[0])", "REDEEM_GRANTS_EVENTS": "tcp://grants.test:\(ports[1])",
            "REDEEM_GRANTS_COMMANDS": "tcp://grants.test:\(ports[2])",
            "REDEEM_ENTITLEMENT_PROVIDER": "revenuecat", "REDEEM_REVENUECAT_URL": revenueCat.url.absoluteString,
            "REDEEM_REVENUECAT_KEY": "sk_rc_discovery", "REDEEM_PROVIDER_RATE": "1000",
        ].merging(binds("127.0.0.2")) { $1 })
        minter = try stack.minter()
    }

    override class func stopSuite() {
        stack?.stop()
        let done = DispatchSemaphore(value: 0)
        Task { await revenueCat?.stop(); done.signal() }
        done.wait()
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }

    var client: HTTPClient { Self.stack.client }

    final class Stopped: Sendable {
        private let flag = Mutex<Bool>(false)
        func set() { flag.withLock { $0 = true } }
        var isSet: Bool { flag.withLock { $0 } }
    }

    func grantsSucceeded(httpPort: Int) async throws -> Double {
        let metrics = try await HTTPClient(base: URL(string: "http://127.0.0.1:\(httpPort)")!).get("/metrics").text
        let line = metrics.split(separator: "\n").first { $0.hasPrefix("redeem_grants_total{outcome=\"succeeded\"}") }
        return line.flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
    }

    /// Under a steady stream of redemptions, a second grants instance joins the name, then the
    /// first leaves it and is stopped. Every redemption completes, each is granted exactly once at
    /// the provider, the one that joined took over, and the gateway still reads entitlements
    /// (requests) and wakes long polls (events) through the name.
    func testAGrantsInstanceJoinsAndOneLeavesUnderLoadAndNothingIsLostOrGrantedTwice() async throws {
        let code = "DISCO-" + UUID().uuidString.prefix(8)
        let made = try await client.json(
            "POST", "/v1/coupons",
            [
                "code": code, "kind": "freePeriod", "maxRedemptions": 10000,
                "duration": ["unit": "month", "count": 1]
            ], token: Self.stack.adminKey)
        XCTAssertEqual(made.status, 201, made.text)
        // Eight holders at a time redeem, each once, until the instances have changed places.
        let stopped = Stopped()
        let client = self.client, minter = Self.minter!
        let redeeming = Task {
            try await withThrowingTaskGroup(of: [(String, TokenMinter.User)].self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        var done: [(String, TokenMinter.User)] = []
                        while !stopped.isSet {
                            let u = try minter.user()
                            let r = try await client.json(
                                "POST", "/v1/redemptions", ["code": code, "platform": "web"], token: u.token)
                            XCTAssertEqual(r.status, 201, r.text)
                            if let id = try? r.decode(RedemptionBody.self).redemptionId { done.append((id, u)) }
                            try await Task.sleep(for: .milliseconds(50))  // the stream's pace: steady, not a flood
                        }
                        return done
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
        }
        let firstPort = try XCTUnwrap(Int(try XCTUnwrap(Self.stack.wiring()["REDEEM_GRANTS_HTTP_PORT"])))
        let secondPort = try Project.freePort()
        let first = try Self.stack.pid("grants")
        let streaming = try await Self.stack.eventually(20) { try await self.grantsSucceeded(httpPort: firstPort) > 0 }
        XCTAssertTrue(streaming, "the first instance grants the stream")

        // A second instance starts on 127.0.0.3 and joins the name.
        try Self.stack.startService("grants", overrides: Self.binds("127.0.0.3").merging(["REDEEM_GRANTS_HTTP_PORT": String(secondPort)]) { $1 })
        let up = try await Self.stack.eventually(20) {
            try await HTTPClient(base: URL(string: "http://127.0.0.1:\(secondPort)")!).get("/readyz").status == 200
        }
        XCTAssertTrue(up, "the second grants instance is ready")
        try Self.hosts.write(["grants.test": ["127.0.0.2", "127.0.0.3"]])
        let joined = try await Self.stack.eventually(15) { try await self.grantsSucceeded(httpPort: secondPort) > 0 }
        XCTAssertTrue(joined, "the instance that joined is sent grant commands")

        // The first leaves the name, then stops (SIGTERM: the runner leaves it down).
        try Self.hosts.write(["grants.test": ["127.0.0.3"]])
        // Every process looks the name up again within 200 ms; nothing outside them tells when they
        // have, so a second's wait stands for it (a command sent to the first meanwhile is still
        // granted: it stops with SIGTERM, finishing what it holds).
        try await Task.sleep(for: .seconds(1))
        let firstGranted = try await grantsSucceeded(httpPort: firstPort)
        kill(first, SIGTERM)
        let before = try await grantsSucceeded(httpPort: secondPort)
        let tookOver = try await Self.stack.eventually(20) { try await self.grantsSucceeded(httpPort: secondPort) > before + 40 }
        XCTAssertTrue(tookOver, "the instance left takes every command")
        stopped.set()

        let ids = try await redeeming.value
        let users = ids.map(\.1)
        XCTAssertGreaterThan(users.count, 100)
        for (id, u) in ids {
            // The long poll ends on grants' `redemptions.settled`, heard through the name.
            let done = try await client.get("/v1/redemptions/\(id)?wait=20", token: u.token).decode(RedemptionBody.self)
            XCTAssertEqual(done.status, "completed", "\(id): \(done)")
        }
        // Exactly one grant per redemption at the provider: a repeat after a restart carries the
        // same end time, which the provider takes as the same grant.
        let calls = Dictionary(grouping: Self.revenueCat.received.filter { $0.status == 201 }, by: \.appUserId)
        XCTAssertEqual(Set(calls.keys), Set(users.map(\.appUserId)), "every holder was granted")
        for (holder, list) in calls { XCTAssertEqual(Set(list.compactMap(\.endTimeMs)).count, 1, "\(holder) granted twice") }
        let db = try PGConnection(url: try Self.stack.adminDatabaseURL())
        XCTAssertEqual(try db.query("SELECT count(*)::int AS n FROM grants.grants WHERE status = 'succeeded'").first!.decode("n") as Int, users.count)
        let drained = try await Self.stack.eventually(20) {
            try db.query("SELECT count(*)::int AS n FROM coupons.outbox").first!.decode("n") as Int == 0
        }
        XCTAssertTrue(drained, "grants acknowledged every command")
        let coupon = try await client.get("/v1/coupons/\(code)", token: Self.stack.adminKey).decode(CouponBody.self)
        XCTAssertEqual(coupon.redeemedCount, users.count)
        // The first stopped cleanly, having done its share before it left.
        XCTAssertGreaterThan(firstGranted, 0)
        let firstAnswers = try? await HTTPClient(base: URL(string: "http://127.0.0.1:\(firstPort)")!).get("/healthz")
        XCTAssertNil(firstAnswers, "the first instance is gone")
        // Requests to grants go to the instance that is left.
        let ents = try await client.get("/v1/me/entitlements", token: users[0].token)
        XCTAssertEqual(ents.status, 200, ents.text)
        XCTAssertEqual(try ents.decode(EntitlementsBody.self).data.count, 1)
        let readiness = try await Self.stack.ops.get("/backends").status
        XCTAssertEqual(readiness, 200)
    }
}
