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
        // RFC 7239, preferred over X-Forwarded-For, with ports, quotes and brackets.
        #expect(from("10.0.0.2", ["forwarded": "for=192.0.2.60;proto=https;by=10.0.0.2", "x-forwarded-for": "198.51.100.1"]) == "192.0.2.60")
        #expect(from("10.0.0.2", ["forwarded": #"for="[2001:db8::17]:4711", for=10.0.0.3"#]) == "2001:db8::17")
        #expect(from("10.0.0.2", ["forwarded": "for=192.0.2.43:8080"]) == "192.0.2.43")
        #expect(from("2001:db8:f::1", ["forwarded": "for=_hidden"]) == "2001:db8:f::1")
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
}
