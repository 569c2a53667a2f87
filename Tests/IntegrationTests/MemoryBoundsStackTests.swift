import Foundation
import TestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Memory a client can make the stack hold (docs/security.md, "The edge" and "Security notes"):
/// bodies trickled to the gateway, and password hashes (19 MiB each) asked of accounts. The
/// gateway keeps its default per-address connection limit; the request deadline is shortened to
/// 3 s so the test takes seconds, and accounts computes one hash at a time so its bound is met.
final class MemoryBoundsStackTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!

    override class func startSuite() throws {
        stack = try Stack(environment: [
            "REDEEM_HTTP_CONNECTIONS_PER_ADDRESS": "",  // the default
            "REDEEM_HTTP_REQUEST_TIMEOUT_SECONDS": "3",
            "REDEEM_PASSWORD_HASH_CONCURRENCY": "1",
        ])
    }

    override class func stopSuite() { stack?.stop() }

    var stack: Stack { Self.stack }

    /// A process's peak resident memory (`VmHWM` of /proc/<pid>/status), in bytes.
    static func peakRSS(_ pid: pid_t) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
              let kB = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") else {
            throw TestFailure("no VmHWM for \(pid)")
        }
        return kB * 1024
    }

    /// The gateway's memory limit in the Kubernetes manifests (`limits: memory: 192Mi`).
    static func gatewayMemoryLimit() throws -> Int {
        let manifest = try String(contentsOf: Project.root.appendingPathComponent("deploy/kubernetes/gateway.yaml"), encoding: .utf8)
        let limits = try XCTUnwrap(manifest.range(of: "limits:"), "gateway.yaml has limits")
        let memory = try XCTUnwrap(manifest.range(of: "memory: ", range: limits.upperBound..<manifest.endIndex))
        let digits = manifest[memory.upperBound...].prefix { $0.isNumber }
        XCTAssertTrue(manifest[memory.upperBound...].dropFirst(digits.count).hasPrefix("Mi"))
        return try XCTUnwrap(Int(digits)) * 1024 * 1024
    }

    /// 300 connections from one address each send 768 KiB of a 1 MiB body and then trickle a byte
    /// every half second. The gateway holds at most its per-address limit of them, and each only
    /// until the request deadline, so its peak memory stays under its Kubernetes limit (all 300
    /// held would be 225 MiB of bodies), and another client is served all along.
    func testSlowBodiesFromOneAddressLeaveTheGatewayWithinItsMemory() async throws {
        let limit = try Self.gatewayMemoryLimit()
        let gateway = try stack.pid("gateway")
        let port = stack.gateway.port!
        let chunk = Data(repeating: UInt8(ascii: "a"), count: 768 * 1024)
        let started = Date()
        let slow: [RawConnection] = try await offThePool {
            try (0..<300).map { _ in
                let c = try RawConnection(port: port)
                if c.send("POST /v1/accounts HTTP/1.1\r\nHost: edge\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n") {
                    c.send(chunk)
                }
                return c
            }
        }
        // Another client is served while they trickle; each trickler is cut within the deadline.
        var served = 0
        var open = slow
        while !open.isEmpty, Date().timeIntervalSince(started) < 30 {
            open = open.filter { $0.send("a") && !$0.read(for: 0.005).closed }
            let other = try RawConnection(port: port, from: "127.0.0.2")
            other.send("GET /healthz HTTP/1.1\r\nHost: edge\r\nConnection: close\r\n\r\n")
            if other.read(for: 5).text.hasPrefix("HTTP/1.1 200") { served += 1 }
            try await Task.sleep(for: .milliseconds(500))
        }
        let peak = try Self.peakRSS(gateway)
        XCTAssertTrue(open.isEmpty, "\(open.count) slow bodies still held after \(Date().timeIntervalSince(started)) s")
        XCTAssertGreaterThan(served, 0)
        XCTAssertLessThan(peak, limit, "the gateway's peak RSS \(peak / 1_048_576) MiB, its limit \(limit / 1_048_576) MiB")
        // And a whole request from the same address is served once they are gone.
        let signUp = try await stack.client.json("POST", "/v1/accounts", ["email": "after-\(UUID().uuidString.prefix(6))@example.com",
                                                                         "password": "correct horse battery"])
        XCTAssertEqual(signUp.status, 201, signUp.text)
        withExtendedLifetime(slow) {}
    }

    /// accounts computes one hash at a time here, with 8 waiting: of 50 sign-ups at once, those
    /// beyond are answered 503 `unavailable` with `Retry-After`, the rest are made, none fails
    /// otherwise, and accounts lives on.
    func testPasswordHashesBeyondTheBoundAre503WithRetryAfter() async throws {
        let accounts = try stack.pid("accounts")
        let client = stack.client
        let answers = try await withThrowingTaskGroup(of: HTTPClient.Response.self) { group in
            for i in 0..<50 {
                group.addTask {
                    try await client.json("POST", "/v1/accounts", ["email": "hash-\(i)-\(UUID().uuidString.prefix(6))@example.com",
                                                                   "password": "correct horse battery"])
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let busy = answers.filter { $0.status == 503 }
        XCTAssertEqual(answers.filter { $0.status == 201 }.count + busy.count, 50, "\(answers.map(\.status))")
        XCTAssertGreaterThanOrEqual(answers.filter { $0.status == 201 }.count, 9, "one running and 8 waiting are served")
        XCTAssertFalse(busy.isEmpty, "beyond the bound: 503")
        for r in busy {
            XCTAssertEqual(r.errorCode, "unavailable")
            XCTAssertGreaterThanOrEqual(Int(r.header("Retry-After") ?? "") ?? 0, 1, r.text)
        }
        XCTAssertEqual(kill(accounts, 0), 0, "accounts is still running")
        XCTAssertEqual(try stack.pid("accounts"), accounts)
        // Once the burst is over, a sign-up is served.
        let later = try await client.json("POST", "/v1/accounts", ["email": "calm-\(UUID().uuidString.prefix(6))@example.com", "password": "correct horse battery"])
        XCTAssertEqual(later.status, 201, later.text)
    }
}
