import Bus
import Core
import Database
import Foundation
import HTTP
import Runtime
import Synchronization
import Telemetry

/// What a back-end service (accounts, coupons, grants) is made of, wired the same way for each:
/// logger, metrics, database pool with its migrations, the bus server answering `ping`, the
/// internal HTTP server (`/healthz`, `/readyz`, `/metrics`), as a `ServiceGroup` that `ServiceMain`
/// runs until SIGTERM.
public final class ServiceRuntime: Sendable {
    public let config: ServiceConfig
    public let logger: Logger
    public let metrics = MetricsRegistry()
    /// This process's place on the bus: every bus socket of the service is made from it.
    public let bus: BusNode
    public let pool: PGPool
    public let instance: String
    private let migrated = Atomic<Bool>(false)
    private let started = Atomic<Bool>(false)

    /// `bus`: how the service's bus sockets are secured (read apart from `config`, so that
    /// `<service> migrate` needs no bus keys).
    public init(config: ServiceConfig, bus: BusOptions) {
        self.config = config
        self.logger = Logger(service: config.name, minimum: config.logLevel)
        self.bus = BusNode(bus, logger: logger)
        self.pool = PGPool(url: config.databaseURL, maxConnections: config.databasePoolSize)
        self.instance = "\(config.name)-\(ProcessInfo.processInfo.processIdentifier)"
        // Every instance exposes at least this, so a scrape shows a restart even before any work.
        metrics.setGauge("redeem_process_start_time_seconds", help: "When this instance started, in Unix seconds.", Date().timeIntervalSince1970)
        ProcessMetrics.register(on: metrics, service: config.name)
        Tracer.shared.attach(metrics: metrics)
    }

    /// Whether the schema is migrated.
    public var isMigrated: Bool { migrated.load(ordering: .acquiring) }
    /// Whether the service has started its workers (loaded its keys, …) and so takes work.
    public var isStarted: Bool { started.load(ordering: .acquiring) }

    /// Brings the schema up to date, retrying in the background while the database is unreachable
    /// or the schema behind: the service keeps running and reports not ready meanwhile.
    /// With the owner's URL (`REDEEM_MIGRATION_DATABASE_URL`, one machine) it applies the
    /// migrations itself, over a connection of its own closed afterwards; without it, it runs as a
    /// role that can do no DDL and waits until `<service> migrate` has applied them. Returns early,
    /// false, if the task is cancelled first.
    func migrate(_ migrator: Migrator) async -> Bool {
        let owner = config.migrationDatabaseURL
        let pool = self.pool
        guard let applied = await Self.startBackoff.retry({ () async throws -> Int in
            if let owner {
                let ownerPool = PGPool(url: owner, maxConnections: 1)
                defer { ownerPool.close() }
                return try await migrator.apply(on: ownerPool).count
            }
            let pending = try await migrator.pending(on: pool)
            if !pending.isEmpty { throw pending }
            return 0
        }, failed: { error, delay in
            logger.warning(error is Migrator.Pending ? "schema not migrated; waiting" : "database not ready; retrying",
                           ["error": String(describing: error), "retry.seconds": delay])
        }) else { return false }
        migrated.store(true, ordering: .releasing)
        logger.info("database ready", ["db.schema": migrator.schema, "db.migrations_applied": applied, "db.migrated_here": owner != nil])
        return true
    }

    /// How starting again after a failure is spaced: from 0.2 s, doubling, at most 5 s apart.
    static let startBackoff = Backoff(initial: 0.2, max: 5)

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

    /// The bus server with the service's handlers plus `ping`. It binds when it starts, and
    /// answers every request but `ping` `unavailable` ("the service is starting") until the schema
    /// is migrated: a handler run before then would fail on a table that is not there yet. (Not
    /// until the whole start: a client sends to every instance in turn and does not try another on
    /// this answer, so an instance finishing its start would refuse work it can do.) At shutdown
    /// it stops taking requests and answers those being handled (up to 3 s), before the service's
    /// workers and the database pool they use go away.
    func busServer(_ router: BusRouter) -> any Service {
        var router = router
        router.on(Ping.self) { [self] _, _ in await ping() }
        router.refusing = { [self] type in type == Ping.type || isMigrated ? nil : .starting }
        let routes = router
        let server = Mutex<BusServer?>(nil)
        return StartStopService("bus", start: { [self] in
            let started = try BusServer(bus: bus, bind: config.busBind, router: routes, logger: logger)
            logger.info("bus listening", ["bus.endpoint": started.endpoint])
            server.withLock { $0 = started }
        }, stop: { [self] in
            guard let started = server.withLock({ $0 }) else { return }
            if !(await started.drain(seconds: 3)) { logger.warning("stopped with bus requests unanswered") }
            started.stop()
        })
    }

    /// The internal HTTP server: `/healthz`, `/readyz`, `/metrics`.
    func internalHTTP() -> any Service {
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
        return StartStopService("internal http", start: { [self] in
            try server.start()
            logger.info("internal http listening", ["http.port": server.port])
        }, stop: {
            await server.stop(drainSeconds: 0.5)
        })
    }

    /// The service's own work: once the schema is migrated, the service starts (retrying a
    /// database blip, which must not leave it unstarted) and its workers run, each a `Service`.
    /// At shutdown every worker is cancelled and awaited, and then the service stops, before the
    /// database pool they use closes. A worker that ends on its own ends the process. Meanwhile
    /// the service answers, not ready, while the database is away.
    struct Workers<S: BackendService>: Service {
        let runtime: ServiceRuntime
        let service: S
        var name: String { "workers" }

