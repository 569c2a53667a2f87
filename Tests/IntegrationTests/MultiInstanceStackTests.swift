import Core
import Database
import Foundation
import TestSupport
import XCTest

/// The multi-instance stack (docs/architecture.md, "Finding instances"): two gateways, two coupons and two grants, with CURVE on (the
/// stack's default), every back-end found by name. `coupons.test` and `grants.test` come from a
/// hosts file this test writes (`REDEEM_BUS_HOSTS_FILE`, looked up again every 200 ms) and name
/// 127.0.0.2 and 127.0.0.3, where the two instances of each listen on the same ports, as replicas
/// behind one DNS name do. The race and kill -9 tests of one instance hold here: exact caps under
/// a race across both gateways, and one grant per redemption when a grants instance is killed
/// mid-flight. The tests share the stack; the one that kills a grants instance starts it again.
final class MultiInstanceStackTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var minter: TokenMinter!
    nonisolated(unsafe) static var revenueCat: FakeRevenueCat!
    nonisolated(unsafe) static var directory: URL!
    /// The gateway the runner started, and the one this suite adds.
    nonisolated(unsafe) static var gateways: [HTTPClient] = []
    /// Internal HTTP ports of coupons and grants: the runner's instance first, then the added one.
    nonisolated(unsafe) static var couponsPorts: [Int] = []
    nonisolated(unsafe) static var grantsPorts: [Int] = []
    /// Bus ports: coupons' requests, grants' requests, events and commands.
    nonisolated(unsafe) static var ports: [Int] = []
    static let addresses = ["127.0.0.2", "127.0.0.3"]

    /// What instance `address` of coupons and of grants binds.
    static func binds(_ address: String) -> [String: String] {
        ["REDEEM_COUPONS_BUS_BIND": "tcp://\(address):\(ports[0])",
         "REDEEM_GRANTS_BUS_BIND": "tcp://\(address):\(ports[1])", "REDEEM_GRANTS_EVENTS_BIND": "tcp://\(address):\(ports[2])",
         "REDEEM_GRANTS_COMMANDS_BIND": "tcp://\(address):\(ports[3])"]
    }

    override class func startSuite() throws {
        directory = try Project.temporaryDirectory("multi")
        let hosts = TestHostsFile(path: directory.appendingPathComponent("hosts").path)
        try hosts.write(["coupons.test": addresses, "grants.test": addresses])
        ports = try Project.freePorts(4)
        revenueCat = try FakeRevenueCat()
        stack = try Stack(environment: [
            "REDEEM_BUS_HOSTS_FILE": hosts.path, "REDEEM_BUS_RESOLVE_MS": "200",
            "REDEEM_COUPONS_BUS": "tcp://coupons.test:\(ports[0])", "REDEEM_GRANTS_BUS": "tcp://grants.test:\(ports[1])",
            "REDEEM_GRANTS_EVENTS": "tcp://grants.test:\(ports[2])", "REDEEM_GRANTS_COMMANDS": "tcp://grants.test:\(ports[3])",
            "REDEEM_ENTITLEMENT_PROVIDER": "revenuecat", "REDEEM_REVENUECAT_URL": revenueCat.url.absoluteString,
            "REDEEM_REVENUECAT_KEY": "sk_rc_multi", "REDEEM_PROVIDER_RATE": "1000", "REDEEM_PROVIDER_TIMEOUT_SECONDS": "2",
        ].merging(binds(addresses[0])) { $1 })
        minter = try stack.minter()
        let wiring = try stack.wiring()
        couponsPorts = [Int(wiring["REDEEM_COUPONS_HTTP_PORT"] ?? "") ?? 0, try Project.freePort()]
        grantsPorts = [Int(wiring["REDEEM_GRANTS_HTTP_PORT"] ?? "") ?? 0, try Project.freePort()]
        try stack.startService("coupons", overrides: binds(addresses[1]).merging(["REDEEM_COUPONS_HTTP_PORT": String(couponsPorts[1])]) { $1 })
        // The added grants calls RevenueCat with a key of its own, so the fake tells its calls apart.
        try stack.startService(
            "grants",
            overrides: binds(addresses[1]).merging([
                "REDEEM_GRANTS_HTTP_PORT": String(grantsPorts[1]), "REDEEM_REVENUECAT_KEY": "sk_rc_multi_added",
            ]) { $1 })
        let gatewayPort = try Project.freePort()
        let gatewayOps = try Project.freePort()
        try stack.startService("gateway", overrides: ["REDEEM_HTTP_PORT": String(gatewayPort), "REDEEM_GATEWAY_HTTP_PORT": String(gatewayOps)])
        gateways = [stack.client, HTTPClient(base: URL(string: "http://127.0.0.1:\(gatewayPort)")!, maxConnections: 128)]
        addedInstances = [
            "http://127.0.0.1:\(couponsPorts[1])/readyz", "http://127.0.0.1:\(grantsPorts[1])/readyz",
            "http://127.0.0.1:\(gatewayOps)/backends"
        ]
    }

    /// Where the added coupons and grants answer `/readyz`, and the added gateway `/backends` (it is
    /// ready before it reaches them).
    nonisolated(unsafe) static var addedInstances: [String] = []

    /// Waits until every added instance is ready (each test starts with it; at once after the first).
    func added() async throws {
        for url in Self.addedInstances {
            let address = try XCTUnwrap(URL(string: url))
            let ready = try await Self.stack.eventually(60) {
                try await HTTPClient(base: address).get(address.path).status == 200
            }
            XCTAssertTrue(ready, "\(url) is ready")
        }
    }

    override class func stopSuite() {
        stack?.stop()
        let done = DispatchSemaphore(value: 0)
        Task { await revenueCat?.stop(); done.signal() }
        done.wait()
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }

    var admin: String { Self.stack.adminKey }

    /// A counter (without labels) or a labelled series of a process's /metrics; 0 when absent.
    func metric(_ port: Int, _ series: String) async throws -> Double {
        let text = try await HTTPClient(base: URL(string: "http://127.0.0.1:\(port)")!).get("/metrics").text
        return text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
    }

    func freePeriod(cap: Int) async throws -> String {
        let code = "MULTI" + UUID().uuidString.prefix(8).uppercased()
        let r = try await Self.gateways[0].json("POST", "/v1/coupons", ["code": code, "kind": "freePeriod", "maxRedemptions": cap,
                                                                      "duration": ["unit": "month", "count": 1]], token: admin)
        XCTAssertEqual(r.status, 201, r.text)
        return code
    }

    /// Every user redeems `code` at once, alternately through the two gateways: (status, error
    /// code, redemption id) each.
    func race(_ code: String, users: [TokenMinter.User]) async throws -> [(Int, String?, String?)] {
        let gateways = Self.gateways
        return try await withThrowingTaskGroup(of: (Int, String?, String?).self) { group in
            for (i, u) in users.enumerated() {
                group.addTask {
                    let r = try await gateways[i % 2].json("POST", "/v1/redemptions", ["code": code, "platform": "web"], token: u.token)
                    return (r.status, r.errorCode, (try? r.decode(RedemptionBody.self))?.redemptionId)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    /// 400 accounts race for 100 uses through two gateways, each spreading its requests over both
    /// coupons instances: exactly 100 win, the rest are told `exhausted`, and both coupons
    /// instances committed reservations. Then one account fires 40 redeems across both gateways
    /// and gets one redemption.
    func testCapsAreExactUnderARaceAcrossTwoGatewaysAndTwoCouponsInstances() async throws {
        try await added()
        let batches = "redeem_reservation_batch_size_count"
        let before = [try await metric(Self.couponsPorts[0], batches), try await metric(Self.couponsPorts[1], batches)]
        let code = try await freePeriod(cap: 100)
        let results = try await race(code, users: try (0..<400).map { _ in try Self.minter.user() })
        XCTAssertEqual(results.filter { $0.0 == 201 }.count, 100, "\(Dictionary(grouping: results, by: \.0).mapValues(\.count))")
        XCTAssertEqual(results.filter { $0.1 == "exhausted" }.count, 300)
        XCTAssertEqual(Set(results.compactMap(\.2)).count, 100, "a distinct redemption per winner")
        let db = try PGConnection(url: try Self.stack.adminDatabaseURL())
        XCTAssertEqual(try db.query("SELECT used_count FROM coupons.coupons WHERE code = $1", [code]).first!.decode("used_count", as: Int.self), 100)
        XCTAssertEqual(try db.query("SELECT count(*)::int AS n FROM coupons.redemptions WHERE code = $1", [code]).first!.decode("n", as: Int.self), 100)
        let after = [try await metric(Self.couponsPorts[0], batches), try await metric(Self.couponsPorts[1], batches)]
        XCTAssertGreaterThan(after[0], before[0], "the runner's coupons took part")
        XCTAssertGreaterThan(after[1], before[1], "the added coupons took part")

        let one = try await freePeriod(cap: 10), u = try Self.minter.user()
        let same = try await race(one, users: Array(repeating: u, count: 40))
        XCTAssertEqual(same.filter { $0.0 == 201 }.count, 1, "\(same.map(\.0))")
        XCTAssertEqual(same.filter { $0.0 == 200 }.count, 39)
        XCTAssertEqual(Set(same.compactMap(\.2)).count, 1, "every answer names the same redemption")
        let remaining = try await Self.gateways[1].get("/v1/coupons/\(one)", token: admin).decode(CouponBody.self)
            .remaining
        XCTAssertEqual(remaining, 9)
    }

    /// 200 holders redeem through both gateways while one grants instance is killed with SIGKILL
    /// (and stays dead, still listed under the name). Every provider call takes a second, and the
    /// kill comes while the provider holds calls of the dead one (told apart by its RevenueCat key):
    /// the provider granted them, but it never recorded it.
    /// Coupons' outbox re-sends what the dead one held, the other instance takes every command
    /// and, once their leases expire, the grants the dead one had claimed, and repeats them with
    /// the same end time: every redemption completes, each holder has exactly one grant at the
    /// provider, and no use is counted twice or lost. The killed instance is started again at the
    /// end, so that the next test finds both.
    func testAGrantsInstanceKilledMidFlightLosesNothingAndGrantsOnce() async throws {
        try await added()
        let succeeded = "redeem_grants_total{outcome=\"succeeded\"}"
        Self.revenueCat.reset()
        Self.revenueCat.answerAlways(.slow(seconds: 1))
        defer { Self.revenueCat.answerAlways(.created) }
        let code = try await freePeriod(cap: 1000)
        let users = try (0..<200).map { _ in try Self.minter.user() }
        let gateways = Self.gateways
        let redeeming = Task {
            try await withThrowingTaskGroup(of: (String, TokenMinter.User)?.self) { group in
                for (i, u) in users.enumerated() {
                    group.addTask {
                        // Spread over two seconds, so that redemptions are in flight on both sides of the kill.
                        try await Task.sleep(for: .milliseconds(10 * i))
                        for _ in 0..<40 {
                            if let r = try? await gateways[i % 2].json(
                                "POST", "/v1/redemptions", ["code": code, "platform": "android"], token: u.token),
                                r.status == 200 || r.status == 201,
                                let id = try? r.decode(RedemptionBody.self).redemptionId
                            {
                                return (id, u)
                            }
                            try await Task.sleep(for: .milliseconds(250))  // the app's pause between its tries
                        }
                        return nil
                    }
                }
                return try await group.reduce(into: [(String, TokenMinter.User)]()) { if let x = $1 { $0.append(x) } }
            }
        }
        // Killed while the provider holds calls the runner's grants sent (each for a second; the
        // condition is checked every 100 ms). A pause after its first success instead left it,
        // under load, between its passes with no call under way (0 repeated, 1 run in 3).
        let inFlight = try await Self.stack.eventually(10) {
            Self.revenueCat.grantsUnderWay(authorization: "Bearer sk_rc_multi") > 0
        }
        XCTAssertTrue(inFlight, "the runner's grants had calls under way when it was killed")
        kill(try Self.stack.pid("grants"), SIGKILL)
        addTeardownBlock {
            try await Self.stack.restart(
                "grants", overrides: Self.binds(Self.addresses[0]),
                readyAt: URL(string: "http://127.0.0.1:\(Self.grantsPorts[0])")!)
        }
        let ids = try await redeeming.value
        XCTAssertEqual(ids.count, 200, "every client got its redemption")
        for (id, u) in ids {
            let done = try await gateways[1].get("/v1/redemptions/\(id)?wait=30", token: u.token).decode(
                RedemptionBody.self)
            XCTAssertEqual(done.status, "completed", "\(id): \(done)")
        }
        // Exactly one grant per redemption at the provider (a repeat carries the same end time).
        let holders = Set(users.map(\.appUserId))
        let byUser = Dictionary(grouping: Self.revenueCat.received.filter { $0.status == 201 && holders.contains($0.appUserId) }, by: \.appUserId)
        XCTAssertEqual(Set(byUser.keys), holders, "every holder was granted")
        for (holder, list) in byUser { XCTAssertEqual(Set(list.compactMap(\.endTimeMs)).count, 1, "\(holder) granted twice") }
        // The kill was mid-flight: some grants the dead instance had sent were sent again by the live one.
        let repeated = byUser.values.filter { $0.count > 1 }.count
        XCTAssertGreaterThan(repeated, 0, "no grant was in flight on the killed instance")
        print("multi-instance kill: \(repeated) grants repeated after the kill, each with its first end time")
        let db = try PGConnection(url: try Self.stack.adminDatabaseURL())
        let drained = try await Self.stack.eventually(20) {
            try db.query("SELECT count(*)::int AS n FROM coupons.outbox").first!.decode("n") as Int == 0
        }
        XCTAssertTrue(drained, "the live grants acknowledged every command")
        let tookOver = try await metric(Self.grantsPorts[1], succeeded)
        XCTAssertGreaterThan(tookOver, 0, "the live grants took over")
        let coupon = try await gateways[0].get("/v1/coupons/\(code)", token: admin).decode(CouponBody.self)
        XCTAssertEqual(coupon.redeemedCount, 200)
        XCTAssertEqual(coupon.remaining, 800)
        // Both gateways still read entitlements through the name (the dead address is skipped).
        for gateway in gateways {
            let ents = try await gateway.get("/v1/me/entitlements", token: users[0].token)
            XCTAssertEqual(ents.status, 200, ents.text)
        }
    }
}
