import Foundation
import TestSupport
import Testing
@testable import Core
@testable import HTTP
@testable import Telemetry

/// The edge of the HTTP server (docs/security.md, "The edge"): who a request is from behind a
/// trusted proxy, the per-address connection limit, and the header timeout. The addresses in
/// headers are documentation ranges; they are only ever read, never reached.
@Suite(.serialized) struct EdgeTests {
    // MARK: - The classifier

    @Test func networksParseAndContainTheirAddresses() throws {
        let v4 = try #require(IPNetwork("10.1.2.3/8"))
        #expect(v4.description == "10.0.0.0/8")
        #expect(v4.contains("10.255.0.1") && !v4.contains("11.0.0.1") && !v4.contains("fd00::1"))
        #expect(v4.contains("::ffff:10.0.0.7"), "an IPv4-mapped IPv6 address is its IPv4 address")
        let host = try #require(IPNetwork("192.0.2.10"))
        #expect(host.contains("192.0.2.10") && !host.contains("192.0.2.11"))
        let v6 = try #require(IPNetwork("2001:db8:1::/48"))
        #expect(v6.contains("2001:db8:1:ffff::1") && !v6.contains("2001:db8:2::1"))
        #expect(IPNetwork("0.0.0.0/0")?.contains("198.51.100.1") == true)
        for bad in ["", "10.0.0.0/33", "10.0.0/8", "fd00::/129", "example.com", "10.0.0.0/-1", "10.0.0.0/8/8"] {
            #expect(IPNetwork(bad) == nil, "\(bad)")
        }
        #expect(throws: ConfigError.self) { try IPNetwork.list("10.0.0.0/8, nope", variable: "REDEEM_TRUSTED_PROXIES") }
        #expect(try IPNetwork.list(" 10.0.0.0/8 , ::1 ,", variable: "X").map(\.description) == ["10.0.0.0/8", "::1/128"])
    }

