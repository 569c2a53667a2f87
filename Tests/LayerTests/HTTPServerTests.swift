import Foundation
import Synchronization
import TestSupport
import Testing
@testable import Core
@testable import Telemetry
@testable import HTTP
@testable import Runtime

@Suite struct HTTPServerTests {
    struct Body: Codable { var name: String }

    func start(threads: Int = 1, _ configure: (inout Router) -> Void) throws -> (HTTPServer, HTTPClient, LogSink) {
        var router = Router()
        configure(&router)
        let routes = router
        var options = HTTPServer.Options()
        options.port = 0
        options.threads = threads
        let sink = LogSink(capturing: ())
        let server = HTTPServer(options: options, logger: Logger(service: "test", sink: sink), metrics: MetricsRegistry()) { await routes.handle($0) }
        try server.start()
        return (server, HTTPClient(base: URL(string: "http://127.0.0.1:\(server.port)")!), sink)
    }

    @Test func servesJSONBodiesWithPathAndQueryParameters() async throws {
        let (server, client, _) = try start { r in
            r.post("/v1/things/{id}") { req in
                let b = try JSONBody.decode(Body.self, from: req)
                return .json(201, ["id": req.pathParameters["id"]!, "name": b.name, "q": req.query["q"] ?? ""])
            }
        }
        defer { Task { await server.stop() } }
        let resp = try await client.json("POST", "/v1/things/t1?q=hello%20you", ["name": "ünï"])
        #expect(resp.status == 201)
        #expect(resp.header("Content-Type") == "application/json; charset=utf-8")
        let o = try resp.json()
        #expect(o["id"] as? String == "t1")
        #expect(o["name"] as? String == "ünï")
        #expect(o["q"] as? String == "hello you")
        #expect(resp.header("X-Request-Id")?.isEmpty == false)
    }

    @Test func keepsAPlainClientRequestIdAndLogsAccessWithoutQuery() async throws {
        let (server, client, sink) = try start { r in r.get("/x/{id}") { _ in .text(200, "ok") } }
        defer { Task { await server.stop() } }
        let resp = try await client.send("GET", "/x/1?token=secret-value", headers: ["X-Request-Id": "abc-123"])
        #expect(resp.header("X-Request-Id") == "abc-123")
        let line = try #require(sink.lines.first { $0.contains("http request") })
        #expect(line.contains(#""http.route":"/x/{id}""#))
        #expect(line.contains(#""request.id":"abc-123""#))
        #expect(!line.contains("secret-value"))
        let o = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(o["http.method"] as? String == "GET")
        #expect(o["http.path"] as? String == "/x/1")
        #expect(o["http.status"] as? Int == 200)
        #expect(o["http.duration_ms"] is Double || o["http.duration_ms"] is Int)
        #expect(o["level"] as? String == "info" && o["service"] as? String != nil)
    }

