import Foundation
import Synchronization
import TestSupport
import Testing
@testable import Core
@testable import Telemetry
@testable import Bus
@testable import Runtime

/// CurveZMQ on the bus, over real sockets: a CURVE server answers only clients whose key it
/// knows (its ZAP handler decides), a plain client or an unknown key gets nothing, and a frame
/// over the size limit costs its sender the connection, not the server its life.
@Suite(.serialized) struct BusSecurityTests {
    let sink = LogSink(capturing: ())
    var logger: Logger { Logger(service: "test", sink: sink) }
    static let server = try! CurveKeyPair.generate()
    static let client = try! CurveKeyPair.generate()
    /// What every node of these tests is told: the service "test" (the server) and one client.
    static let keyring = BusKeyring([.init(name: "test", key: server.publicKey), .init(name: "gateway", key: client.publicKey)])

    func node(_ security: BusSecurity, maxMessageSize: Int = BusOptions.defaultMaxMessageSize) -> BusNode {
        BusNode(BusOptions(security: security, maxMessageSize: maxMessageSize), logger: logger)
    }

    func echoRouter() -> BusRouter {
        var router = BusRouter(logger: logger)
        router.on(Echo.self) { req, _ in .init(text: req.text + "!") }
        return router
    }

    /// A CURVE server node with one server on it; stop the server, then the node.
    func curveServer(maxMessageSize: Int = BusOptions.defaultMaxMessageSize) throws -> (BusNode, BusServer) {
        let bus = node(.curve(Self.server, Self.keyring), maxMessageSize: maxMessageSize)
        return (bus, try BusServer(bus: bus, bind: ["tcp://127.0.0.1:*"], router: echoRouter(), logger: logger))
    }

    /// Asks once; answers the reply's text, or the error that came instead.
    func ask(_ bus: BusNode, _ endpoint: String, timeout: Duration = .milliseconds(700)) async throws -> Result<String, ServiceError> {
        let client = try BusClient(bus: bus, service: "test", connect: [endpoint])
        defer { client.stop() }
        do { return .success(try await client.request(Echo(text: "hi"), timeout: timeout).text) } catch let e as ServiceError {
            return .failure(e)
        }
    }

    @Test func keysAreZ85AndThePublicHalfComesFromTheSecret() throws {
        let pair = try CurveKeyPair.generate()
        #expect(pair.publicKey.count == 40 && pair.secretKey.count == 40)
        #expect(CurveKeyPair.isKey(pair.publicKey) && CurveKeyPair.isKey(pair.secretKey))
        #expect(try CurveKeyPair(secretKey: pair.secretKey).publicKey == pair.publicKey)
        #expect(!String(describing: pair).contains(pair.secretKey))
        #expect(throws: (any Error).self) { try CurveKeyPair(secretKey: "short") }
        #expect(!CurveKeyPair.isKey(String(repeating: "~", count: 40)))  // not in the alphabet
    }

    @Test func theKeyringReadsNamesAndKeysAndRefusesAnythingElse() throws {
        let a = try CurveKeyPair.generate().publicKey, b = try CurveKeyPair.generate().publicKey, c = try CurveKeyPair.generate().publicKey
        let ring = try BusKeyring(parsing: "accounts=\(a), coupons=\(b)\n# rotating coupons' key\ncoupons=\(c)\n\n")
        #expect(ring.entries.map(\.name) == ["accounts", "coupons", "coupons"])
        #expect(ring.key(of: "coupons") == b, "a caller uses the first key listed")
        #expect(ring.name(of: c) == "coupons", "every key listed is admitted")
        #expect(ring.key(of: "grants") == nil)
        #expect(try BusKeyring(parsing: ring.text) == ring)
        #expect(throws: BusKeyring.KeyringError.self) { try BusKeyring(parsing: "accounts \(a)") }
        #expect(throws: BusKeyring.KeyringError.self) { try BusKeyring(parsing: "accounts=\(a.dropLast())") }
        #expect(throws: BusKeyring.KeyringError.self) { try BusKeyring(parsing: "acc ounts=\(a)") }
    }

