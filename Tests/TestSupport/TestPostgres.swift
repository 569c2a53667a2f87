import Foundation
import Shared
import Synchronization

/// A private PostgreSQL cluster for one test process, started on first use (with the project's
/// own `deploy/postgres`) and stopped when the process exits.
public final class TestPostgres: Sendable {
    public let url: String
    public let dataDirectory: URL

    private static let instance = Mutex<TestPostgres?>(nil)

    /// The process-wide cluster.
    public static func shared() throws -> TestPostgres {
        try instance.withLock { current in
            if let current { return current }
            let dir = try Project.temporaryDirectory("pg")
            let url = try Project.run(Project.root.appendingPathComponent("deploy/postgres").path, ["start", dir.path])
            let pg = TestPostgres(url: url, dataDirectory: dir)
            current = pg
            atexit { TestPostgres.stopShared() }
            return pg
        }
    }

    private init(url: String, dataDirectory: URL) {
        self.url = url
        self.dataDirectory = dataDirectory
    }

    private static func stopShared() {
        guard let pg = instance.withLock({ $0 }) else { return }
        pg.stop()
        try? FileManager.default.removeItem(at: pg.dataDirectory)
    }

    public func stop() {
        _ = try? Project.run(Project.root.appendingPathComponent("deploy/postgres").path, ["stop", dataDirectory.path])
    }

    /// Starts the cluster again on the same port (after `stop`).
    public func start() throws {
        let port = URL(string: url)!.port!
        try Project.run(Project.root.appendingPathComponent("deploy/postgres").path, ["start", dataDirectory.path, String(port)])
    }

    /// A database of its own for one test, so tests don't see each other's schemas.
    public func freshDatabase() throws -> String {
        let name = "t_\(UUID().uuidString.prefix(12).lowercased().replacingOccurrences(of: "-", with: ""))"
        let admin = try PGConnection(url: url)
        try admin.execute("CREATE DATABASE \(name)")
        return url.replacingOccurrences(of: "/redeem", with: "/\(name)")
    }
}
