import Foundation
import Synchronization
import TestSupport
import Testing
@testable import Core
@testable import Telemetry
@testable import Database
@testable import Bus
@testable import Runtime

struct Echo: BusRequest {
    static let type = "test.echo"
    var text: String
    var delayMs: Int = 0
    struct Response: Codable, Sendable { var text: String }
}

struct EchoMany: BusBatch {
    static let type = "test.echoMany"
    struct Response: Codable, Sendable { var answers: [Echo.Response] }
    var items: [Echo]
    static func answers(in response: Response) -> [Result<Echo.Response, any Error>] { response.answers.map { .success($0) } }
}

struct Fail: BusRequest {
    static let type = "test.fail"
    typealias Response = Empty
}

struct Noted: BusEvent {
    static let topic = "test.noted"
    var n: Int
}

/// Which instance answered.
struct Which: BusRequest {
    static let type = "test.which"
    struct Response: Codable, Sendable { var name: String }
}

/// How many handlers run at once, and the most seen.
final class InFlight: Sendable {
    private let state = Mutex((now: 0, most: 0))
    func enter() { state.withLock { $0.now += 1; $0.most = max($0.most, $0.now) } }
    func leave() { state.withLock { $0.now -= 1 } }
    var most: Int { state.withLock { $0.most } }
}

@Suite struct BusTests {
    /// Requests' deadline where time is not what a test is about: the full suite runs hundreds of
    /// tests at once on two cores, and 5 s was not always enough there (docs/testing.md).
    static let deadline = Duration.seconds(30)
    let logger = Logger(service: "test", sink: LogSink(capturing: ()))
    let bus = BusNode(BusOptions(security: .plain), logger: Logger(service: "test", sink: LogSink(capturing: ())))

    func server(_ endpoint: String = "tcp://127.0.0.1:*", inFlight: InFlight? = nil) throws -> BusServer {
        var router = BusRouter(logger: logger)
        router.on(Echo.self) { req, ctx in
            inFlight?.enter()
            defer { inFlight?.leave() }
            if req.delayMs > 0 { try await Task.sleep(for: .milliseconds(req.delayMs)) }
            #expect(ctx.deadline != nil)
            return .init(text: req.text + "!")
        }
        router.on(Fail.self) { _, _ in throw ServiceError(.codeInUse, "taken", field: "code") }
        return try BusServer(bus: bus, bind: [endpoint], router: router, logger: logger)
    }

    @Test func manyRequestsInFlightOnOneSocketGetTheirOwnReplies() async throws {
        let inFlight = InFlight()
        let s = try server(inFlight: inFlight)
        defer { s.stop() }
        let client = try BusClient(bus: bus, service: "test", connect: [s.endpoint], defaultTimeout: Self.deadline)
        defer { client.stop() }
        let replies = try await withThrowingTaskGroup(of: (String, String).self) { group in
            for i in 0..<200 {
                // Replies come back out of order: later requests have shorter delays.
                group.addTask { ("\(i)", try await client.request(Echo(text: "\(i)", delayMs: (200 - i) % 50)).text) }
            }
            return try await group.reduce(into: [(String, String)]()) { $0.append($1) }
        }
        #expect(replies.count == 200)
        #expect(replies.allSatisfy { $0.1 == $0.0 + "!" })
        // In flight together, not one after another: many handlers were waiting at the same time
        // (counted, not timed, so a busy machine cannot fail it).
        #expect(inFlight.most >= 20)
    }

    @Test func serviceErrorsArriveWithTheirCode() async throws {
        let s = try server()
        defer { s.stop() }
        let client = try BusClient(bus: bus, service: "test", connect: [s.endpoint], defaultTimeout: Self.deadline)
        defer { client.stop() }
        await #expect(throws: ServiceError(.codeInUse, "taken", field: "code")) { try await client.request(Fail()) }
    }

    @Test func aLateReplyIsATimeoutAndIsDropped() async throws {
        let s = try server()
        defer { s.stop() }
        let client = try BusClient(bus: bus, service: "test", connect: [s.endpoint], defaultTimeout: Self.deadline)
        defer { client.stop() }
        await #expect(throws: ServiceError.timeout) { try await client.request(Echo(text: "slow", delayMs: 400), timeout: .milliseconds(100)) }
        try await Task.sleep(for: .milliseconds(400))  // the late reply arrives and is dropped
        #expect(try await client.request(Echo(text: "next")).text == "next!")
    }

