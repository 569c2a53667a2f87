internal import CMalloc
import Core
import Foundation
import Synchronization
import Telemetry

/// One long-running part of a process (a server, a worker, a pool): `run()` starts it, keeps it
/// going until its task is cancelled, then stops it and returns. A `run()` that throws, or returns
/// before it was cancelled, ends the whole process: a part that cannot work is not left half up.
/// The shape of swift-service-lifecycle's `Service`, which cannot be fetched here.
public protocol Service: Sendable {
    /// For logs.
    var name: String { get }
    func run() async throws
}

/// A part made of a start and a stop: `start` runs first (a bind, a subscription), then the part
/// waits for cancellation and runs `stop`.
public struct StartStopService: Service {
    public let name: String
    private let start: @Sendable () async throws -> Void
    private let stop: @Sendable () async -> Void

    public init(_ name: String, start: @escaping @Sendable () async throws -> Void = {}, stop: @escaping @Sendable () async -> Void = {}) {
        self.name = name
        self.start = start
        self.stop = stop
    }

    public func run() async throws {
        try await start()
        await untilCancelled()
        await stopping(stop)
    }
}

/// A background loop as a part: `body` runs until its task is cancelled (a `Periodic` loop, a
/// worker waiting on its doorbell). Returning before then ends the process, as for any part.
public struct Worker: Service {
    public let name: String
    private let body: @Sendable () async -> Void

    public init(_ name: String, _ body: @escaping @Sendable () async -> Void) {
        self.name = name
        self.body = body
    }

    public func run() async throws { await body() }
}

/// Runs a part's stop outside the cancelled task that asked for it: a stop waits (for requests
/// to drain, for workers to finish), and in a cancelled task every sleep would end at once.
public func stopping(_ stop: @escaping @Sendable () async -> Void) async {
    await Task { await stop() }.value
}

/// Returns once the current task is cancelled (at once if it already is).
public func untilCancelled() async {
    let (stream, continuation) = AsyncStream<Never>.makeStream()
    await withTaskCancellationHandler {
        for await _ in stream {}
    } onCancel: {
        continuation.finish()
    }
}

/// Services run together: started in order, and at shutdown stopped in reverse order, each once
/// the one after it has finished, all within one deadline. When one of them fails (or returns on
/// its own), the others are stopped the same way and `run()` throws.
public struct ServiceGroup: Sendable {
    public let services: [any Service]
    public let logger: Logger
    /// How long the whole stop may take before the process leaves with work still in progress.
    public let stopDeadline: Double

    public init(_ services: [any Service], logger: Logger, stopDeadline: Double = 4) {
        self.services = services
        self.logger = logger
        self.stopDeadline = stopDeadline
    }

    /// A service that ended before it was asked to: its error, or a note that it returned.
    public struct Ended: Error, CustomStringConvertible {
        public let service: String
        public let error: (any Error)?
        public var description: String { error.map { String(describing: $0) } ?? "\(service) stopped on its own" }

        public init(service: String, error: (any Error)?) {
            self.service = service
            self.error = error
        }
    }

    /// Runs every service until this task is cancelled (then stops them in reverse order and
    /// returns) or until one of them ends (then stops the rest and throws `Ended`).
    public func run() async throws {
        let ended = AsyncStream<Ended>.makeStream()
        var tasks: [Task<Void, Never>] = []
        for service in services {
            tasks.append(Task {
                do {
                    try await service.run()
                    if !Task.isCancelled { ended.continuation.yield(Ended(service: service.name, error: nil)) }
                } catch {
                    if !Task.isCancelled { ended.continuation.yield(Ended(service: service.name, error: error)) }
                }
            })
        }
        var first: Ended?
        await withTaskCancellationHandler {
            for await e in ended.stream {
                first = e
                break
            }
        } onCancel: {
            ended.continuation.finish()
        }
        // Newest first: each part stops only once the parts started after it (which may use it) are gone.
        for task in tasks.reversed() {
            task.cancel()
            await task.value
        }
        if let first { throw first }
    }
}

/// The `main` of every Redeem executable (the gateway and each back-end service): blocks the
/// termination signals before any thread exists, builds the process's services from its
/// configuration (exit 2 on a bad value), runs them until SIGTERM/SIGINT, stops them in reverse
/// order within the group's deadline, and exits 0. A service that cannot start exits 1 (2 when
/// a setting is at fault).
///
/// `<name> migrate` (only where `migrate` is given, the back-end services) instead applies the
/// schema's migrations and functions once and exits: 0 when applied, 1 when they could not be,
/// 2 on a bad setting. It binds no port. Any other argument exits 2 with the usage.
public enum ServiceMain {
    /// What `<name> migrate` runs, built from the environment (throwing on a bad setting):
    /// applies the migrations once, throwing when they could not be applied.
    public typealias Migrate = (Environment) throws -> @Sendable () async throws -> Void