    @Test func onlyATrustedProxyNamesTheClientReadFromTheRight() throws {
        let trusted = try IPNetwork.list("10.0.0.0/8,2001:db8:f::/48", variable: "X")
        func from(_ peer: String, _ headers: [String: String]) -> String { ClientAddress.resolve(peer: peer, headers: headers, trusted: trusted) }
        // Anyone else is their own client, whatever they send.
        #expect(from("198.51.100.7", ["x-forwarded-for": "192.0.2.1"]) == "198.51.100.7")
        // A proxy names the hop it received from; a client's own header is to the left of it.
        #expect(from("10.0.0.2", ["x-forwarded-for": "192.0.2.1"]) == "192.0.2.1")
        #expect(from("10.0.0.2", ["x-forwarded-for": "203.0.113.9, 192.0.2.1"]) == "192.0.2.1", "the client's forged hop is not believed")
        #expect(from("10.0.0.2", ["x-forwarded-for": "192.0.2.1, 10.0.0.9"]) == "192.0.2.1", "proxies in a chain are skipped")
        #expect(from("10.0.0.2", ["x-forwarded-for": "10.0.0.8, 10.0.0.9"]) == "10.0.0.8", "only proxies: the farthest")
        #expect(from("10.0.0.2", ["x-forwarded-for": "192.0.2.1, unknown"]) == "10.0.0.2", "not an address: the proxy that said it")
        #expect(from("10.0.0.2", [:]) == "10.0.0.2")
        // Only the one header named is read: a client's own `Forwarded` passes a proxy that sets
        // X-Forwarded-For untouched, and must not name the client.
        #expect(from("10.0.0.2", ["forwarded": "for=198.51.100.66", "x-forwarded-for": "192.0.2.1"]) == "192.0.2.1")
        #expect(from("10.0.0.2", ["forwarded": "for=198.51.100.66"]) == "10.0.0.2", "not the named header: the proxy is the client")
        // With `forwarded` named: RFC 7239, with ports, quotes and brackets, and X-Forwarded-For unread.
        func rfc(_ peer: String, _ headers: [String: String]) -> String {
            ClientAddress.resolve(peer: peer, headers: headers, trusted: trusted, header: "forwarded")
        }
        #expect(rfc("10.0.0.2", ["forwarded": "for=192.0.2.60;proto=https;by=10.0.0.2", "x-forwarded-for": "198.51.100.1"]) == "192.0.2.60")
        #expect(rfc("10.0.0.2", ["x-forwarded-for": "198.51.100.1"]) == "10.0.0.2")
        #expect(rfc("10.0.0.2", ["forwarded": #"for="[2001:db8::17]:4711", for=10.0.0.3"#]) == "2001:db8::17")
        #expect(rfc("10.0.0.2", ["forwarded": "for=192.0.2.43:8080"]) == "192.0.2.43")
        #expect(rfc("2001:db8:f::1", ["forwarded": "for=_hidden"]) == "2001:db8:f::1")
        // Another header (a CDN's own), read the X-Forwarded-For way.
        #expect(ClientAddress.resolve(peer: "10.0.0.2", headers: ["x-real-ip": "192.0.2.9", "x-forwarded-for": "198.51.100.1"], trusted: trusted,
                                      header: "x-real-ip") == "192.0.2.9")
        #expect(try ClientAddress.headerName(" X-Forwarded-For ", variable: "X") == "x-forwarded-for")
        for bad in ["", "x forwarded", "x-forwarded-for:", "é"] {
            #expect(throws: ConfigError.self, "\(bad)") { try ClientAddress.headerName(bad, variable: "REDEEM_TRUSTED_PROXY_HEADER") }
        }
        // Nobody trusted: headers are never read.
        #expect(ClientAddress.resolve(peer: "10.0.0.2", headers: ["x-forwarded-for": "192.0.2.1"], trusted: []) == "10.0.0.2")
    }

    // MARK: - Through a server

    func start(_ configure: (inout HTTPServer.Options) -> Void) throws -> HTTPServer {
        var options = HTTPServer.Options()
        options.port = 0
        options.threads = 1
        configure(&options)
        let server = HTTPServer(options: options, logger: Logger(service: "test", sink: LogSink(capturing: ())), metrics: MetricsRegistry()) {
            .text(200, "from \($0.clientAddress)")
        }
        try server.start()
        return server
    }

    static func ask(_ c: RawConnection, headers: String = "") -> String {
        c.send("GET / HTTP/1.1\r\nHost: edge\r\nConnection: close\r\n\(headers)\r\n")
        return c.read(for: 5).text
    }

    @Test func theServerTakesTheClientFromATrustedProxyOnly() async throws {
        let server = try start { $0.trustedProxies = [IPNetwork("127.0.0.1")!] }
        defer { Task { await server.stop() } }
        let viaProxy = Self.ask(try RawConnection(port: server.port), headers: "X-Forwarded-For: 192.0.2.7\r\n")
        #expect(viaProxy.hasSuffix("from 192.0.2.7"), "\(viaProxy)")
        let direct = Self.ask(try RawConnection(port: server.port, from: "127.0.0.2"), headers: "X-Forwarded-For: 192.0.2.7\r\n")
        #expect(direct.hasSuffix("from 127.0.0.2"), "\(direct)")
    }

    @Test func oneAddressHoldsAtMostItsConnectionsAndTrustedProxiesAreNotLimited() async throws {
        let server = try start {
            $0.connectionsPerAddress = 2
            $0.trustedProxies = [IPNetwork("127.0.0.3")!]
        }
        defer { Task { await server.stop() } }
        let held = [try RawConnection(port: server.port), try RawConnection(port: server.port)]
        let counted = await waitUntil(.now + .seconds(5), every: .milliseconds(10)) { server.connections.count("127.0.0.1") == 2 }
        #expect(counted)
        // A third from the same address is closed unanswered; another address is served.
        let third = try RawConnection(port: server.port)
        third.send("GET / HTTP/1.1\r\nHost: edge\r\n\r\n")
        let refused = third.read(for: 5)
        #expect(refused.closed && refused.text.isEmpty, "\(refused)")
        #expect(Self.ask(try RawConnection(port: server.port, from: "127.0.0.2")).hasSuffix("from 127.0.0.2"))
        // One held connection goes: its place is free again.
        _ = held[0].send("GET / HTTP/1.1\r\nHost: edge\r\nConnection: close\r\n\r\n")
        #expect(held[0].read(for: 5).closed)
        let freed = await waitUntil(.now + .seconds(5), every: .milliseconds(10)) { server.connections.count("127.0.0.1") == 1 }
        #expect(freed)
        #expect(Self.ask(try RawConnection(port: server.port)).hasSuffix("from 127.0.0.1"))
        // A trusted proxy opens as many as it needs.
        let proxy = try (0..<4).map { _ in try RawConnection(port: server.port, from: "127.0.0.3") }
        for c in proxy { #expect(Self.ask(c).hasSuffix("from 127.0.0.3")) }
        withExtendedLifetime(held) {}
    }

    @Test func aClientTricklingItsHeadersIsCutOffAtTheTimeout() async throws {
        let server = try start { $0.headerTimeoutSeconds = 1 }
        defer { Task { await server.stop() } }
        let slow = try RawConnection(port: server.port)
        slow.send("GET / HTTP/1.1\r\n")
        let started = Date()
        var cut = false
        // A header line every 200 ms: never silent long enough for libmicrohttpd's idle timeout.
        while Date().timeIntervalSince(started) < 6 {
            if !slow.send("X-Slow: \(Int(Date().timeIntervalSince(started) * 1000))\r\n") { cut = true; break }
            if slow.read(for: 0.2).closed { cut = true; break }
        }
        #expect(cut, "shut at the header timeout")
        #expect(Date().timeIntervalSince(started) < 4, "within the timeout and a sweep: \(Date().timeIntervalSince(started)) s")
        // A client that sends its request in time is served, and its next request has the timeout again.
        let quick = try RawConnection(port: server.port)
        quick.send("GET / HTTP/1.1\r\nHost: edge\r\n\r\n")
        #expect(quick.read(for: 0.5).text.hasSuffix("from 127.0.0.1"))
        #expect(quick.read(for: 4).closed, "an idle keep-alive connection goes at the header timeout too")
    }

    /// The request deadline on the guard itself, time as an input: the headers by the header
    /// timeout, the whole request by the request deadline, nothing while a request is handled,
    /// and the clock starts again at each answer.
    @Test func theRequestDeadlineCountsFromTheOpeningOrTheLastAnswer() {
        let guardian = ConnectionGuard(.init(perAddress: 0, headerTimeout: .seconds(2), requestTimeout: .seconds(5), trusted: []))
        let t0 = ContinuousClock.now
        var shut: [Int32] = []
        func sweep(at seconds: Double) -> [Int32] {
            shut = []
            guardian.sweep(now: t0 + .milliseconds(Int(seconds * 1000))) { shut.append($0) }
            return shut
        }
        guardian.opened(1, address: "192.0.2.1", fd: 11, now: t0)
        guardian.opened(2, address: "192.0.2.2", fd: 12, now: t0)
        guardian.opened(3, address: "192.0.2.3", fd: 13, now: t0)
        guardian.headersArrived(2)
        guardian.headersArrived(3)
        guardian.requestReceived(3)
        #expect(sweep(at: 1.9).isEmpty)
        #expect(sweep(at: 2) == [11], "no headers by the header timeout")
        #expect(sweep(at: 4.9).isEmpty)
        #expect(sweep(at: 5) == [12], "headers in time, the body not by the deadline")
        #expect(sweep(at: 60).isEmpty, "each once; none while a request is handled")
        guardian.answered(3, now: t0 + .seconds(60))
        #expect(sweep(at: 61.9).isEmpty)
        #expect(sweep(at: 62) == [13], "the next request's clock starts at the answer")
    }

    @Test func aClientTricklingItsBodyIsCutOffAtTheDeadline() async throws {
        let server = try start {
            $0.headerTimeoutSeconds = 0
            $0.requestTimeoutSeconds = 1
        }
        defer { Task { await server.stop() } }
        let slow = try RawConnection(port: server.port)
        slow.send("POST / HTTP/1.1\r\nHost: edge\r\nContent-Length: 100000\r\n\r\n")
        let started = Date()
        var cut = false
        // A byte every 200 ms: never silent long enough for libmicrohttpd's idle timeout.
        while Date().timeIntervalSince(started) < 6 {
            if !slow.send("x") { cut = true; break }
            if slow.read(for: 0.2).closed { cut = true; break }
        }
        #expect(cut, "shut at the request deadline")
        #expect(Date().timeIntervalSince(started) < 3.5, "within the deadline and a sweep: \(Date().timeIntervalSince(started)) s")
        // A request sent whole in time is answered, on a connection that stays open.
        let quick = try RawConnection(port: server.port)
        quick.send("POST / HTTP/1.1\r\nHost: edge\r\nContent-Length: 2\r\n\r\nok")
        #expect(quick.read(for: 0.5).text.hasSuffix("from 127.0.0.1"))
    }
}
