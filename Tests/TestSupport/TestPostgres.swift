import Core
import Database
import Foundation
import Runtime
import Synchronization

/// A private PostgreSQL cluster for one test process, started on first use (with the project's
/// own `deploy/postgres`) and stopped when the process exits. Every call that waits for a child
/// process is async and waits off the cooperative pool (`offThePool`).
public final class TestPostgres: Sendable {
    public let url: String
    public let dataDirectory: URL

    private static let instance = Mutex<TestPostgres?>(nil)
    private static let script = Project.root.appendingPathComponent("deploy/postgres").path

    /// The process-wide cluster, shared by every test that doesn't stop it.
    public static func shared() async throws -> TestPostgres {
        try await offThePool {
            try instance.withLock { current in
                if let current { return current }
                let pg = try TestPostgres.startNew()
                current = pg
                atexit { TestPostgres.stopShared() }
                return pg
            }
        }
    }

    /// A cluster of its own, for a test that stops and restarts the server while other tests use
    /// the shared one. The caller ends it with `remove()`.
    public static func ownCluster() async throws -> TestPostgres {
        try await offThePool { try startNew() }
    }

    private static func startNew() throws -> TestPostgres {
        let dir = try Project.temporaryDirectory("pg")
        return TestPostgres(url: try Project.run(script, ["start", dir.path]), dataDirectory: dir)
    }

    private init(url: String, dataDirectory: URL) {
        self.url = url
        self.dataDirectory = dataDirectory
    }

    private static func stopShared() {
        guard let pg = instance.withLock({ $0 }) else { return }
        pg.stopNow()
        try? FileManager.default.removeItem(at: pg.dataDirectory)
    }

    private func stopNow() {
        _ = try? Project.run(Self.script, ["stop", dataDirectory.path])
    }

    /// A fast shutdown.
    public func stop() async {
        _ = try? await offThePool { self.stopNow() }
    }

    /// Starts the cluster again on the same port (after `stop`).
    public func start() async throws {
        let port = String(URL(string: url)!.port!)
        _ = try await offThePool { try Project.run(Self.script, ["start", self.dataDirectory.path, port]) }
    }

    /// Stops the cluster and deletes its files.
    public func remove() async {
        await stop()
        try? FileManager.default.removeItem(at: dataDirectory)
    }

    /// A database of its own for one test, so tests don't see each other's schemas.
    public func freshDatabase() async throws -> String {
        let name = "t_\(UUID().uuidString.prefix(12).lowercased().replacingOccurrences(of: "-", with: ""))"
        let url = self.url
        _ = try await offThePool { try PGConnection(url: url).execute("CREATE DATABASE \(name)") }
        return url.replacingOccurrences(of: "/redeem", with: "/\(name)")
    }
}

extension PGConnection {
    /// How many times `table` has been read sequentially so far, this connection's reads
    /// included (they reach the statistics when the flushing statement ends).
    public func sequentialScans(of table: String) throws -> Int {
        try query("SELECT pg_stat_force_next_flush()")
        return try query("SELECT seq_scan FROM pg_stat_user_tables WHERE relid = $1::regclass", [table]).first!.decode("seq_scan")
    }

    /// How many index entries of `table`'s indexes have been read so far (`idx_tup_read`), this
    /// connection's reads included, as `sequentialScans` counts them.
    public func indexEntriesRead(of table: String) throws -> Int {
        try query("SELECT pg_stat_force_next_flush()")
        return try query(
            "SELECT coalesce(sum(idx_tup_read), 0)::int AS n FROM pg_stat_user_indexes WHERE relid = $1::regclass", [table]
        ).first!.decode("n")
    }
}
