import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The test harness itself: ports never handed out twice, a stack that cannot start fails fast and
/// says why, and a suite whose start fails fails alone. Child processes and stack starts block, so
/// they run off the cooperative pool (`offThePool`), where they would stall every other test.
@Suite struct HarnessTests {
    /// Stacks starting side by side each ask for their ports at once; no port may reach two of them
    /// (one run gave the gateway and the accounts events socket the same port).
    @Test func freePortHandsOutDistinctPortsWithinAndAcrossCallers() async throws {
        let registry = try Project.temporaryDirectory("ports")
        defer { try? FileManager.default.removeItem(at: registry) }
        let script = Project.root.appendingPathComponent("scripts/free-port").path
        let env = ProcessInfo.processInfo.environment.merging(["REDEEM_PORT_REGISTRY": registry.path]) { $1 }
        let callers = 8, each = 11
        let answers = try await withThrowingTaskGroup(of: [Int].self) { group in
            for _ in 0..<callers {
                group.addTask {
                    try await offThePool { try Subprocess.run(script, [String(each)], environment: env) }.split(separator: "\n").compactMap { Int($0) }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.allSatisfy { $0.count == each })
        let all = answers.flatMap { $0 }
        #expect(all.count == callers * each)
        #expect(Set(all).count == all.count, "a port was handed out twice")
        let ephemeralStart = Int(try String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)
            .split(whereSeparator: \.isWhitespace)[0])!
        #expect(all.allSatisfy { $0 >= 10000 && $0 < ephemeralStart })
    }

    /// A service that dies at once (here the gateway, whose port is taken) ends the start within
    /// seconds, naming the service and quoting its log, instead of after the whole readiness wait.
    @Test func aStackWhoseServiceDiesFailsAtOnceWithItsLog() async throws {
        let port = try await offThePool { try Project.freePort() }
        let held = try ListeningSocket(port: port)
        defer { held.close() }
        let began = Date()
        let failure: String? = try await offThePool {
            do {
                let stack = try Stack(environment: ["REDEEM_HTTP_PORT": String(port), "REDEEM_READY_SECONDS": "300"], timeoutSeconds: 400)
                stack.stop()
                return nil
            } catch {
                return String(describing: error)
            }
        }
        let message = try #require(failure, "the stack started although its gateway port was taken")
        // The readiness wait is 300 s: a start that noticed the death ends far sooner.
        #expect(Date().timeIntervalSince(began) < 100)
        #expect(message.contains("gateway exited"))
        #expect(message.contains("cannot listen"))
    }

    /// With everything installed (the test command installed it before the build), setup only
    /// looks: no `apt-get`, no `pip`. Stand-ins for them on the PATH record any call.
    @Test func setupReachesNoRegistryWhenNothingIsMissing() async throws {
        let dir = try Project.temporaryDirectory("shims")
        defer { try? FileManager.default.removeItem(at: dir) }
        let calls = dir.appendingPathComponent("calls").path
        let python = try await offThePool { try Subprocess.run("/bin/sh", ["-c", "command -v python3"]) }.trimmingCharacters(in: .whitespacesAndNewlines)
        let shims = [
            "apt-get": "echo \"apt-get $*\" >> \(calls); exit 1",
            "apt": "echo \"apt $*\" >> \(calls); exit 1",
            "sudo": "echo \"sudo $*\" >> \(calls); exit 1",
            "pip": "echo \"pip $*\" >> \(calls); exit 1",
            "pip3": "echo \"pip3 $*\" >> \(calls); exit 1",
            "python3": "case \" $* \" in *\" -m pip \"*) echo \"python3 $*\" >> \(calls); exit 1;; esac; exec \(python) \"$@\"",
        ]
        // Written by a child process: a file this process held open for writing could be inherited
        // by a fork another test makes meanwhile, and executing it would then fail with "text file
        // busy" (exit 126, seen once in a full run).
        for (name, body) in shims {
            let path = dir.appendingPathComponent(name).path
            _ = try await offThePool {
                try Subprocess.run("/bin/sh", ["-c", #"printf '#!/bin/sh\n%s\n' "$1" > "$2" && chmod 755 "$2""#, "sh", body, path])
            }
        }
        var env = ProcessInfo.processInfo.environment
        env["PATH"] = dir.path + ":" + (env["PATH"] ?? "/usr/bin:/bin")
        let setup = Project.root.appendingPathComponent("scripts/setup").path
        let environment = env
        _ = try await offThePool { try Subprocess.run("/bin/bash", [setup], environment: environment) }
        let recorded = (try? String(contentsOfFile: calls, encoding: .utf8)) ?? ""
        #expect(recorded.isEmpty, "setup called a package manager: \(recorded)")
    }

    final class Probe {}

    /// A failed start is kept and named by each of the suite's tests, instead of stopping the test
    /// process (which left every later suite unrun).
    @Test func aFailedSuiteStartFailsThatSuiteWithTheReason() throws {
        SuiteStart.run(Probe.self) { throw TestFailure("no database today") }
        let error = #expect(throws: TestFailure.self) { try SuiteStart.check(Probe.self) }
        #expect(error?.description.contains("no database today") == true)
        SuiteStart.run(Probe.self) {}
        try SuiteStart.check(Probe.self)
    }
}

/// A TCP listener on 127.0.0.1 that holds a port for the length of a test.
final class ListeningSocket {
    let fd: Int32

    init(port: Int) throws {
        // Close-on-exec: a stack started meanwhile must not inherit the listener and keep it open.
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = UInt16(port).bigEndian
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 8) == 0 else {
            Glibc.close(fd)
            throw TestFailure("cannot hold port \(port): errno \(errno)")
        }
    }

    func close() { Glibc.close(fd) }
}