    /// libmicrohttpd aborts the process when it is stopped with a connection suspended; a request
    /// whose handler outlasts the drain is answered 503 instead.
    @Test func stoppingWhileAHandlerStillRunsAnswers503() async throws {
        let handling = Mutex(false)
        let (server, client, _) = try start { r in
            r.get("/slow") { _ in
                handling.withLock { $0 = true }
                try? await Task.sleep(for: .seconds(30))  // far beyond the bound below, even on a stalled machine
                return .text(200, "late")
            }
        }
        async let answer = client.send("GET", "/slow")
        // Stop once the handler runs (a fixed pause lost the race on a loaded machine: the server
        // stopped before the request arrived, and the client saw an empty reply).
        for _ in 0..<200 where !handling.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(50)) }
        #expect(handling.withLock { $0 })
        let began = ContinuousClock.now
        await server.stop(drainSeconds: 0.2)
        #expect(ContinuousClock.now - began < .seconds(10))
        let resp = try await answer
        #expect(resp.status == 503)
        #expect(try resp.json()["error"].flatMap { ($0 as? [String: Any])?["code"] as? String } == "unavailable")
    }

    /// Every request still in its handler when the drain ends is answered in full before the
    /// daemon stops: a request left its waiting list when its 503 was queued, before it was sent,
    /// and a stop in between closed the connection on it. Many requests at once widen that gap.
    @Test func stoppingWithManyHandlersRunningAnswersEveryOne() async throws {
        let handling = Atomic<Int>(0)
        let (server, client, _) = try start(threads: 2) { r in
            r.get("/slow") { _ in
                handling.wrappingAdd(1, ordering: .relaxed)
                try? await Task.sleep(for: .seconds(30))
                return .text(200, "late")
            }
        }
        let n = 48
        try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<n { group.addTask { try await client.send("GET", "/slow").status } }
            for _ in 0..<400 where handling.load(ordering: .relaxed) < n { try await Task.sleep(for: .milliseconds(50)) }
            #expect(handling.load(ordering: .relaxed) == n)
            await server.stop(drainSeconds: 0.1)
            var statuses: [Int] = []
            for try await status in group { statuses.append(status) }
            #expect(statuses == Array(repeating: 503, count: n))
        }
    }

    @Test func anInventedMethodIsCountedAsOtherNotAsANewLabelValue() async throws {
        let (server, client, _) = try start { r in r.get("/x") { _ in .text(200, "ok") } }
        defer { Task { await server.stop() } }
        _ = try await client.send("BLAH123", "/x")
        _ = try await client.send("GET", "/x")
        let text = try #require(server.metrics).render()
        #expect(!text.contains("BLAH123"))
        #expect(text.contains(#"method="other""#))
        #expect(text.contains(#"method="GET""#))
    }

    @Test func bodiesOverTheLimitAre413() async throws {
        let (server, client, _) = try start { r in r.post("/echo") { req in .text(200, "\(req.body.count)") } }
        defer { Task { await server.stop() } }
        let big = Data(repeating: 0x61, count: (1 << 20) + 1)
        let resp = try await client.send("POST", "/echo", body: big, headers: ["Content-Type": "application/json"])
        #expect(resp.status == 413)
        #expect(resp.errorCode == "tooLarge")
        let fits = try await client.send("POST", "/echo", body: Data(repeating: 0x61, count: 1 << 20), headers: ["Content-Type": "application/json"])
        #expect(fits.text == "\(1 << 20)")
        // Declared far beyond the limit: refused at once, before any of the body is sent.
        let huge = try RawHTTP.exchange(port: server.port, Data("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: \(1 << 30)\r\n\r\n".utf8))
        #expect(huge.hasPrefix("HTTP/1.1 413"))
        #expect(huge.contains("tooLarge"))
    }

    @Test func headersUpToAboutTwelveKilobytesAreServedAndLargerOnesAre431() async throws {
        // Each connection's memory is 16 kB (`connectionMemoryBytes`): a long token or several
        // cookies fit; a header beyond it is refused by libmicrohttpd, and the server goes on.
        let (server, client, _) = try start { r in r.get("/h") { req in .text(200, "\(req.header("x-big")?.utf8.count ?? 0)") } }
        defer { Task { await server.stop() } }
        let fits = try await client.send("GET", "/h", headers: ["X-Big": String(repeating: "a", count: 12_000)])
        #expect(fits.status == 200)
        #expect(fits.text == "12000")
        let tooBig = try await client.send("GET", "/h", headers: ["X-Big": String(repeating: "a", count: 40_000)])
        #expect(tooBig.status == 431)
        let after = try await client.send("GET", "/h")
        #expect(after.status == 200)
    }

    @Test func aChunkedBodyOverTheLimitIs413Too() async throws {
        let (server, _, _) = try start { r in r.post("/echo") { req in .text(200, "\(req.body.count)") } }
        defer { Task { await server.stop() } }
        // Raw socket: a chunked upload has no Content-Length to refuse up front.
        let chunk = String(repeating: "a", count: 600_000)
        let hex = String(chunk.utf8.count, radix: 16)
        let raw = "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            + "\(hex)\r\n\(chunk)\r\n\(hex)\r\n\(chunk)\r\n0\r\n\r\n"
        let reply = try RawHTTP.exchange(port: server.port, Data(raw.utf8))
        #expect(reply.hasPrefix("HTTP/1.1 413"))
    }

    @Test func waitingHandlersHoldNoThread() async throws {
        // One MHD thread; 40 requests whose handlers each wait until all 40 are being handled at
        // once. That can only happen if a waiting handler holds no thread: otherwise the first
        // would keep the only thread and the others would never arrive (each then answers
        // "alone" after 30 s). No duration is asserted, so a loaded machine cannot fail it.
        let arrived = Atomic<Int>(0)
        let (server, client, _) = try start(threads: 1) { r in
            r.get("/slow") { _ in
                arrived.add(1, ordering: .relaxed)
                let together = await waitUntil(.now + .seconds(30), every: .milliseconds(5)) { arrived.load(ordering: .relaxed) >= 40 }
                return .text(200, together ? "together" : "alone")
            }
        }
        defer { Task { await server.stop() } }
        let bodies = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<40 { group.addTask { try await client.get("/slow").text } }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(bodies == Array(repeating: "together", count: 40))
    }

    /// A request is handled on the thread that read it (`HTTPLoop`), and a handler that waits
    /// for another thread comes back to that one: no request crosses to the Swift executor's
    /// threads and back. With the handler started as a plain task, it runs there and this fails.
    @Test func aHandlerRunsOnTheLoopThatReadItsRequest() async throws {
        let (server, client, _) = try start(threads: 2) { r in
            r.get("/where") { _ in
                let before = HTTPLoop.current
                await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                    DispatchQueue.global().async { c.resume() }
                }
                let after = HTTPLoop.current
                return .text(200, before == nil ? "not on a loop" : before === after ? "same loop" : "another thread")
            }
        }
        defer { Task { await server.stop() } }
        for _ in 0..<20 {
            #expect(try await client.get("/where").text == "same loop")
        }
    }

    /// A handler's task is kept once it has answered and serves the next request: a task made per
    /// request allocated its stack of async frames afresh each time (docs/performance.md, "Session
    /// 41"). With a task per request, each request below starts one and this fails.
    @Test func aHandlerTaskIsKeptForTheNextRequest() async throws {
        let (server, client, _) = try start(threads: 1) { r in
            r.get("/wait") { _ in
                // Waits for another thread, as a handler waits for a bus reply.
                await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                    DispatchQueue.global().async { c.resume() }
                }
                return .text(200, "ok")
            }
        }
        defer { Task { await server.stop() } }
        #expect(try await client.get("/wait").status == 200)
        let loop = try #require(server.loops.first)
        let started = loop.handlers.started
        #expect(started == 1)
        for _ in 0..<20 {
            #expect(try await client.get("/wait").status == 200)
        }
        #expect(loop.handlers.started == started)
        #expect(loop.handlers.waiting == 1)
    }

    /// At most `HTTPLoop.idleHandlerLimit` handler tasks wait for work; the rest end when they
    /// have answered, and the ones waiting end when the server stops.
    @Test func keptHandlerTasksAreBoundedAndEndWithTheServer() async throws {
        let together = HTTPLoop.idleHandlerLimit + 16
        let gate = Gate(opensAt: together)
        let (server, _, _) = try start(threads: 1) { r in
            r.get("/together") { _ in
                await gate.arrive()
                return .text(200, "together")
            }
        }
        // Each its own connection, all handled at once: the gate opens when the last arrives.
        let connections = try (0..<together).map { _ in try RawConnection(port: server.port) }
        for c in connections { c.send("GET /together HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") }
        let answers = await withTaskGroup(of: String.self) { group in
            for c in connections { group.addTask { c.read(for: 10).text } }
            return await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(answers.allSatisfy { $0.hasPrefix("HTTP/1.1 200") && $0.hasSuffix("together") })
        let loop = try #require(server.loops.first)
        #expect(loop.handlers.started == together)
        #expect(loop.handlers.waiting == HTTPLoop.idleHandlerLimit)
        await server.stop()
        #expect(loop.handlers.waiting == 0)
    }

    /// Holds each caller until `opensAt` callers have arrived.
    final class Gate: Sendable {
        let opensAt: Int
        let state = Mutex<(arrived: Int, waiting: [CheckedContinuation<Void, Never>])>((0, []))
        init(opensAt: Int) { self.opensAt = opensAt }

        func arrive() async {
            await withCheckedContinuation { c in
                let open = state.withLock { s -> [CheckedContinuation<Void, Never>] in
                    s.arrived += 1
                    s.waiting.append(c)
                    guard s.arrived >= opensAt else { return [] }
                    defer { s.waiting = [] }
                    return s.waiting
                }
                for waiting in open { waiting.resume() }
            }
        }
    }

    @Test func malformedRequestsDoNotTakeTheServerDown() async throws {
        let (server, client, _) = try start { r in r.get("/ok") { _ in .text(200, "ok") } }
        defer { Task { await server.stop() } }
        let junk = try RawHTTP.exchange(port: server.port, Data("NOT HTTP AT ALL\r\n\r\n".utf8))
        #expect(junk.hasPrefix("HTTP/1.1 400") || junk.isEmpty)
        #expect(try await client.get("/ok").status == 200)
    }

    /// An encoded NUL does not cut the path short: before, `/v1/things/t1%00/parts` reached the
    /// router as `/v1/things/t1` (and a DELETE meant for a sub-route hit its parent).
    @Test func anEncodedNulNeitherEndsThePathNorAQueryValue() async throws {
        let (server, client, _) = try start { r in
            r.get("/v1/things/{id}") { req in .json(200, ["id": req.pathParameters["id"]!, "q": req.query["q"] ?? ""]) }
            r.get("/v1/things/{id}/parts") { req in .json(200, ["parts": req.pathParameters["id"]!]) }
        }
        defer { Task { await server.stop() } }
        let cut = try await client.get("/v1/things/t1%00/parts")
        #expect(cut.status == 200)
        #expect(try cut.json()["parts"] as? String == "t1%00", "the sub-route, with the escape left as sent: \(cut.text)")
        let inId = try await client.get("/v1/things/t1%00garbage")
        #expect(try inId.json()["id"] as? String == "t1%00garbage")
        let inQuery = try await client.get("/v1/things/t1?q=a%00b")
        #expect(try inQuery.json()["q"] as? String == "a%00b", "\(inQuery.text)")
        let decoded = try await client.get("/v1/things/t%201?q=a%2Fb")
        #expect(try decoded.json()["id"] as? String == "t 1")
        #expect(try decoded.json()["q"] as? String == "a/b")
    }

    @Test func stopWaitsForRequestsInProgress() async throws {
        let (server, client, _) = try start { r in
            r.get("/slow") { _ in
                try await Task.sleep(for: .milliseconds(300))
                return .text(200, "finished")
            }
        }
        async let resp = client.get("/slow")
        // Stop only once the request is in the server (not still in the listen backlog).
        for _ in 0..<250 where server.inFlight.load(ordering: .acquiring) == 0 { try await Task.sleep(for: .milliseconds(20)) }
        // A drain far longer than the handler's 300 ms: a machine stalled for seconds (2 cores
        // under a full test run) must not turn the answer into the 503 of an expired drain.
        await server.stop(drainSeconds: 30)
        #expect(try await resp.text == "finished")
    }
}