        func run() async throws {
            guard await runtime.migrate(S.migrator), await ServiceRuntime.startBackoff.retry({ try await service.start() }, failed: { error, delay in
                runtime.logger.error("service could not start its workers; retrying", ["error": String(describing: error), "retry.seconds": delay])
            }) != nil else {
                return await stopping { await service.stop() }
            }
            runtime.started.store(true, ordering: .releasing)
            do {
                try await Self.runUntilCancelled(service.workers(), logger: runtime.logger)
            } catch {
                await stopping { await service.stop() }
                throw error
            }
            await stopping { await service.stop() }
        }

        /// Runs `workers` together until this task is cancelled, then cancels and awaits them all;
        /// throws `ServiceGroup.Ended` when one ends on its own or fails first.
        static func runUntilCancelled(_ workers: [any Service], logger: Logger) async throws {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for worker in workers {
                    group.addTask {
                        do {
                            try await worker.run()
                        } catch {
                            throw ServiceGroup.Ended(service: worker.name, error: error)
                        }
                        if !Task.isCancelled { throw ServiceGroup.Ended(service: worker.name, error: nil) }
                    }
                }
                group.addTask { await untilCancelled() }
                try await group.next()
                group.cancelAll()
                while !group.isEmpty {
                    do { try await group.next() } catch { logger.warning("worker stopped with an error", ["error": String(describing: error)]) }
                }
            }
        }
    }

    /// The parts of a back-end service, in the order they start; they stop in reverse: the bus
    /// stops taking requests, then the workers stop, then the internal HTTP server, then the
    /// database pool everything used, and last the bus node (its ZAP handler outlives every
    /// server socket).
    public static func group<S: BackendService>(_ type: S.Type, env: Environment, defaultHTTPPort: Int) throws -> ServiceGroup {
        let runtime = ServiceRuntime(config: try ServiceConfig(name: S.name, env: env, defaultHTTPPort: defaultHTTPPort), bus: try BusOptions(env: env))
        let service = try S(runtime: runtime, env: env)
        let pool = runtime.pool
        let bus = runtime.bus
        return ServiceGroup([
            StartStopService("bus node", start: { bus.warnIfPlain() }, stop: { bus.stop() }),
            StartStopService("database pool", stop: { pool.close() }),
            runtime.internalHTTP(),
            Workers(runtime: runtime, service: service),
            runtime.busServer(service.router()),
        ], logger: runtime.logger)
    }
}

extension ServiceRuntime {
    /// The `main` of a back-end service: `ServiceMain.run` with its group, and with `migrate`,
    /// which applies the service's migrations and SQL functions once and exits (a Kubernetes
    /// migration Job runs `coupons migrate`). It connects as the schema's owner
    /// (`REDEEM_MIGRATION_DATABASE_URL`, else `REDEEM_DATABASE_URL`) and reads nothing else but
    /// the log level, so a Job needs none of the service's own secrets; the
    /// migration lock (`Migrator`) makes it safe beside instances migrating at their start.
    public static func main<S: BackendService>(_ type: S.Type, defaultHTTPPort: Int) -> Never {
        ServiceMain.run(S.name, mallocArenas: S.mallocArenas, migrate: { env in
            let level = try ServiceConfig.logLevel(env)
            let url: String
            if let owner = try ServiceConfig.migrationDatabaseURL(env) {
                url = owner
            } else if let single = try env.optionalDatabaseURL("REDEEM_DATABASE_URL", file: "REDEEM_DATABASE_URL_FILE") {
                url = single
            } else {
                throw ConfigError(variable: "REDEEM_MIGRATION_DATABASE_URL",
                                  problem: "is required by `migrate`: the schema owner's URL (or REDEEM_DATABASE_URL, for a database with one role)")
            }
            return {
                let logger = Logger(service: S.name, minimum: level)
                let pool = PGPool(url: url, maxConnections: 1)
                defer { pool.close() }
                let applied = try await S.migrator.apply(on: pool)
                logger.info("migrated", ["db.schema": S.migrator.schema, "db.migrations_applied": applied.count])
            }
        }) { try group(S.self, env: $0, defaultHTTPPort: defaultHTTPPort) }
    }
}

/// A back-end service as `ServiceRuntime.group` runs it.
public protocol BackendService: Sendable {
    static var name: String { get }
    static var migrator: Migrator { get }
    /// The malloc heaps the process may use (`ServiceMain.boundMallocRetention`).
    static var mallocArenas: Int { get }
    init(runtime: ServiceRuntime, env: Environment) throws
    /// The bus requests this service answers (`ping` is added by the runtime).
    func router() -> BusRouter
    /// Prepares the service's work once the database is migrated (loads keys, binds intake).
    func start() async throws
    /// The service's long-running workers, run after `start` until shutdown, each cancelled and
    /// awaited before `stop`.
    func workers() -> [any Service]
    /// Releases what `start` took (after the workers ended, before the bus and the pool close).
    func stop() async
}

extension BackendService {
    public static var mallocArenas: Int { ServiceMain.requestPathArenas }
    public func start() async throws {}
    public func workers() -> [any Service] { [] }
    public func stop() async {}
}