    /// glibc keeps what a process frees for reuse, and raises its threshold for handing large
    /// blocks back to the kernel after each one freed: after one argon2id hash (19 MiB) every later
    /// one came from the heap and stayed resident, and accounts idled at 77 MB after a burst of
    /// sign-ups. A fixed threshold hands every block of 256 KiB or more back when it is freed.
    ///
    /// `arenas` bounds the heaps threads allocate from. Two bound what freed small blocks keep
    /// (accounts, whose sign-ups hash in parallel), but threads on both cores then share a heap and
    /// wait for its lock: in the gateway under load the lock's futex calls and the contended
    /// malloc and free took about a fifth of its CPU (docs/performance.md, "Malloc's arenas"). A
    /// service on the request path takes `requestPathArenas`, one a busy thread.
    static func boundMallocRetention(arenas: Int) {
        _ = mallopt(M_MMAP_THRESHOLD, 256 * 1024)
        _ = mallopt(M_ARENA_MAX, Int32(arenas))
    }

    /// The heaps of a service on the request path: libmicrohttpd's threads, the Swift executor's,
    /// ZeroMQ's and the bus's, the log writer.
    public static let requestPathArenas = 8

    public static func run(
        _ name: String, mallocArenas: Int = requestPathArenas, migrate: Migrate? = nil,
        _ build: (Environment) throws -> ServiceGroup
    ) -> Never {
        switch Array(CommandLine.arguments.dropFirst()) {
        case []: break
        case ["migrate"] where migrate != nil: runOnce(name, migrate!)
        case ["--version"]:
            print("\(name) \(Build.version)")
            exit(0)
        default:
            let usage = migrate == nil ? "usage: \(name) [--version]" : "usage: \(name) [migrate | --version]"
            Logger(service: name).error("bad arguments", ["arguments": CommandLine.arguments.dropFirst().joined(separator: " "), "usage": usage])
            exit(2)
        }
        Lifecycle.blockTerminationSignals()  // before any thread exists
        boundMallocRetention(arenas: mallocArenas)
        StartupMemory.mapCodeByThePage()
        let group: ServiceGroup
        do {
            let env = Environment()
            let exporter = try OTLPExporter.fromEnvironment(env, logger: Logger(service: name))
            Tracer.shared.configure(service: name, exporter: exporter)
            group = try build(env)
        } catch {
            Logger(service: name).error("bad configuration", ["error": String(describing: error)])
            exit(2)
        }
        StartupMemory.release()
        let logger = group.logger
        Task.detached {
            try? await Task.sleep(for: StartupMemory.settled)
            StartupMemory.release()
        }
        let running = Task.detached {
            do {
                try await group.run()
            } catch {
                logger.error("cannot start", ["service": (error as? ServiceGroup.Ended)?.service ?? name, "error": String(describing: error)])
                ServiceMain.end(ServiceMain.exitCode(error))
            }
        }
        let signal = Lifecycle.waitForTermination()
        logger.info("stopping", ["signal": Int(signal)])
        let stopped = DispatchSemaphore(value: 0)
        Task.detached {
            running.cancel()
            await running.value
            stopped.signal()
        }
        let clean = stopped.wait(timeout: .now() + group.stopDeadline) == .success
        // The last spans, within a second.
        let flushed = DispatchSemaphore(value: 0)
        Task.detached {
            await Tracer.shared.flush()
            flushed.signal()
        }
        _ = flushed.wait(timeout: .now() + 1)
        logger.info(clean ? "stopped" : "stopped with work still in progress")
        end(0)
    }

    /// Ends the process once other threads may still run (a part that failed to start while the
    /// others start; work past the stop deadline): stdio is flushed, but no `atexit` handler runs.
    /// `exit` would run OpenSSL's, which frees its tables under a thread still hashing or signing,
    /// and a failed start then ended with SIGSEGV (status 139) instead of its own status, about 1
    /// time in 15.
    static func end(_ status: Int32) -> Never {
        LogSink.standardError.flush()
        fflush(nil)
        _exit(status)
    }

    /// A start that failed on a setting (`ConfigError`, found by its type, also inside the
    /// `ServiceGroup.Ended` of the part that failed) exits 2, as a bad configuration read before
    /// the start does; any other failure exits 1.
    public static func exitCode(_ error: any Error) -> Int32 {
        if error is ConfigError { return 2 }
        if let ended = error as? ServiceGroup.Ended, let inner = ended.error { return exitCode(inner) }
        return 1
    }

    /// `<name> migrate`: one attempt, no retries (the Job that runs it retries), no signals
    /// caught (a SIGTERM ends it, and PostgreSQL rolls the open transaction back).
    private static func runOnce(_ name: String, _ migrate: Migrate) -> Never {
        let apply: @Sendable () async throws -> Void
        do {
            apply = try migrate(Environment())
        } catch {
            Logger(service: name).error("bad configuration", ["error": String(describing: error)])
            exit(2)
        }
        let status = Atomic<Int32>(1)
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            do {
                try await apply()
                status.store(0, ordering: .releasing)
            } catch {
                Logger(service: name).error("migration failed", ["error": String(describing: error)])
            }
            done.signal()
        }
        done.wait()
        end(status.load(ordering: .acquiring))
    }
}
