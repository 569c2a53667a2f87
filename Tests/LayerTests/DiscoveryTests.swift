import Foundation
import Synchronization
import TestSupport
import Testing
@testable import Core
@testable import Telemetry
@testable import Bus

/// Instances found by name: callers look a host name up themselves, connect to every address it
/// has, and follow it as instances come and go. Instances here are real servers bound to
/// distinct loopback addresses (Linux routes all of 127/8 to `lo`) on one port, as replicas
/// behind one DNS name are, and the names come from a resolver the test controls.
@Suite(.serialized) struct DiscoveryTests {
    let sink = LogSink(capturing: ())
    var logger: Logger { Logger(service: "test", sink: sink) }

    func node(_ resolver: any HostResolver) -> BusNode {
        BusNode(BusOptions(security: .plain, resolveInterval: .milliseconds(100), resolver: resolver), logger: logger)
    }

    /// Counts what each instance handled, by request text.
    final class Handled: Sendable {
        private let seen = Mutex<[String: [String]]>([:])
        func add(_ instance: String, _ text: String) { seen.withLock { $0[instance, default: []].append(text) } }
        func count(_ instance: String) -> Int { seen.withLock { $0[instance]?.count ?? 0 } }
        var all: [String] { seen.withLock { $0.values.flatMap { $0 } } }
    }

    final class Flag: Sendable {
        private let value = Atomic<Bool>(false)
        func set() { value.store(true, ordering: .releasing) }
        var isSet: Bool { value.load(ordering: .acquiring) }
    }

    /// An instance answering `Echo` with its name, after `delayMs` (so requests are in flight
    /// when it leaves).
    func instance(_ name: String, at address: String, port: Int, handled: Handled, bus: BusNode, delayMs: Int = 20) throws -> BusServer {
        var router = BusRouter(logger: logger)
        router.on(Echo.self) { req, _ in
            try await Task.sleep(for: .milliseconds(delayMs))
            handled.add(name, req.text)
            return .init(text: name)
        }
        return try BusServer(bus: bus, bind: ["tcp://\(address):\(port)"], router: router, logger: logger)
    }

    func until(_ seconds: Double = 10, _ check: () -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if check() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return check()
    }

    @Test func anEndpointNamesAHostOrIsUsedAsItIs() {
        let named = BusEndpoint("tcp://coupons:7102")
        #expect(named.host == "coupons" && named.port == "7102")
        #expect(named.peers(["10.0.0.5", "fd00::7"]) == ["tcp://10.0.0.5:7102", "tcp://[fd00::7]:7102"])
        #expect(named.peers(nil) == [], "not answered yet: nothing to connect to")
        for literal in ["tcp://127.0.0.1:7102", "tcp://[::1]:7102", "tcp://*:7102", "ipc:///tmp/x", "inproc://x", "tcp://10.0.0.1:1;coupons:7102"] {
            #expect(BusEndpoint(literal).host == nil, "\(literal)")
            #expect(BusEndpoint(literal).peers(nil) == [literal])
        }
        let wanted = BusEndpoint.peers([named, BusEndpoint("tcp://127.0.0.1:9"), BusEndpoint("tcp://grants:7103")],
                                       answers: ["coupons": ["10.0.0.5", "10.0.0.6"]])
        #expect(wanted == ["tcp://10.0.0.5:7102", "tcp://10.0.0.6:7102", "tcp://127.0.0.1:9"])
    }

    @Test func theSystemResolverAnswersAddressesAsThemselves() throws {
        #expect(try SystemResolver().addresses(of: "127.0.0.2") == ["127.0.0.2"])
        #expect(try SystemResolver().addresses(of: "::1") == ["::1"])
    }

    @Test func aHostsFileListsEveryAddressOfANameAndLeavesOtherNamesToTheFallback() throws {
        let dir = try Project.temporaryDirectory("hosts")
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("hosts").path
        try "# instances\n127.0.0.2 grants.test\n127.0.0.3 grants.test other\n\n127.0.0.3 grants.test # twice\n".write(toFile: path, atomically: true, encoding: .utf8)
        let resolver = HostsFileResolver(path: path, fallback: TestResolver(["coupons.test": ["127.0.0.9"]]))
        #expect(try resolver.addresses(of: "grants.test") == ["127.0.0.2", "127.0.0.3"])
        #expect(try resolver.addresses(of: "other") == ["127.0.0.3"])
        #expect(try resolver.addresses(of: "coupons.test") == ["127.0.0.9"])
        #expect(try resolver.addresses(of: "nowhere.test") == [])
        #expect(throws: LookupError.self) { try HostsFileResolver(path: path + ".gone").addresses(of: "grants.test") }
    }