    @Test func noServerMeansUnavailableAtTheDeadline() async throws {
        let port = try await offThePool { try Project.freePort() }
        let client = try BusClient(
            bus: bus, service: "test", connect: ["tcp://127.0.0.1:\(port)"], defaultTimeout: Self.deadline)
        defer { client.stop() }
        let started = ContinuousClock.now
        await #expect(throws: ServiceError.unavailable) { try await client.request(Echo(text: "x"), timeout: .milliseconds(300)) }
        // Answered at its own deadline, not at the client's default (30 s): in the full run a test
        // of 0.1 s takes 7-9 s of wall time (docs/testing.md), so the bound sits between the two.
        #expect(ContinuousClock.now - started < Self.deadline / 2)
    }

    @Test func aRequestWaitsForAServerThatComesUpBeforeItsDeadline() async throws {
        let endpoint = "tcp://127.0.0.1:\(try await offThePool { try Project.freePort() })"
        let client = try BusClient(bus: bus, service: "test", connect: [endpoint], defaultTimeout: Self.deadline)
        defer { client.stop() }
        // The deadline is far past the server's start, so only a request that gave up early fails,
        // not a slow machine.
        async let reply = client.request(Echo(text: "early"), timeout: .seconds(15))
        try await Task.sleep(for: .milliseconds(200))
        let s = try server(endpoint)
        defer { s.stop() }
        #expect(try await reply.text == "early!")
    }

    @Test func malformedAndUnknownMessagesAreAnsweredWithErrors() async throws {
        let s = try server()
        defer { s.stop() }
        let client = try BusClient(bus: bus, service: "test", connect: [s.endpoint], defaultTimeout: Self.deadline)
        defer { client.stop() }
        func reply(_ payload: String, id: String) async throws -> ServiceError? {
            // A generous deadline: this is about the error codes, and the whole suite shares two cores.
            let data = try await client.requestRaw(Data(payload.utf8), id: id, timeout: .seconds(15))
            return try JSONDecoder().decode(ReplyEnvelope<Empty>.self, from: data).error
        }
        // Connected first: an undecodable frame that can't be sent yet is not retried.
        #expect(try await client.request(Echo(text: "hello"), timeout: .seconds(15)).text == "hello!")
        #expect(try await reply("garbage{", id: "")?.code == .malformedMessage)
        #expect(try await reply(#"{"v":1,"id":"a1","type":"no.such","body":{}}"#, id: "a1")?.code == .unknownMessageType)
        #expect(try await reply(#"{"v":9,"id":"a2","type":"test.echo","body":{"text":"x"}}"#, id: "a2")?.code == .unsupportedVersion)
        #expect(try await reply(#"{"v":1,"id":"a3","type":"test.echo","body":{"txt":1}}"#, id: "a3")?.code == .malformedMessage)
        // And the server still answers.
        #expect(try await client.request(Echo(text: "ok")).text == "ok!")
    }

