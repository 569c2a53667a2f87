import Bus
import Core
import Foundation
import Runtime
import Synchronization
import Telemetry
import TestSupport
import XCTest

/// A bus only Redeem can speak on. The stack runs as `run-stack` starts it, with CURVE
/// (the default) and a key pair per service; these tests speak on its bus ports from outside,
/// as anything on the network could.
final class BusSecurityStackTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var minter: TokenMinter!

    override class func startSuite() throws {
        stack = try Stack()
        minter = try stack.minter()
    }

    override class func stopSuite() { stack?.stop() }

    var stack: Stack { Self.stack }
    static let quiet = Logger(service: "test", sink: LogSink(capturing: ()))

    func endpoints(_ variable: String) throws -> [String] {
        try XCTUnwrap(stack.wiring()[variable]).split(separator: ",").map(String.init)
    }

    /// A node as the stack's gateway (a key every service admits), one without security, and one
    /// with a key of its own that no service knows (though it knows theirs: they are public).
    func nodes() throws -> (good: BusNode, plain: BusNode, stranger: BusNode) {
        let keys = try BusKeyring(parsing: String(contentsOfFile: try XCTUnwrap(stack.wiring()["REDEEM_BUS_PUBLIC_KEYS_FILE"]), encoding: .utf8))
        return (try stack.busNode(), BusNode(BusOptions(security: .plain), logger: Self.quiet),
                BusNode(BusOptions(security: .curve(try CurveKeyPair.generate(), keys)), logger: Self.quiet))
    }

    func testEveryServiceAnswersOnlyAClientWithAKnownKey() async throws {
        let (good, plain, stranger) = try nodes()
        defer { [good, plain, stranger].forEach { $0.stop() } }
        for service in ["accounts", "coupons", "grants"] {
            let endpoint = try endpoints("REDEEM_\(service.uppercased())_BUS")
            let answered = try BusClient(bus: good, service: service, connect: endpoint)
            let ping = try await answered.request(Ping(), timeout: .seconds(5))
            answered.stop()
            XCTAssertEqual(ping.service, service)
            for (name, bus) in [("plain", plain), ("unknown key", stranger)] {
                let client = try BusClient(bus: bus, service: service, connect: endpoint)
                defer { client.stop() }
                do {
                    _ = try await client.request(Ping(), timeout: .milliseconds(800))
                    XCTFail("\(service) answered a \(name) client")
                } catch let e as ServiceError {
                    XCTAssertEqual(e.code, .unavailable, "\(service), \(name): the connection never completes")
                }
            }
        }
        // What an attacker would ask for first: a live admin key.
        let accounts = try BusClient(bus: plain, service: "accounts", connect: try endpoints("REDEEM_ACCOUNTS_BUS"))
        defer { accounts.stop() }
        do {
            _ = try await accounts.request(
                APIKeys.Create(
                    name: "mine", role: .admin, mode: .live, callerMode: .live,
                    app: DefaultApp.id), timeout: .milliseconds(800))
            XCTFail("a plain client was given an API key")
        } catch {}
        // Each service said whom it refused (once per key, not per attempt).
        let refused = try await stack.eventually(5) { ["accounts", "coupons", "grants"].allSatisfy { s in
            self.stack.logs().split(separator: "\n").contains { $0.contains("bus client refused") && $0.contains("\"service\":\"\(s)\"") }
        } }
        XCTAssertTrue(refused, "every service logged the refusal")
    }

    /// The issue's forged grant: a year-1000 entitlement pushed straight to grants' command port.
    /// Without a known key it grants nothing; the same push with a known key does (so the port was
    /// the right one, and only the key made the difference).
    func testAForgedGrantCommandFromOutsideGrantsNothing() async throws {
        let (good, plain, stranger) = try nodes()
        defer { [good, plain, stranger].forEach { $0.stop() } }
        func command(for appUserId: String) -> GrantCommand {
            let duration = CouponDuration(unit: "year", count: 1000)
            return GrantCommand(redemptionId: UUID(), accountId: UUID(), appUserId: appUserId, entitlementId: "pro", duration: duration, sandbox: false,
                                coupon: PublicCoupon(code: "FORGED", kind: .freePeriod, percentOff: nil, amountOff: nil, duration: duration,
                                                     periodCount: nil, entitlementId: "pro"),
                                platform: .web, productId: nil, reservedAt: Date(), mode: .live)
        }
        let forged = "forged-" + UUID().uuidString.prefix(8), control = "control-" + UUID().uuidString.prefix(8)
        let commands = try endpoints("REDEEM_GRANTS_COMMANDS")
        let forgers = try [plain, stranger].map { try Pusher(bus: $0, service: "grants", connect: commands, logger: Self.quiet) }
        // Grant commands come from coupons' key only (the gateway's is refused: test5).
        let couponsNode = try stack.busNode(as: "coupons")
        defer { couponsNode.stop() }
        let insider = try Pusher(bus: couponsNode, service: "grants", connect: commands, logger: Self.quiet)
        let grants = try BusClient(bus: good, service: "grants", connect: try endpoints("REDEEM_GRANTS_BUS"))
        defer { forgers.forEach { $0.stop() }; insider.stop(); grants.stop() }
        func entitlements(_ appUserId: String) async throws -> Int {
            try await grants.request(Grants.Entitlements(appUserId: appUserId), timeout: .seconds(5)).data.count
        }
        // Pushed for a while (the pause is the point: 1.5 s of pushes, well after any connection
        // could have been made).
        for _ in 0..<15 {
            for f in forgers { f.push(command(for: forged)) }
            insider.push(command(for: control))
            try await Task.sleep(for: .milliseconds(100))
        }
        let controlled = try await stack.eventually(15) { try await entitlements(control) > 0 }
        XCTAssertTrue(controlled, "a command with a known key is taken")
        // Time for a forged grant, which must not come: no condition says that it never will.
        try await Task.sleep(for: .milliseconds(500))
        let forgedEntitlements = try await entitlements(forged)
        XCTAssertEqual(forgedEntitlements, 0, "a forged command was taken")
    }

    /// A frame over the limit (4 MiB by default) drops its sender's connection; the service goes
    /// on answering, the same process.
    func testAnOversizedFrameDoesNotStopAService() async throws {
        let sender = try stack.busNode(), other = try stack.busNode()
        defer { sender.stop(); other.stop() }
        let loud = BusNode(BusOptions(security: sender.options.security, maxMessageSize: 64 << 20), logger: Self.quiet)
        defer { loud.stop() }
        let before = try stack.pid("coupons")
        let client = try BusClient(bus: loud, service: "coupons", connect: try endpoints("REDEEM_COUPONS_BUS"))
        defer { client.stop() }
        let first = try await client.request(Ping(), timeout: .seconds(5)).service
        XCTAssertEqual(first, "coupons")
        let huge = Data(#"{"v":1,"id":"huge","type":"ping","body":{"pad":""#.utf8) + Data(repeating: 0x61, count: 6 << 20) + Data(#""}}"#.utf8)
        do {
            _ = try await client.requestRaw(huge, id: "huge", timeout: .seconds(1))
            XCTFail("a 6 MiB frame was answered")
        } catch let e as ServiceError {
            XCTAssertEqual(e.code, .timeout)
        }
        let again = try BusClient(bus: other, service: "coupons", connect: try endpoints("REDEEM_COUPONS_BUS"))
        defer { again.stop() }
        let otherDatabase = try await again.request(Ping(), timeout: .seconds(5)).database
        XCTAssertEqual(otherDatabase, "up")
        let sameSender = try await client.request(Ping(), timeout: .seconds(5)).service
        XCTAssertEqual(sameSender, "coupons", "the sender itself, connected again")
        XCTAssertEqual(try stack.pid("coupons"), before)
        XCTAssertEqual(kill(before, 0), 0, "the same coupons process is alive")
        let readiness = try await stack.ops.get("/backends").status
        XCTAssertEqual(readiness, 200)
    }

    /// Events: a subscriber with a known key hears `redemptions.settled`; a plain one and one with
    /// an unknown key hear nothing.
    func testOnlyAKnownKeyHearsEvents() async throws {
        let (good, plain, stranger) = try nodes()
        defer { [good, plain, stranger].forEach { $0.stop() } }
        let heard = Mutex<[String: Int]>([:])
        let subscribers = try [("good", good), ("plain", plain), ("stranger", stranger)].map { name, bus in
            try EventSubscriber(bus: bus, service: "grants", connect: try endpoints("REDEEM_GRANTS_EVENTS"), logger: Self.quiet, handlers: [
                RedemptionsSettled.topic: { _ in heard.withLock { $0[name, default: 0] += 1 } },
            ])
        }
        defer { subscribers.forEach { $0.stop() } }
        let code = "BUS-" + UUID().uuidString.prefix(8).uppercased()
        let made = try await stack.client.json("POST", "/v1/coupons", ["code": code, "kind": "freePeriod", "duration": ["unit": "week", "count": 1]],
                                               token: stack.adminKey)
        XCTAssertEqual(made.status, 201, made.text)
        let settled = try await stack.eventually(15) {
            let r = try await self.stack.client.json("POST", "/v1/redemptions", ["code": code, "platform": "web"], token: try Self.minter.user().token)
            XCTAssertEqual(r.status, 201, r.text)
            return heard.withLock { $0["good", default: 0] } > 0
        }
        XCTAssertTrue(settled, "the good subscriber heard grants")
        XCTAssertEqual(heard.withLock { $0 }.keys.sorted(), ["good"])
    }

    /// A client holding the gateway's key: admitted, but its grant command is not taken and grants
    /// logs it `forbidden`; coupons answers its outbox acknowledgement `forbidden`.
    func testTheGatewaysKeyMayNotSendGrantCommands() async throws {
        let gateway = try stack.busNode(as: "gateway"), couponsNode = try stack.busNode(as: "coupons")
        defer { [gateway, couponsNode].forEach { $0.stop() } }
        let duration = CouponDuration(unit: "year", count: 1000)
        func command(for appUserId: String) -> GrantCommand {
            GrantCommand(redemptionId: UUID(), accountId: UUID(), appUserId: appUserId, entitlementId: "pro", duration: duration, sandbox: false,
                         coupon: PublicCoupon(code: "FORGED", kind: .freePeriod, percentOff: nil, amountOff: nil, duration: duration,
                                              periodCount: nil, entitlementId: "pro"),
                         platform: .web, productId: nil, reservedAt: Date(), mode: .live)
        }
        let forged = "gw-" + UUID().uuidString.prefix(8), control = "cp-" + UUID().uuidString.prefix(8)
        let commands = try endpoints("REDEEM_GRANTS_COMMANDS")
        let fromGateway = try Pusher(bus: gateway, service: "grants", connect: commands, logger: Self.quiet)
        let fromCoupons = try Pusher(bus: couponsNode, service: "grants", connect: commands, logger: Self.quiet)
        let grants = try BusClient(bus: gateway, service: "grants", connect: try endpoints("REDEEM_GRANTS_BUS"))
        let coupons = try BusClient(bus: gateway, service: "coupons", connect: try endpoints("REDEEM_COUPONS_BUS"))
        defer { fromGateway.stop(); fromCoupons.stop(); grants.stop(); coupons.stop() }
        for _ in 0..<15 {
            fromGateway.push(command(for: forged))
            fromCoupons.push(command(for: control))
            try await Task.sleep(for: .milliseconds(100))
        }
        let controlled = try await stack.eventually(15) { try await grants.request(Grants.Entitlements(appUserId: control), timeout: .seconds(5)).data.count > 0 }
        XCTAssertTrue(controlled, "coupons' command is taken")
        let forgedEntitlements = try await grants.request(Grants.Entitlements(appUserId: forged), timeout: .seconds(5)).data.count
        XCTAssertEqual(forgedEntitlements, 0, "the gateway's command was taken")
        let logged = try await stack.eventually(5) { self.stack.logs().split(separator: "\n").contains {
            $0.contains("forbidden bus message") && $0.contains("\"bus.sender\":\"gateway\"") && $0.contains("\"service\":\"grants\"")
        } }
        XCTAssertTrue(logged, "grants logged the forbidden command")
        do {
            _ = try await coupons.request(OutboxAck(redemptionIds: [UUID()], type: GrantCommand.type), timeout: .seconds(5))
            XCTFail("coupons took an outbox ack from the gateway's key")
        } catch let e as ServiceError {
            XCTAssertEqual(e.code, .forbidden)
        }
    }
}
