import Database
import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `<service> migrate` (what the Kubernetes migration Job runs): the built executables apply
/// their schema and exit, binding no port.
@Suite struct MigrateModeTests {
    static let services = ["accounts", "coupons", "grants"]

    /// Runs `service arguments` with only `env` (and PATH) set; answers its exit status and log.
    func run(_ service: String, _ arguments: [String], _ env: [String: String]) async throws -> (status: Int32, log: String) {
        let log = NSTemporaryDirectory() + "redeem-migrate-\(UUID().uuidString).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        let path = Project.binDirectory.appendingPathComponent(service).path
        var environment = env
        environment["PATH"] = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        let p = try Subprocess(path, arguments, environment: environment, stderr: log)
        let status = try await offThePool { () throws -> Int32 in
            guard let s = p.wait(seconds: 60) else {
                p.signal(SIGKILL)
                p.wait()
                throw TestFailure("\(service) \(arguments) still running after 60 s")
            }
            return s
        }
        return (status, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
    }

    /// The wiring of one service whose HTTP and bus ports are held by this test's own listeners:
    /// a service that tried to bind either would fail to start.
    func occupiedWiring(_ service: String, database: String, held: [Int]) -> [String: String] {
        let name = service.uppercased()
        return [
            "REDEEM_DATABASE_URL": database,
            "REDEEM_\(name)_HTTP_PORT": String(held[0]),
            "REDEEM_\(name)_BUS": "tcp://127.0.0.1:\(held[1])",
            "REDEEM_ACCOUNTS_EVENTS": "tcp://127.0.0.1:\(held[2])",
            "REDEEM_GRANTS_EVENTS": "tcp://127.0.0.1:\(held[2])",
            "REDEEM_GRANTS_COMMANDS": "tcp://127.0.0.1:\(held[3])",
        ]
    }

    @Test func eachServiceMigratesAndExitsWithoutBindingAPort() async throws {
        let pg = try await TestPostgres.shared()
        let database = try await pg.freshDatabase()
        let ports = try await offThePool { try Project.freePorts(4) }
        let listeners = try ports.map { try Listener(port: $0) }
        defer { listeners.forEach { $0.close() } }

        // The control: served normally, the held ports stop the service at start (exit 1). Served,
        // it needs bus keys too (exit 2 without them); plain mode gets it as far as binding.
        // `migrate` below is given none: it needs none.
        // Coupons seals unique codes' CSVs, so it needs the secret key to start (32 bytes, base64).
        let secretKey = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        let plain = occupiedWiring("coupons", database: database, held: ports).merging(
            ["REDEEM_BUS_SECURITY": "plain", "REDEEM_SECRET_KEY": secretKey]) { $1 }
        let served = try await run("coupons", [], plain)
        #expect(served.status == 1, "a service that binds a held port cannot start: \(served.log)")

        let db = try PGConnection(url: database)
        for service in Self.services {
            let first = try await run(service, ["migrate"], occupiedWiring(service, database: database, held: ports))
            #expect(first.status == 0, "\(service) migrate: \(first.log)")
            #expect(first.log.contains("\"migrated\""), "\(service) logs that it migrated: \(first.log)")
            let versions = try db.query("SELECT count(*)::int AS n FROM \(service).schema_migrations").rows.first!.decode("n", as: Int.self)
            #expect(versions > 0, "\(service)'s migrations are applied")
            let functions = try db.query("SELECT count(*)::int AS n FROM pg_proc p JOIN pg_namespace s ON s.oid = p.pronamespace WHERE s.nspname = $1", [service]).rows.first!.decode("n", as: Int.self)
            let sql = Project.root.appendingPathComponent("Services/\(service)/\(service.prefix(1).uppercased() + service.dropFirst())Service/SQL").path
            if FileManager.default.fileExists(atPath: sql) { #expect(functions > 0, "\(service)'s SQL functions are applied") }
            // Again: nothing left to apply, still success, nothing applied twice.
            let again = try await run(service, ["migrate"], occupiedWiring(service, database: database, held: ports))
            #expect(again.status == 0, "\(service) migrate again: \(again.log)")
            #expect(again.log.contains("\"db.migrations_applied\":0"), "\(service) applies nothing the second time: \(again.log)")
            let after = try db.query("SELECT count(*)::int AS n FROM \(service).schema_migrations").rows.first!.decode("n", as: Int.self)
            #expect(after == versions)
        }
    }

    @Test func badSettingsExit2AndAnUnreachableDatabaseExits1() async throws {
        let missing = try await run("coupons", ["migrate"], [:])
        #expect(missing.status == 2, "no REDEEM_DATABASE_URL: \(missing.log)")
        #expect(missing.log.contains("REDEEM_DATABASE_URL"))
        let unknown = try await run("coupons", ["migrat"], ["REDEEM_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/redeem"])
        #expect(unknown.status == 2, "an unknown argument: \(unknown.log)")
        let port = try await offThePool { try Project.freePort() }  // nothing listens there
        let down = try await run("grants", ["migrate"], ["REDEEM_DATABASE_URL": "postgresql://postgres@127.0.0.1:\(port)/redeem?connect_timeout=2"])
        #expect(down.status == 1, "no database: \(down.log)")
        #expect(down.log.contains("migration failed"))
    }
}

/// A TCP socket listening on 127.0.0.1:`port`, so nothing else can bind it.
private final class Listener: Sendable {
    let fd: Int32

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 1) == 0 else {
            Glibc.close(fd)
            throw TestFailure("cannot hold port \(port)")
        }
    }

    func close() { Glibc.close(fd) }
}