    /// RFC 27 from the handler's side: a known CURVE key is admitted under its name; an unknown
    /// key, another mechanism or a request it cannot read is not.
    @Test func theZAPHandlerAdmitsKnownCurveKeysOnly() throws {
        func request(mechanism: String = "CURVE", key: String?) -> [Data] {
            var frames = ["1.0", "7", "", "10.0.0.9", "", mechanism].map { Data($0.utf8) }
            if let key { frames.append(CurveKeyPair.bytes(key)!) }
            return frames
        }
        func status(_ frames: [Data]) -> (String, String) {
            let reply = ZAPHandler.answer(frames, keyring: Self.keyring).0
            #expect(reply.count == 6 && reply[0] == Data("1.0".utf8))
            return (String(decoding: reply[2], as: UTF8.self), String(decoding: reply[4], as: UTF8.self))
        }
        #expect(status(request(key: Self.client.publicKey)) == ("200", "gateway"))
        #expect(ZAPHandler.answer(request(key: Self.client.publicKey), keyring: Self.keyring).0[1] == Data("7".utf8), "the request id comes back")
        #expect(status(request(key: try CurveKeyPair.generate().publicKey)).0 == "400")
        #expect(status(request(mechanism: "NULL", key: nil)).0 == "400")
        #expect(status(request(mechanism: "PLAIN", key: Self.client.publicKey)).0 == "400")
        #expect(status([Data("2.0".utf8)]).0 == "500")
    }

    @Test func aClientWithAKnownKeyIsAnswered() async throws {
        let (bus, server) = try curveServer()
        defer { server.stop(); bus.stop() }
        let good = node(.curve(Self.client, Self.keyring))
        #expect(try await ask(good, server.endpoint, timeout: .seconds(5)) == .success("hi!"))
    }

    @Test func aPlainClientGetsNoAnswer() async throws {
        let (bus, server) = try curveServer()
        defer { server.stop(); bus.stop() }
        // No handshake completes, so the request is never even queued to the server.
        #expect(try await ask(node(.plain), server.endpoint) == .failure(.unavailable))
    }

    @Test func aClientWithAnUnknownKeyIsRefusedAndLogged() async throws {
        let (bus, server) = try curveServer()
        defer { server.stop(); bus.stop() }
        let stranger = try CurveKeyPair.generate()
        // It knows the server's key (public, after all), but its own is on no list.
        #expect(try await ask(node(.curve(stranger, Self.keyring)), server.endpoint) == .failure(.unavailable))
        #expect(sink.lines.contains { $0.contains("bus client refused") && $0.contains(stranger.publicKey) })
        // Logged once however often it came back (every 100 ms).
        #expect(sink.lines.filter { $0.contains(stranger.publicKey) }.count == 1)
        // A client that trusts a wrong server key does not get through either.
        let misled = BusKeyring([.init(name: "test", key: stranger.publicKey), .init(name: "gateway", key: Self.client.publicKey)])
        #expect(try await ask(node(.curve(Self.client, misled)), server.endpoint) == .failure(.unavailable))
    }

    /// Fail closed: libzmq's CURVE admits any key when no ZAP handler answers, so a server whose
    /// node's handler is gone (stopped too early) must refuse even a known key.
    @Test func aServerWithoutItsZAPHandlerAdmitsNobody() async throws {
        let (bus, server) = try curveServer()
        defer { server.stop() }
        let good = node(.curve(Self.client, Self.keyring))
        #expect(try await ask(good, server.endpoint, timeout: .seconds(5)) == .success("hi!"))
        bus.stop()  // the ZAP handler goes; the server socket stays bound
        #expect(try await ask(good, server.endpoint) == .failure(.unavailable))
    }

    @Test func aFrameOverTheLimitCostsItsSenderTheConnectionNotTheServerItsLife() async throws {
        let (bus, server) = try curveServer(maxMessageSize: 64 << 10)
        defer { server.stop(); bus.stop() }
        let loud = node(.curve(Self.client, Self.keyring), maxMessageSize: 8 << 20)
        let client = try BusClient(bus: loud, service: "test", connect: [server.endpoint])
        defer { client.stop() }
        #expect(try await client.request(Echo(text: "before")).text == "before!")
        let big = try JSONEncoder().encode(Envelope(id: "big", type: Echo.type, body: Echo(text: String(repeating: "x", count: 1 << 20))))
        await #expect(throws: ServiceError.timeout) { try await client.requestRaw(big, id: "big", timeout: .milliseconds(700)) }
        // The same client, connected again, and another one, are answered.
        #expect(try await client.request(Echo(text: "after"), timeout: .seconds(5)).text == "after!")
        #expect(try await ask(node(.curve(Self.client, Self.keyring)), server.endpoint, timeout: .seconds(5)) == .success("hi!"))
        // Just under the limit is fine.
        let fits = try JSONEncoder().encode(Envelope(id: "fits", type: Echo.type, body: Echo(text: String(repeating: "x", count: 60 << 10))))
        #expect(try await client.requestRaw(fits, id: "fits", timeout: .seconds(5)).count > 60 << 10)
    }

