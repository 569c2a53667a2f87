import Bus
import Cryptography
import Foundation
import Runtime
import Telemetry
#if canImport(Glibc)
import Glibc
#endif

/// The whole stack (PostgreSQL + four services) started with the project's own runner,
/// `deploy/run-stack`, on free ports, for one test suite. `stop()` ends it all.
public final class Stack: @unchecked Sendable {
    public static let services = ["accounts", "coupons", "grants", "gateway"]

    public let directory: URL
    public let gateway: URL
    public let client: HTTPClient
    /// The gateway's operations port (`/healthz`, `/readyz`, `/backends`, `/metrics`; not public).
    public let ops: HTTPClient
    public let adminKey: String
    private let runner: Subprocess
    private var restarted: [Subprocess] = []
    /// Services killed by a test and started again with `restart`: the instance now serving.
    private var replacements: [String: Subprocess] = [:]
    private var stopped = false

    public var stateDirectory: URL { directory.appendingPathComponent("run") }
    public var logDirectory: URL { directory.appendingPathComponent("logs") }

    /// Starts the stack and waits until the gateway's `/backends` is 200 (the runner's own readiness wait).
    public init(environment extra: [String: String] = [:], timeoutSeconds: Double = 120) throws {
        directory = try Project.temporaryDirectory("stack")
        adminKey = "sk_live_" + (0..<24).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        var env = ProcessInfo.processInfo.environment
        for (k, v) in [
            "REDEEM_SKIP_SETUP": "1", "REDEEM_SKIP_BUILD": "1", "REDEEM_BUILD_CONFIG": "debug",
            "REDEEM_BIN_DIR": Project.binDirectory.path, "REDEEM_FREE_PORTS": "1",
            "REDEEM_DATA_DIR": directory.path, "REDEEM_LOG_DIR": directory.appendingPathComponent("logs").path,
            "REDEEM_PARENT_PID": String(getpid()), "REDEEM_ADMIN_KEY": adminKey,
            // Suites drive hundreds of requests from one address; the abuse-limit suite turns them on.
            "REDEEM_RATE_LIMITS": "off",
            // And hold up to 128 connections at once (`client`); `MemoryBoundsStackTests` keeps the default.
            "REDEEM_HTTP_CONNECTIONS_PER_ADDRESS": "1000",
            // Tests that kill a service restart it themselves and read how the first one ended.
            "REDEEM_RESTART": "never",
            // Record names are taken on the client's word unless a suite gives CloudKit settings
            // (FakeCloudKit.environment): only the suites about the proof need it.
            "REDEEM_CLOUDKIT_TRUST_CLIENT": "1",
        ] { env[k] = v }
        for (k, v) in extra { env[k] = v }
        let out = directory.appendingPathComponent("runner.out").path
        runner = try Subprocess(Project.root.appendingPathComponent("deploy/run-stack").path, [], environment: env,
                                stdout: out, stderr: directory.appendingPathComponent("runner.err").path)
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        var url: URL?
        while url == nil {
            if let text = try? String(contentsOfFile: out, encoding: .utf8),
               let line = text.split(separator: "\n").first(where: { $0.hasPrefix("REDEEM_GATEWAY_URL=") }) {
                url = URL(string: String(line.dropFirst("REDEEM_GATEWAY_URL=".count)))
            } else if let status = runner.wait(seconds: 0.1) {
                let err = (try? String(contentsOfFile: directory.appendingPathComponent("runner.err").path, encoding: .utf8)) ?? ""
                throw TestFailure("run-stack exited \(status) before the stack was ready:\n\(err.suffix(3000))")
            } else if Date() > deadline {
                runner.signal(SIGTERM)
                _ = runner.wait(seconds: 15)
                throw TestFailure("the stack was not ready within \(timeoutSeconds) s")
            }
        }
        gateway = url!
        client = HTTPClient(base: gateway, maxConnections: 128)
        ops = HTTPClient(base: try Self.line("REDEEM_GATEWAY_OPS_URL=", in: out).flatMap(URL.init(string:)) ?? gateway)
    }

    static func line(_ prefix: String, in file: String) throws -> String? {
        try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n").first { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
    }

    /// The pid of a service's instance: the one `restart` started last, or else the runner's.
    public func pid(_ service: String) throws -> pid_t {
        if let replacement = replacements[service] { return replacement.pid }
        let text = try String(contentsOf: stateDirectory.appendingPathComponent("\(service).pid"), encoding: .utf8)
        guard let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { throw TestFailure("no pid for \(service)") }
        return pid
    }

    /// The wiring of this run (the runner's env file), for starting a service by hand.
    public func wiring() throws -> [String: String] {
        try Self.envFile(stateDirectory.appendingPathComponent("env"))
    }

    /// What the runner gives one service besides the wiring: the files of its database URLs and
    /// its bus secret key.
    public func wiring(of service: String) throws -> [String: String] {
        try Self.envFile(stateDirectory.appendingPathComponent("\(service).env"))
    }