    @Test func callersConnectToEveryInstance() async throws {
        let a = try server(), b = try server()
        defer { a.stop(); b.stop() }
        let client = try BusClient(bus: bus, service: "test", connect: [a.endpoint, b.endpoint], defaultTimeout: Self.deadline)
        defer { client.stop() }
        for i in 0..<20 { #expect(try await client.request(Echo(text: "\(i)")).text == "\(i)!") }
        b.stop()
        try await Task.sleep(for: .milliseconds(200))
        for i in 0..<10 { #expect(try await client.request(Echo(text: "\(i)"), timeout: Self.deadline).text == "\(i)!") }
    }

    @Test func eventsReachSubscribers() async throws {
        let publisher = try EventPublisher(bus: bus, bind: ["tcp://127.0.0.1:*"])
        defer { publisher.stop() }
        let endpoint = publisher.endpoint
        let received = Mutex<[Int]>([])
        let logger = self.logger
        let subscriber = try EventSubscriber(bus: bus, service: "test", connect: [endpoint], logger: logger, handlers: [
            Noted.topic: { data in
                if let e = EventSubscriber.decode(Noted.self, data, logger: logger) { received.withLock { $0.append(e.body.n) } }
            },
        ])
        defer { subscriber.stop() }
        // PUB/SUB drops messages until the subscription has propagated: publish until one lands.
        for i in 0..<100 where received.withLock({ $0.isEmpty }) {
            publisher.publish(Noted(n: i))
            try await Task.sleep(for: .milliseconds(20))
        }
        publisher.publish(Noted(n: -1))
        try await Task.sleep(for: .milliseconds(100))
        #expect(received.withLock { $0.contains(-1) })
    }

    @Test func pushedCommandsReachThePuller() async throws {
        let got = Mutex<Set<String>>([])
        var router = BusRouter(logger: logger)
        router.on(Echo.self) { req, _ in got.withLock { _ = $0.insert(req.text) }; return .init(text: "") }
        // Bound on a port the kernel picks as it binds: a port found free a moment earlier can be
        // taken meanwhile by another test's outgoing connection.
        let puller = try Puller(bus: bus, bind: ["tcp://127.0.0.1:*"], router: router)
        defer { puller.stop() }
        let endpoint = puller.endpoint
        let pusher = try Pusher(bus: bus, service: "test", connect: [endpoint], logger: logger)
        defer { pusher.stop() }
        try await Task.sleep(for: .milliseconds(100))  // connect
        for i in 0..<50 { pusher.push(Echo(text: "\(i)")) }
        for _ in 0..<50 where got.withLock({ $0.count }) < 50 { try await Task.sleep(for: .milliseconds(20)) }
        #expect(got.withLock { $0 } == Set((0..<50).map(String.init)))
    }

    /// An outbox row's JSON pushed with its binary form: the binary frame is what is decoded, and
    /// the JSON is what the handler keeps (`BusContext.message`). The two frames carry different
    /// texts here, so the test tells which frame each came from.
    @Test func aPushWithItsBinaryFormIsDecodedFromThatAndKeepsItsJSON() async throws {
        let got = Mutex<[(text: String, message: Data)]>([])
        var router = BusRouter(logger: logger)
        router.on(Echo.self) { req, context in
            got.withLock { $0.append((req.text, context.message)) }
            return .init(text: "")
        }
        let puller = try Puller(bus: bus, bind: ["tcp://127.0.0.1:*"], router: router)
        defer { puller.stop() }
        let pusher = try Pusher(bus: bus, service: "test", connect: [puller.endpoint], logger: logger)
        defer { pusher.stop() }
        let json = try JSONEncoder.bus.encode(Envelope(id: "e1", type: Echo.type, body: Echo(text: "json")))
        let binary = try BusCoding.encode(Envelope(id: "e1", type: Echo.type, body: Echo(text: "binary")))
        // A push before the connection is up is dropped (its sender sends it again in production),
        // so both are pushed until both texts have arrived, for at most 5 s.
        for _ in 0..<50 where Set(got.withLock { $0.map(\.text) }).count < 2 {
            pusher.pushRaw(json, binary: binary)
            pusher.pushRaw(json)
            try await Task.sleep(for: .milliseconds(100))
        }
        let received = got.withLock { $0 }
        #expect(Set(received.map(\.text)) == ["binary", "json"])
        #expect(!received.isEmpty && received.allSatisfy { $0.message == json })
    }

    /// A handler that cannot reach the database answers `unavailable` (the gateway's 503), any other
    /// unexpected error `internal`.
    @Test func aLostDatabaseTravelsAsUnavailableAndOtherFailuresAsInternal() async throws {
        var router = BusRouter(logger: logger)
        router.on(Echo.self) { req, _ in
            switch req.text {
            case "down": throw PGError(kind: .connection, message: "could not connect")
            case "closed": throw PGError(kind: .poolClosed, message: "pool closed")
            default: throw PGError(kind: .query, sqlState: "22P02", message: "bad input")
            }
        }
        let s = try BusServer(bus: bus, bind: ["tcp://127.0.0.1:*"], router: router, logger: logger)
        defer { s.stop() }
        let client = try BusClient(bus: bus, service: "test", connect: [s.endpoint], defaultTimeout: Self.deadline)
        defer { client.stop() }
        for (text, code) in [("down", ErrorCode.unavailable), ("closed", .unavailable), ("other", .internal)] {
            do {
                _ = try await client.request(Echo(text: text))
                Issue.record("\(text) answered")
            } catch let e as ServiceError {
                #expect(e.code == code, "\(text)")
            }
        }
    }

    /// A request of a type the router refuses for now (a service not started yet) gets that
    /// error, and its handler does not run; other types, and the same type once admitted, are
    /// handled.
    @Test func aRefusedTypeIsAnsweredWithoutRunningItsHandler() async throws {
        let started = Atomic<Bool>(false)
        let handled = Atomic<Int>(0)
        var router = BusRouter(logger: logger)
        router.on(Echo.self) { req, _ in
            handled.wrappingAdd(1, ordering: .relaxed)
            return .init(text: req.text + "!")
        }
        router.on(Fail.self) { _, _ in throw ServiceError(.codeInUse, "taken", field: "code") }
        router.refusing = { type in type == Fail.type || started.load(ordering: .relaxed) ? nil : .starting }
        let s = try BusServer(bus: bus, bind: ["tcp://127.0.0.1:*"], router: router, logger: logger)
        defer { s.stop() }
        let client = try BusClient(bus: bus, service: "test", connect: [s.endpoint], defaultTimeout: Self.deadline)
        defer { client.stop() }
        // The only instance refused it: that is the answer, at once (not at the deadline).
        let asked = ContinuousClock.now
        await #expect(throws: ServiceError.starting) { try await client.request(Echo(text: "early")) }
        #expect(ContinuousClock.now - asked < .seconds(10))
        #expect(handled.load(ordering: .relaxed) == 0)
        await #expect(throws: ServiceError(.codeInUse, "taken", field: "code")) { try await client.request(Fail()) }
        started.store(true, ordering: .relaxed)
        #expect(try await client.request(Echo(text: "now")).text == "now!")
        #expect(handled.load(ordering: .relaxed) == 1)
    }

    /// Two instances, one starting (it refuses `Echo` unhandled): every request is answered by the
    /// other, none with the refusal, and the starting one runs no handler.
    @Test func aRequestOneInstanceRefusesIsAnsweredByAnother() async throws {
        let handledByStarting = Atomic<Int>(0)
        func instance(_ name: String, starting: Bool) throws -> BusServer {
            var router = BusRouter(logger: logger)
            router.on(Echo.self) { req, _ in
                if starting { handledByStarting.wrappingAdd(1, ordering: .relaxed) }
                return .init(text: req.text + "!")
            }
            router.on(Which.self) { _, _ in .init(name: name) }
            if starting { router.refusing = { $0 == Echo.type ? .starting : nil } }
            return try BusServer(bus: bus, bind: ["tcp://127.0.0.1:*"], router: router, logger: logger)
        }
        let starting = try instance("starting", starting: true)
        defer { starting.stop() }
        let started = try instance("started", starting: false)
        defer { started.stop() }
        let client = try BusClient(bus: bus, service: "test", connect: [starting.endpoint, started.endpoint],
                                   defaultTimeout: Self.deadline)
        defer { client.stop() }
        // Requests go to instances in turn once both are connected: until both have answered.
        var seen: Set<String> = []
        let by = ContinuousClock.now + .seconds(20)
        while seen.count < 2, ContinuousClock.now < by { seen.insert(try await client.request(Which()).name) }
        #expect(seen == ["starting", "started"])
        let answers = try await withThrowingTaskGroup(of: String.self) { group in
            for i in 0..<40 { group.addTask { try await client.request(Echo(text: "\(i)")).text } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(answers == Set((0..<40).map { "\($0)!" }))
        #expect(handledByStarting.load(ordering: .relaxed) == 0)
    }

    /// A handler that gets a refusal from a service it called has run: its caller gets a plain
    /// `unavailable`, not the refusal, and does not send the request again.
    @Test func aRefusalAHandlerPassesOnIsNotSentAgain() async throws {
        let handled = Atomic<Int>(0)
        var router = BusRouter(logger: logger)
        router.on(Echo.self) { _, _ in
            handled.wrappingAdd(1, ordering: .relaxed)
            throw ServiceError.starting
        }
        let s = try BusServer(bus: bus, bind: ["tcp://127.0.0.1:*"], router: router, logger: logger)
        defer { s.stop() }
        let client = try BusClient(bus: bus, service: "test", connect: [s.endpoint], defaultTimeout: Self.deadline)
        defer { client.stop() }
        do {
            _ = try await client.request(Echo(text: "x"))
            Issue.record("answered")
        } catch let e as ServiceError {
            #expect(e.code == .unavailable)
            #expect(e.retryAfter == 1)
            #expect(!e.refusesUnhandled)
        }
        #expect(handled.load(ordering: .relaxed) == 1)
    }

    /// Stopping in order: a request being handled still gets its answer, one that arrives meanwhile
    /// is refused at once (not left to time out).
    @Test func drainingAnswersRequestsInProgressAndRefusesNewOnes() async throws {
        var router = BusRouter(logger: logger)
        router.on(Echo.self) { req, _ in
            try await Task.sleep(for: .milliseconds(400))
            return .init(text: req.text + "!")
        }
        let s = try BusServer(bus: bus, bind: ["tcp://127.0.0.1:*"], router: router, logger: logger)
        let client = try BusClient(bus: bus, service: "test", connect: [s.endpoint], defaultTimeout: Self.deadline)
        defer { client.stop() }
        async let first = client.request(Echo(text: "in progress"))
        try await Task.sleep(for: .milliseconds(100))
        async let drained = s.drain(seconds: 3)
        try await Task.sleep(for: .milliseconds(50))
        let began = ContinuousClock.now
        do {
            // A long timeout, so that "refused at once" and "left to time out" stay far apart
            // even when a busy machine stalls the test for seconds.
            _ = try await client.request(Echo(text: "late"), timeout: .seconds(30))
            Issue.record("a request during the drain was handled")
        } catch let e as ServiceError {
            #expect(e.code == .unavailable)
            #expect(ContinuousClock.now - began < .seconds(10), "refused at once")
        }
        #expect(try await first.text == "in progress!")
        #expect(await drained)
    }

    /// Items sent as one batch come back answered in order, in one message.
    @Test func batchesTravelAsOneMessageAndAnswerInOrder() async throws {
        let messages = Atomic<Int>(0)
        var router = BusRouter(logger: logger)
        router.on(EchoMany.self) { req, _ in
            messages.add(1, ordering: .relaxed)
            return .init(answers: req.items.map { .init(text: $0.text + "!") })
        }
        let s = try BusServer(bus: bus, bind: ["tcp://127.0.0.1:*"], router: router, logger: logger)
        defer { s.stop() }
        let client = try BusClient(bus: bus, service: "test", connect: [s.endpoint], defaultTimeout: Self.deadline)
        defer { client.stop() }
        let results = await client.requestBatch((0..<30).map { Echo(text: "\($0)") }, as: EchoMany.self)
        #expect(try results.map { try $0.get().text } == (0..<30).map { "\($0)!" })
        #expect(messages.load(ordering: .relaxed) == 1)
    }

    /// A service that does not know the batch type (an earlier version) gets the items one by one,
    /// and the caller stops offering it batches for a while.
    @Test func aServiceWithoutTheBatchTypeGetsTheItemsOneByOne() async throws {
        let s = try server()
        defer { s.stop() }
        let client = try BusClient(bus: bus, service: "test", connect: [s.endpoint], defaultTimeout: Self.deadline)
        defer { client.stop() }
        #expect(client.batches.sendsBatches(of: EchoMany.type))
        let results = await client.requestBatch((0..<10).map { Echo(text: "\($0)") }, as: EchoMany.self)
        #expect(try results.map { try $0.get().text } == (0..<10).map { "\($0)!" })
        #expect(!client.batches.sendsBatches(of: EchoMany.type))
        let again = await client.requestBatch([Echo(text: "x")], as: EchoMany.self)
        #expect(try again.map { try $0.get().text } == ["x!"])
    }

    /// Bus envelopes carry times as Unix milliseconds, and still read the ISO 8601 text that
    /// envelopes of earlier versions (outbox rows written before an upgrade) hold.
    @Test func busTimesAreMillisecondsAndEarlierISOTextStillReads() throws {
        struct At: Codable, Equatable { var at: Date }
        let at = Date(timeIntervalSince1970: 1_764_483_573.123)
        let data = try JSONEncoder.bus.encode(At(at: at))
        #expect(String(decoding: data, as: UTF8.self) == #"{"at":1764483573123}"#)
        #expect(abs(try JSONDecoder.bus.decode(At.self, from: data).at.timeIntervalSince(at)) < 0.000_001)
        let legacy = try JSONDecoder.bus.decode(At.self, from: Data(#"{"at":"2025-11-30T06:19:33.123Z"}"#.utf8))
        #expect(Timestamp.milliseconds(legacy.at) == 1_764_483_573_123)
        #expect(throws: DecodingError.self) { try JSONDecoder.bus.decode(At.self, from: Data(#"{"at":"yesterday"}"#.utf8)) }
    }
}