    /// Grant commands: a PUSH with an unknown key delivers nothing; one with a known key does.
    @Test func onlyKnownKeysPushToAPuller() async throws {
        let got = Mutex<Set<String>>([])
        var router = BusRouter(logger: logger)
        router.on(Echo.self) { req, _ in got.withLock { _ = $0.insert(req.text) }; return .init(text: "") }
        let bus = node(.curve(Self.server, Self.keyring))
        let puller = try Puller(bus: bus, bind: ["tcp://127.0.0.1:*"], router: router)
        defer { puller.stop(); bus.stop() }
        let forgers = [node(.plain), node(.curve(try CurveKeyPair.generate(), Self.keyring))]
        let good = node(.curve(Self.client, Self.keyring))
        let pushers = try (forgers + [good]).map { try Pusher(bus: $0, service: "test", connect: [puller.endpoint], logger: logger) }
        defer { pushers.forEach { $0.stop() } }
        for _ in 0..<40 where got.withLock({ !$0.contains("good") }) {
            pushers[0].push(Echo(text: "plain"))
            pushers[1].push(Echo(text: "stranger"))
            pushers[2].push(Echo(text: "good"))
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(got.withLock { $0 } == ["good"])
    }

    /// Events: a subscriber with an unknown key hears nothing; one with a known key hears them.
    @Test func onlyKnownKeysHearEvents() async throws {
        let bus = node(.curve(Self.server, Self.keyring))
        let publisher = try EventPublisher(bus: bus, bind: ["tcp://127.0.0.1:*"])
        defer { publisher.stop(); bus.stop() }
        let heard = Mutex<[String: Int]>([:])
        let logger = self.logger
        let listeners: [(String, BusNode)] = [("plain", node(.plain)), ("stranger", node(.curve(try CurveKeyPair.generate(), Self.keyring))),
                                              ("good", node(.curve(Self.client, Self.keyring)))]
        let subscribers = try listeners.map { name, bus in
            try EventSubscriber(bus: bus, service: "test", connect: [publisher.endpoint], logger: logger, handlers: [
                Noted.topic: { _ in heard.withLock { $0[name, default: 0] += 1 } },
            ])
        }
        defer { subscribers.forEach { $0.stop() } }
        for i in 0..<60 where heard.withLock({ $0["good", default: 0] }) < 5 {
            publisher.publish(Noted(n: i))
            try await Task.sleep(for: .milliseconds(30))
        }
        #expect(heard.withLock { $0 }.keys.sorted() == ["good"])
    }

    @Test func settingsRequireKeysUnlessPlainIsAskedFor() throws {
        let dir = try Project.temporaryDirectory("keys")
        defer { try? FileManager.default.removeItem(at: dir) }
        let secretFile = dir.appendingPathComponent("coupons.key").path, listFile = dir.appendingPathComponent("public-keys").path
        try (Self.server.secretKey + "\n").write(toFile: secretFile, atomically: true, encoding: .utf8)
        try Self.keyring.text.write(toFile: listFile, atomically: true, encoding: .utf8)
        func options(_ values: [String: String]) throws -> BusOptions { try BusOptions(env: Environment(values)) }
        func problem(_ values: [String: String]) -> ConfigError? {
            do { _ = try options(values); return nil } catch { return error as? ConfigError }
        }
        // CURVE is the default, and needs both settings.
        #expect(problem([:])?.variable == "REDEEM_BUS_SECRET_KEY")
        #expect(problem(["REDEEM_BUS_SECRET_KEY_FILE": secretFile])?.variable == "REDEEM_BUS_PUBLIC_KEYS")
        let fromFiles = try options(["REDEEM_BUS_SECRET_KEY_FILE": secretFile, "REDEEM_BUS_PUBLIC_KEYS_FILE": listFile])
        guard case .curve(let keys, let ring) = fromFiles.security else { Issue.record("not CURVE"); return }
        #expect(keys.publicKey == Self.server.publicKey && ring == Self.keyring)
        let inline = try options(["REDEEM_BUS_SECRET_KEY": Self.server.secretKey, "REDEEM_BUS_PUBLIC_KEYS": Self.keyring.text.replacingOccurrences(of: "\n", with: ",")])
        guard case .curve(_, let inlineRing) = inline.security else { Issue.record("not CURVE"); return }
        #expect(inlineRing == Self.keyring)
        // Plain only when asked for.
        guard case .plain = try options(["REDEEM_BUS_SECURITY": "plain"]).security else { Issue.record("not plain"); return }
        #expect(problem(["REDEEM_BUS_SECURITY": "none"])?.variable == "REDEEM_BUS_SECURITY")
        // Bad values name their variable, and a secret is never echoed.
        let wrong = problem(["REDEEM_BUS_SECRET_KEY": String(Self.server.secretKey.dropLast()) + "~", "REDEEM_BUS_PUBLIC_KEYS_FILE": listFile])
        #expect(wrong?.variable == "REDEEM_BUS_SECRET_KEY")
        #expect(!(wrong?.description.contains(String(Self.server.secretKey.prefix(20))) ?? true))
        #expect(problem(["REDEEM_BUS_SECRET_KEY": Self.server.secretKey, "REDEEM_BUS_SECRET_KEY_FILE": secretFile])?.variable == "REDEEM_BUS_SECRET_KEY")
        #expect(problem(["REDEEM_BUS_SECRET_KEY_FILE": secretFile + ".nope", "REDEEM_BUS_PUBLIC_KEYS_FILE": listFile])?.variable == "REDEEM_BUS_SECRET_KEY_FILE")
        #expect(problem(["REDEEM_BUS_SECRET_KEY_FILE": secretFile, "REDEEM_BUS_PUBLIC_KEYS": "coupons"])?.variable == "REDEEM_BUS_PUBLIC_KEYS")
        // The size limit: 4 MiB unless set, at least 64 KiB.
        #expect(try options(["REDEEM_BUS_SECURITY": "plain"]).maxMessageSize == 4 << 20)
        #expect(try options(["REDEEM_BUS_SECURITY": "plain", "REDEEM_BUS_MAX_MESSAGE_BYTES": "1048576"]).maxMessageSize == 1 << 20)
        #expect(problem(["REDEEM_BUS_SECURITY": "plain", "REDEEM_BUS_MAX_MESSAGE_BYTES": "1000"])?.variable == "REDEEM_BUS_MAX_MESSAGE_BYTES")
    }

    /// A caller that is given no key for the service it connects to fails at start, naming why.
    @Test func aClientWithoutItsServicesKeyCannotStart() throws {
        let bus = node(.curve(Self.client, BusKeyring([.init(name: "gateway", key: Self.client.publicKey)])))
        #expect(throws: ConfigError.self) { try BusClient(bus: bus, service: "coupons", connect: ["tcp://127.0.0.1:1"]) }
    }

    /// Which key may send what: the outbox's commands only from coupons, the replies to them only
    /// from grants, API key messages only from the gateway, `ping` from anyone.
    @Test(arguments: [
        ("coupons", GrantCommand.type, true), ("gateway", GrantCommand.type, false), ("grants", GrantCommand.type, false),
        ("gateway", RedemptionCompletedNotice.type, false), ("gateway", StoreProvisionCommand.type, false), ("gateway", StoreSwitchCommand.type, false),
        ("coupons", StoreSwitchCommand.type, true), ("grants", OutboxAck.type, true), ("gateway", OutboxAck.type, false),
        ("gateway", Coupons.CompleteMany.type, false), ("grants", Coupons.CompleteMany.type, true), ("grants", Coupons.Release.type, true),
        ("gateway", APIKeys.Create.type, true), ("coupons", APIKeys.Create.type, false), ("grants", APIKeys.Create.type, false),
        ("accounts", APIKeys.Create.type, false), ("grants", APIKeys.Authenticate.type, false),
        ("gateway", Coupons.Redeem.type, true), ("coupons", Coupons.Redeem.type, false), ("accounts", Grants.MoveHolder.type, true),
        ("gateway", Grants.MoveHolder.type, false), ("gateway", Grants.StoreView.type, true), ("accounts", Grants.StoreView.type, true),
        ("ops-tool", Ping.type, true), ("ops-tool", Coupons.Redeem.type, false), ("grants", Ping.type, true),
        ("coupons", AppStores.List.type, true), ("gateway", AppStores.List.type, true),
        ("accounts", AppStores.List.type, false), ("coupons", AppStores.Put.type, false),
        ("gateway", Grants.StripeVerify.type, true), ("coupons", Grants.StripeVerify.type, false),
    ])
    func eachKeySendsOnlyItsMessages(sender: String, type: String, allowed: Bool) {
        #expect(BusPermissions.allows(sender, toSend: type) == allowed)
    }

    /// A client holding the gateway's key, over real CURVE sockets: its grant command is not run,
    /// its request for a command is answered `forbidden`, and both are logged; coupons' key pushes
    /// the same command and it runs. Coupons' key may not ask for an API key; the gateway's may.
    @Test func theGatewaysKeyMayNotSendGrantCommands() async throws {
        let couponsKey = try CurveKeyPair.generate()
        let keyring = BusKeyring(Self.keyring.entries + [.init(name: "coupons", key: couponsKey.publicKey)])
        let granted = Mutex<Set<String>>([])
        var router = BusRouter(logger: logger)
        router.on(GrantCommand.self) { c, _ in granted.withLock { _ = $0.insert(c.appUserId) }; return Empty() }
        router.on(APIKeys.Create.self) { req, _ in throw ServiceError(.invalid, "answered \(req.name)") }
        let bus = node(.curve(Self.server, keyring))
        let puller = try Puller(bus: bus, bind: ["tcp://127.0.0.1:*"], router: router)
        let server = try BusServer(bus: bus, bind: ["tcp://127.0.0.1:*"], router: router, logger: logger)
        defer { puller.stop(); server.stop(); bus.stop() }
        let (gateway, coupons) = (node(.curve(Self.client, keyring)), node(.curve(couponsKey, keyring)))
        let pushers = try [gateway, coupons].map { try Pusher(bus: $0, service: "test", connect: [puller.endpoint], logger: logger) }
        defer { pushers.forEach { $0.stop() } }
        for _ in 0..<40 where granted.withLock({ !$0.contains("from-coupons") }) {
            pushers[0].push(Self.command(for: "from-gateway"))
            pushers[1].push(Self.command(for: "from-coupons"))
            try await Task.sleep(for: .milliseconds(50))
        }
        try await Task.sleep(for: .milliseconds(200))
        #expect(granted.withLock { $0 } == ["from-coupons"])
        #expect(sink.lines.contains { $0.contains("forbidden bus message") && $0.contains("\"bus.sender\":\"gateway\"") && $0.contains(GrantCommand.type) })

        func ask<R: BusRequest>(_ node: BusNode, _ request: R) async throws -> ServiceError? {
            let client = try BusClient(bus: node, service: "test", connect: [server.endpoint])
            defer { client.stop() }
            do { _ = try await client.request(request, timeout: .seconds(5)); return nil } catch let e as ServiceError { return e }
        }
        #expect(
            try await ask(gateway, Self.command(for: "asked"))
                == ServiceError(.forbidden, "gateway may not send \(GrantCommand.type)"))
        #expect(
            try await ask(
                coupons,
                APIKeys.Create(
                    name: "mine", role: .admin, mode: .live, callerMode: .live,
                    app: DefaultApp.id))?.code == .forbidden)
        #expect(
            try await ask(
                gateway,
                APIKeys.Create(
                    name: "mine", role: .admin, mode: .live, callerMode: .live,
                    app: DefaultApp.id))?.message == "answered mine")
        #expect(granted.withLock { $0 } == ["from-coupons"])
    }

    static func command(for appUserId: String) -> GrantCommand {
        let duration = CouponDuration(unit: "year", count: 1000)
        return GrantCommand(redemptionId: UUID(), accountId: UUID(), appUserId: appUserId, entitlementId: "pro", duration: duration, sandbox: false,
                            coupon: PublicCoupon(code: "FORGED", kind: .freePeriod, percentOff: nil, amountOff: nil, duration: duration,
                                                 periodCount: nil, entitlementId: "pro"),
                            platform: .web, productId: nil, reservedAt: Date(), mode: .live)
    }
}