    private static func envFile(_ file: URL) throws -> [String: String] {
        let text = try String(contentsOf: file, encoding: .utf8)
        var env: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let eq = line.firstIndex(of: "=") else { continue }
            var value = String(line[line.index(after: eq)...])
            if value.hasPrefix("'"), value.hasSuffix("'"), value.count >= 2 { value = String(value.dropFirst().dropLast()) }
            env[String(line[..<eq])] = value.replacingOccurrences(of: "'\\''", with: "'")
        }
        return env
    }

    /// The database as its administrator (the private cluster's superuser), which no service is
    /// given: for tests that read or change any schema directly.
    public func adminDatabaseURL() throws -> String {
        try String(contentsOf: stateDirectory.appendingPathComponent("database-admin-url"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The URL of a back-end's runtime role (what the service runs as) or, with `owner`, of its
    /// schema's owner.
    public func databaseURL(of service: String, owner: Bool = false) throws -> String {
        try String(contentsOf: directory.appendingPathComponent("db/\(service)\(owner ? "-owner" : "").url"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Starts one more instance of a service with this run's wiring (after a crash, or a second
    /// instance with `overrides` for its own ports). It is stopped by `stop()`.
    @discardableResult
    public func startService(_ service: String, overrides: [String: String] = [:]) throws -> Subprocess {
        var env = ProcessInfo.processInfo.environment.merging(try wiring()) { $1 }.merging(try wiring(of: service)) { $1 }
        env["REDEEM_ADMIN_KEY"] = adminKey
        // A second gateway on ports of its own needs its own operations port too.
        if service == "gateway", overrides["REDEEM_HTTP_PORT"] != nil, overrides["REDEEM_GATEWAY_HTTP_PORT"] == nil {
            env["REDEEM_GATEWAY_HTTP_PORT"] = String(try Project.freePort())
        }
        for (k, v) in overrides { env[k] = v }
        let p = try Subprocess(Project.binDirectory.appendingPathComponent(service).path, [], environment: env,
                               stderr: logDirectory.appendingPathComponent("\(service).log").path)
        restarted.append(p)
        return p
    }

    /// Starts services that a test killed again, as `startService` does, and waits until the
    /// stack is ready again (the gateway's `/backends` is 200 and, with `readyAt`, that instance's
    /// own). From then on `pid(service)` is the new instance's. A test that kills a service of a
    /// suite's shared stack calls this, so that the next test finds the stack as it was.
    public func restart(
        _ services: String..., overrides: [String: String] = [:], readyAt: URL? = nil, seconds: Double = 60
    ) async throws {
        for service in services { replacements[service] = try startService(service, overrides: overrides) }
        let ready = try await eventually(seconds) {
            guard try await self.ops.get("/backends").status == 200 else { return false }
            guard let readyAt else { return true }
            return try await HTTPClient(base: readyAt).get("/readyz").status == 200
        }
        guard ready else { throw TestFailure("\(services) not ready within \(seconds) s of the restart") }
    }

    /// Where the runner keeps a service's bus secret key (under CURVE, the default).
    public func busKeyFile(_ service: String) -> URL { directory.appendingPathComponent("bus/\(service).key") }

    /// A bus node of this run's security, holding `service`'s key (the gateway's by default: a
    /// client every service admits), for tests that speak on the bus themselves. Stop it after
    /// the sockets made from it.
    public func busNode(as service: String = "gateway") throws -> BusNode {
        var env = try wiring()
        if env["REDEEM_BUS_PUBLIC_KEYS_FILE"] != nil { env["REDEEM_BUS_SECRET_KEY_FILE"] = busKeyFile(service).path }
        return BusNode(try BusOptions(env: Environment(env)), logger: Logger(service: "test", sink: LogSink(capturing: ())))
    }

    /// Every service's log output so far. A service writes its lines below `warning` in batches,
    /// within about 5 ms of each (`LogSink.batchPause`): this waits well past that first.
    public func logs() -> String {
        Thread.sleep(forTimeInterval: 0.05)
        let files = (try? FileManager.default.contentsOfDirectory(atPath: logDirectory.path)) ?? []
        return files.sorted().compactMap { try? String(contentsOfFile: logDirectory.appendingPathComponent($0).path, encoding: .utf8) }.joined(separator: "\n")
    }

    /// Polls `check` until it holds or `seconds` pass.
    public func eventually(_ seconds: Double = 10, _ check: () async throws -> Bool) async throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if (try? await check()) == true { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return try await check()
    }

    /// Waits until process `pid` (a service a test killed) is gone, or a zombie the runner has not
    /// reaped yet (it restarts nothing in the tests); answers whether it is.
    public func gone(_ pid: pid_t, seconds: Double = 10) async throws -> Bool {
        try await eventually(seconds) {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return true }
            return stat.split(separator: ")").last?.split(separator: " ").first == "Z"
        }
    }

    /// SIGTERM to the runner (which stops the services and PostgreSQL) and to any instance started
    /// by hand. Answers each process's exit status: the runner's services by name, hand-started
    /// ones as `<service>#<n>`.
    @discardableResult
    public func stop() -> [String: Int32] {
        guard !stopped else { return [:] }
        stopped = true
        var statuses: [String: Int32] = [:]
        for (i, p) in restarted.enumerated() {
            p.signal(SIGTERM)
            statuses["restarted#\(i)"] = p.wait(seconds: 10) ?? { p.signal(SIGKILL); return p.wait() }()
        }
        runner.signal(SIGTERM)
        if runner.wait(seconds: 30) == nil {
            runner.signal(SIGKILL)
            runner.wait()
        }
        for s in Stack.services {
            if let text = try? String(contentsOf: stateDirectory.appendingPathComponent("\(s).exit"), encoding: .utf8),
               let code = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
                statuses[s] = code
            }
        }
        if ProcessInfo.processInfo.environment["REDEEM_KEEP_TEST_DIRS"] == nil {
            try? FileManager.default.removeItem(at: directory)
        }
        return statuses
    }

    deinit { stop() }
}

extension Stack {
    /// The stack's `REDEEM_SECRET_KEY`, as `run-stack` made it (`<data dir>/secret-key`).
    public func secretKey() throws -> String {
        try String(contentsOf: directory.appendingPathComponent("secret-key"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The keyring accounts and grants seal their secrets with.
    public func secretKeyring() throws -> SecretKeyring {
        try SecretKeyring(env: Environment(["REDEEM_SECRET_KEY": try secretKey()]))
    }
}
