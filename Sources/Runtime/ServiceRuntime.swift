import Bus
import Core
import Database
import Foundation
import HTTP
import Synchronization
import Telemetry

/// What a back-end service (accounts, coupons, grants) is made of, wired the same way for each:
/// logger, metrics, database pool with its migrations, the bus server answering `ping`, the
/// internal HTTP server (`/healthz`, `/readyz`, `/metrics`) and an orderly stop on SIGTERM.
public final class ServiceRuntime: Sendable {
    public let config: ServiceConfig
    public let logger: Logger
    public let metrics = MetricsRegistry()
    public let context = ZMQContext()
    public let pool: PGPool
    public let instance: String
    private let migrated = Atomic<Bool>(false)
    private let started = Atomic<Bool>(false)
    private let parts = Mutex<[@Sendable () async -> Void]>([])
    private let bus = Mutex<BusServer?>(nil)

    public init(config: ServiceConfig) {
        self.config = config
        self.logger = Logger(service: config.name, minimum: config.logLevel)
        self.pool = PGPool(url: config.databaseURL, maxConnections: config.databasePoolSize)
        self.instance = "\(config.name)-\(ProcessInfo.processInfo.processIdentifier)"
        // Every instance exposes at least this, so a scrape shows a restart even before any work.
        metrics.setGauge("redeem_process_start_time_seconds", help: "When this instance started, in Unix seconds.", Date().timeIntervalSince1970)
    }

    /// Whether the schema is migrated.
    public var isMigrated: Bool { migrated.load(ordering: .acquiring) }
    /// Whether the service has started its workers (loaded its keys, …) and so takes work.
    public var isStarted: Bool { started.load(ordering: .acquiring) }

    /// Applies migrations, retrying in the background while the database is unreachable: the
    /// service keeps running and reports not ready meanwhile (SPEC §6).
    public func migrate(_ migrator: Migrator) async {
        var delay = 0.2
        while true {
            do {
                let applied = try await migrator.apply(on: pool)
                migrated.store(true, ordering: .releasing)
                logger.info("database ready", ["db.schema": migrator.schema, "db.migrations_applied": applied.count])
                return
            } catch {
                logger.warning("database not ready; retrying", ["error": String(describing: error), "retry.seconds": delay])
                try? await Task.sleep(for: .milliseconds(Int(delay * 1000)))
                delay = min(delay * 2, 5)
            }
        }
    }

    /// Answers `ping` with a round trip to the database, counted as down if it takes over a second
    /// (a database that stopped answering would otherwise hold `/readyz` with it).
    public func ping() async -> Ping.Response {
        let answered = Atomic<Bool>(false)
        let pool = self.pool
        let up = await Lifecycle.withDeadline(seconds: 1) {
            if (try? await pool.query("SELECT 1")) != nil { answered.store(true, ordering: .releasing) }
        } && answered.load(ordering: .acquiring)
        return Ping.Response(service: config.name, instance: instance, database: up ? "up" : "down", ready: up && isMigrated && isStarted)
    }

    /// Starts the bus server with the service's handlers plus `ping`.
    public func serveBus(_ router: BusRouter) throws {
        var router = router
        router.on(Ping.self) { [self] _, _ in await ping() }
        let server = try BusServer(context: context, bind: config.busBind, router: router, logger: logger)

        logger.info("bus listening", ["bus.endpoint": server.endpoint])
        bus.withLock { $0 = server }
        onStop { server.stop() }
    }

    /// Stops taking bus requests and answers those being handled (up to 3 s), before the service's
    /// workers and the database pool they use go away.
    public func stopTakingRequests() async {
        guard let server = bus.withLock({ $0 }) else { return }
        if !(await server.drain(seconds: 3)) { logger.warning("stopped with bus requests unanswered") }
    }

    /// Starts the internal HTTP server: `/healthz`, `/readyz`, `/metrics`.
    public func serveInternalHTTP() throws {
        var router = Router()
        router.get("/healthz") { _ in .json(200, ["status": "up"]) }
        router.get("/readyz") { [self] _ in
            let p = await ping()
            return .json(p.ready ? 200 : 503, p)
        }
        router.get("/metrics") { [self] _ in .text(200, metrics.render(), contentType: "text/plain; version=0.0.4; charset=utf-8") }
        let routes = router
        var options = HTTPServer.Options()
        options.host = config.httpHost
        options.port = config.httpPort
        options.threads = 1
        let server = HTTPServer(options: options, logger: logger, metrics: nil, accessLog: false) { await routes.handle($0) }
        try server.start()
        logger.info("internal http listening", ["http.port": server.port])
        onStop { await server.stop(drainSeconds: 0.5) }
    }

    /// Registers work to do at shutdown; parts stop in reverse order of registration.
    public func onStop(_ stop: @escaping @Sendable () async -> Void) {
        parts.withLock { $0.append(stop) }
    }

    /// Stops every registered part, newest first, then the database pool.
    public func stop() async {
        for stop in parts.withLock({ $0 }).reversed() { await stop() }
        pool.close()
    }

    /// The `main` of a back-end service: reads configuration (exit 2 on a bad value), starts the
    /// internal HTTP server and the bus, migrates in the background, runs until SIGTERM, exits 0.
    public static func main<S: BackendService>(_ type: S.Type, defaultHTTPPort: Int) -> Never {
        Lifecycle.blockTerminationSignals()  // before any thread exists
        let env = Environment()
        let runtime: ServiceRuntime
        let service: S
        do {
            runtime = ServiceRuntime(config: try ServiceConfig(name: S.name, env: env, defaultHTTPPort: defaultHTTPPort))
            service = try S(runtime: runtime, env: env)
        } catch {
            Logger(service: S.name).error("bad configuration", ["error": String(describing: error)])
            exit(2)
        }
        Lifecycle.run(logger: runtime.logger, start: {
            try runtime.serveInternalHTTP()
            try runtime.serveBus(service.router())
            Task {
                await runtime.migrate(S.migrator)
                // A database blip right after migrating must not leave the workers unstarted.
                var delay = 0.2
                while true {
                    do {
                        try await service.start()
                        runtime.started.store(true, ordering: .releasing)
                        break
                    } catch {
                        runtime.logger.error("service could not start its workers; retrying", ["error": String(describing: error), "retry.seconds": delay])
                        try? await Task.sleep(for: .milliseconds(Int(delay * 1000)))
                        delay = min(delay * 2, 5)
                    }
                }
            }
        }, stop: {
            await runtime.stopTakingRequests()
            await service.stop()
            await runtime.stop()
        })
    }
}

/// A back-end service as `ServiceRuntime.main` runs it.
public protocol BackendService: Sendable {
    static var name: String { get }
    static var migrator: Migrator { get }
    init(runtime: ServiceRuntime, env: Environment) throws
    /// The bus requests this service answers (`ping` is added by the runtime).
    func router() -> BusRouter
    /// Starts background workers once the database is migrated.
    func start() async throws
    /// Stops them (before the bus and the database pool close).
    func stop() async
}

extension BackendService {
    public func start() async throws {}
    public func stop() async {}
}