    /// Under steady load, a third instance joins and the first leaves the name. Every request is
    /// answered, by exactly one instance; the one that left gets no new request once its absence is
    /// seen, and those it had in flight are still answered (its connection outlives them).
    @Test func requestsFollowANameAsInstancesComeAndGoAndNothingIsLost() async throws {
        let resolver = TestResolver(["svc.test": ["127.0.0.2", "127.0.0.3"]])
        let port = try await offThePool { try Project.freePort() }
        let servers = node(resolver), handled = Handled()
        let a = try instance("a", at: "127.0.0.2", port: port, handled: handled, bus: servers)
        let b = try instance("b", at: "127.0.0.3", port: port, handled: handled, bus: servers)
        defer { a.stop(); b.stop() }
        let bus = node(resolver)
        defer { bus.stop() }
        let client = try BusClient(bus: bus, service: "test", connect: ["tcp://svc.test:\(port)"])
        defer { client.stop() }

        let stopLoad = Flag()
        let load = Task {
            try await withThrowingTaskGroup(of: [(String, Result<String, ServiceError>)].self) { group in
                for worker in 0..<8 {
                    group.addTask {
                        var results: [(String, Result<String, ServiceError>)] = []
                        var i = 0
                        while !stopLoad.isSet {
                            let text = "\(worker)-\(i)"
                            i += 1
                            do { results.append((text, .success(try await client.request(Echo(text: text), timeout: .seconds(5)).text))) } catch let e as ServiceError {
                                results.append((text, .failure(e)))
                            }
                        }
                        return results
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
        }
        #expect(try await until { handled.count("a") > 20 && handled.count("b") > 20 }, "both instances take requests")

        let c = try instance("c", at: "127.0.0.4", port: port, handled: handled, bus: servers)
        defer { c.stop() }
        resolver.set("svc.test", ["127.0.0.2", "127.0.0.3", "127.0.0.4"])
        #expect(try await until { handled.count("c") > 20 }, "the instance that joined takes requests")

        resolver.set("svc.test", ["127.0.0.3", "127.0.0.4"])
        try await Task.sleep(for: .seconds(1))
        let aAfterLeaving = handled.count("a")
        try await Task.sleep(for: .milliseconds(500))
        #expect(handled.count("a") == aAfterLeaving, "no new request reaches an instance that left the name")
        #expect(await a.drain(seconds: 1), "nothing was left in flight at it")
        #expect(try await until { handled.count("b") > 200 && handled.count("c") > 200 })

        stopLoad.set()
        let results = try await load.value
        let failures = results.filter { if case .failure = $0.1 { true } else { false } }
        #expect(failures.isEmpty, "\(failures.count) of \(results.count) requests failed: \(failures.prefix(3))")
        #expect(handled.all.count == results.count, "each request handled once")
        #expect(Set(handled.all).count == results.count)
    }

    /// Grant commands: a PUSH connects to every address of the name, and leaves one that goes.
    @Test func pushesFollowAName() async throws {
        let resolver = TestResolver(["cmd.test": ["127.0.0.2", "127.0.0.3"]])
        let port = try await offThePool { try Project.freePort() }
        let handled = Handled(), servers = node(resolver)
        let pullers = try ["127.0.0.2", "127.0.0.3", "127.0.0.4"].map { address in
            var router = BusRouter(logger: logger)
            router.on(Echo.self) { req, _ in handled.add(address, req.text); return .init(text: "") }
            return try Puller(bus: servers, bind: ["tcp://\(address):\(port)"], router: router)
        }
        defer { pullers.forEach { $0.stop() } }
        let bus = node(resolver)
        defer { bus.stop() }
        let pusher = try Pusher(bus: bus, service: "test", connect: ["tcp://cmd.test:\(port)"], logger: logger)
        defer { pusher.stop() }
        var n = 0
        func push(until check: () -> Bool) async throws -> Bool {
            for _ in 0..<200 where !check() {
                for _ in 0..<10 { pusher.push(Echo(text: "\(n)")); n += 1 }
                try await Task.sleep(for: .milliseconds(20))
            }
            return check()
        }
        #expect(try await push { handled.count("127.0.0.2") > 10 && handled.count("127.0.0.3") > 10 })
        resolver.set("cmd.test", ["127.0.0.3", "127.0.0.4"])
        #expect(try await push { handled.count("127.0.0.4") > 10 })
        try await Task.sleep(for: .milliseconds(300))
        let gone = handled.count("127.0.0.2")
        #expect(try await push { handled.count("127.0.0.4") > 100 })
        #expect(handled.count("127.0.0.2") == gone, "the instance that left gets no more")
    }

    /// Events: a SUB hears every instance of the publishing service, the ones that join too.
    @Test func subscribersHearEveryInstanceOfAName() async throws {
        let resolver = TestResolver(["events.test": ["127.0.0.2"]])
        let port = try await offThePool { try Project.freePort() }
        let servers = node(resolver)
        let publishers = try ["127.0.0.2", "127.0.0.3"].map { try EventPublisher(bus: servers, bind: ["tcp://\($0):\(port)"]) }
        defer { publishers.forEach { $0.stop() } }
        let heard = Mutex<Set<Int>>([])
        let bus = node(resolver)
        defer { bus.stop() }
        let logger = self.logger
        let subscriber = try EventSubscriber(bus: bus, service: "test", connect: ["tcp://events.test:\(port)"], logger: logger, handlers: [
            Noted.topic: { data in
                if let e = EventSubscriber.decode(Noted.self, data, logger: logger) { heard.withLock { _ = $0.insert(e.body.n) } }
            },
        ])
        defer { subscriber.stop() }
        func publish(until n: Int) async throws -> Bool {
            for _ in 0..<150 where !heard.withLock({ $0.contains(n) }) {
                for (i, p) in publishers.enumerated() { p.publish(Noted(n: i)) }
                try await Task.sleep(for: .milliseconds(20))
            }
            return heard.withLock { $0.contains(n) }
        }
        #expect(try await publish(until: 0))
        resolver.set("events.test", ["127.0.0.2", "127.0.0.3"])
        #expect(try await publish(until: 1), "the instance that joined is heard")
    }

    /// A DNS outage leaves the peers as they were; a name that stops existing takes them away.
    @Test func aFailedLookupKeepsTheLastAnswer() async throws {
        let resolver = TestResolver(["svc.test": ["127.0.0.2"]])
        let port = try await offThePool { try Project.freePort() }
        let servers = node(resolver), handled = Handled()
        let a = try instance("a", at: "127.0.0.2", port: port, handled: handled, bus: servers, delayMs: 0)
        defer { a.stop() }
        let bus = node(resolver)
        defer { bus.stop() }
        let client = try BusClient(bus: bus, service: "test", connect: ["tcp://svc.test:\(port)"])
        defer { client.stop() }
        #expect(try await client.request(Echo(text: "1"), timeout: .seconds(5)).text == "a")
        resolver.fail(true)
        let asked = resolver.lookupCount
        #expect(try await until { resolver.lookupCount > asked + 3 }, "looked up again, and failed")
        #expect(try await client.request(Echo(text: "2"), timeout: .seconds(5)).text == "a")
        #expect(sink.lines.contains { $0.contains("bus host lookup failed") })
        resolver.fail(false)
        resolver.set("svc.test", [])
        #expect(try await until(5) { sink.lines.contains { $0.contains("\"bus.addresses\":\"\"") } })
        try await Task.sleep(for: .milliseconds(200))
        await #expect(throws: ServiceError.unavailable) { try await client.request(Echo(text: "3"), timeout: .milliseconds(300)) }
    }

    /// A name with an IPv6 address is reached over IPv6.
    @Test func aNameThatResolvesToIPv6IsReached() async throws {
        let resolver = TestResolver(["v6.test": ["::1"]])
        let port = try await offThePool { try Project.freePort() }
        let servers = node(resolver), handled = Handled()
        guard let a = try? instance("a", at: "[::1]", port: port, handled: handled, bus: servers, delayMs: 0) else {
            return  // no IPv6 loopback on this machine
        }
        defer { a.stop() }
        let bus = node(resolver)
        defer { bus.stop() }
        let client = try BusClient(bus: bus, service: "test", connect: ["tcp://v6.test:\(port)"])
        defer { client.stop() }
        #expect(try await client.request(Echo(text: "6"), timeout: .seconds(5)).text == "a")
    }
}
