import Foundation
import Synchronization
import Testing
@testable import Backend
import Bus
import Database
import Core
@testable import Runtime
@testable import Telemetry

@Suite struct ServiceGroupTests {
    struct Refused: Error {}

    /// Records what each part did, in order.
    final class Journal: Sendable {
        let lines = Mutex<[String]>([])
        func note(_ line: String) { lines.withLock { $0.append(line) } }
        var all: [String] { lines.withLock { $0 } }
        /// Waits until `line` is noted (each part notes its start at once; no timing assumed).
        func waitFor(_ line: String) async {
            while !all.contains(line) { await Task.yield() }
        }
    }

    static func part(_ name: String, _ journal: Journal, failing: Bool = false) -> any Service {
        StartStopService(name, start: {
            journal.note("start \(name)")
            if failing { throw Refused() }
        }, stop: {
            journal.note("stop \(name)")
        })
    }

    static let logger = Logger(service: "test", minimum: .error)

    /// Cancelling the group stops every part newest first, each after the ones started after it.
    @Test func partsStopInReverseOrderWhenCancelled() async throws {
        let journal = Journal()
        let group = ServiceGroup([Self.part("pool", journal), Self.part("http", journal), Self.part("bus", journal)], logger: Self.logger)
        let running = Task { try await group.run() }
        for name in ["pool", "http", "bus"] { await journal.waitFor("start \(name)") }
        running.cancel()
        try await running.value
        #expect(Array(journal.all.suffix(3)) == ["stop bus", "stop http", "stop pool"])
    }

    /// A part that cannot start ends the group: the parts that did start are stopped in reverse
    /// order, and `run()` throws naming the part and its error.
    @Test func aPartThatCannotStartStopsTheOthersAndThrows() async throws {
        let journal = Journal()
        let group = ServiceGroup([Self.part("pool", journal), Self.part("http", journal, failing: true), Self.part("bus", journal)], logger: Self.logger)
        let error = await #expect(throws: ServiceGroup.Ended.self) { try await group.run() }
        #expect(error?.service == "http")
        #expect(error?.error is Refused)
        let stops = journal.all.filter { $0.hasPrefix("stop") }
        #expect(stops == ["stop bus", "stop pool"], "the failed part never started, so it is not stopped")
    }

    /// A part whose run returns by itself is a failure too: nothing keeps running half up.
    @Test func aPartThatReturnsOnItsOwnEndsTheGroup() async throws {
        struct Quits: Service {
            var name: String { "quitter" }
            func run() async throws {}
        }
        let journal = Journal()
        let group = ServiceGroup([Self.part("pool", journal), Quits()], logger: Self.logger)
        let error = await #expect(throws: ServiceGroup.Ended.self) { try await group.run() }
        #expect(error?.service == "quitter")
        #expect(error?.error == nil)
        #expect(journal.all.contains("stop pool"))
    }

    /// A part's stop runs outside the cancelled task, so its waits (a drain) really wait.
    @Test func aStopIsNotCancelled() async throws {
        let seen = Mutex<(cancelled: Bool, slept: Bool)?>(nil)
        let part = StartStopService("drain", stop: {
            let slept = (try? await Task.sleep(for: .milliseconds(1))) != nil
            seen.withLock { $0 = (Task.isCancelled, slept) }
        })
        let group = ServiceGroup([part], logger: Self.logger)
        let running = Task { try await group.run() }
        running.cancel()
        try await running.value
        #expect(seen.withLock { $0?.cancelled } == false)
        #expect(seen.withLock { $0?.slept } == true, "a sleep in a stop completes")
    }

    /// `untilCancelled` returns at once in a task that is already cancelled.
    @Test func untilCancelledReturnsForACancelledTask() async {
        let task = Task {
            await untilCancelled()
            return Task.isCancelled
        }
        task.cancel()
        #expect(await task.value)
    }

    /// A back-end's workers are cancelled and awaited before `runUntilCancelled` returns, so the
    /// service's stop and the pool's close come after every worker has ended.
    @Test func workersAreCancelledAndAwaitedBeforeTheRunEnds() async throws {
        let journal = Journal()
        let workers: [any Service] = ["grant worker", "webhook deliverer"].map { name in
            Worker(name) {
                journal.note("run \(name)")
                await untilCancelled()
                // A worker that takes a moment to finish its pass is still awaited.
                for _ in 0..<100 { await Task.yield() }
                journal.note("ended \(name)")
            }
        }
        let run = Task { try await ServiceRuntime.Workers<NoService>.runUntilCancelled(workers, logger: Self.logger) }
        await journal.waitFor("run grant worker")
        await journal.waitFor("run webhook deliverer")
        run.cancel()
        try await run.value
        journal.note("stop")
        #expect(Set(journal.all.suffix(3).prefix(2)) == ["ended grant worker", "ended webhook deliverer"])
        #expect(journal.all.last == "stop")
    }

    /// A worker that returns before it was asked to ends the run, naming itself.
    @Test func aWorkerThatEndsOnItsOwnEndsTheRun() async throws {
        let workers: [any Service] = [Worker("quitter") {}, Worker("steady") { await untilCancelled() }]
        await #expect(throws: ServiceGroup.Ended.self) {
            try await ServiceRuntime.Workers<NoService>.runUntilCancelled(workers, logger: Self.logger)
        }
    }

    /// The exit code comes from the error's type: a setting (`ConfigError`), also inside the
    /// `Ended` of the part that failed, exits 2; anything else 1.
    @Test(arguments: [
        (ConfigError(variable: "REDEEM_X", problem: "bad") as any Error, Int32(2)),
        (ServiceGroup.Ended(service: "bus", error: ConfigError(variable: "X", problem: "bad")), 2),
        (ServiceGroup.Ended(service: "bus", error: Refused()), 1),
        (ServiceGroup.Ended(service: "bus", error: nil), 1),
        (ServiceError(.unavailable, "REDEEM_ in a message is not a setting"), 1),
    ] as [(any Error, Int32)])
    func exitCodeComesFromTheErrorsType(error: any Error, code: Int32) {
        #expect(ServiceMain.exitCode(error) == code)
    }
}

/// A back-end that does nothing, to name `ServiceRuntime.Workers`' type parameter.
private struct NoService: BackendService {
    static let name = "none"
    static let migrator = Migrator(schema: "none", migrations: [])
    init(runtime: ServiceRuntime, env: Environment) throws {}
    func router() -> BusRouter { BusRouter(logger: Logger(service: "none", minimum: .error)) }
}
