import Foundation
import Synchronization

/// The small parts background work is made of: a `Doorbell` that wakes a waiting loop, a `Backoff`
/// that spaces attempts after failures, and `Periodic`, the loop itself. Each takes its sleep as an
/// input (`Background.Sleep`), so tests drive time instead of waiting for it.
public enum Background {
    /// Lets `duration` pass, or less when the task is cancelled (it never throws). Production code
    /// uses `Background.sleep`; a test passes a stand-in that decides when time is up.
    public typealias Sleep = @Sendable (Duration) async -> Void

    /// `Task.sleep` on the continuous clock, returning early when the task is cancelled.
    public static let sleep: Sleep = { try? await Task.sleep(for: $0) }
}

/// Wakes a waiting task from anywhere (any thread, any task, no `await`). Rings coalesce: rung any
/// number of times while nobody waits, the bell answers the next wait at once, once.
///
/// A loop rings its own bell to say "there is work": new rows were committed, a call ended.
/// `wait(timeout:)` then returns early instead of sleeping out its timeout.
public final class Doorbell: Sendable {
    private enum Waiter {
        /// Registered, its continuation not stored yet: a ring, timeout or cancellation in this
        /// window is kept as `ended` and answered when the continuation arrives.
        case arriving
        case waiting(CheckedContinuation<Bool, Never>)
        case ended(Bool)
    }

    private struct State {
        var rung = false
        var next = 0
        var waiters: [Int: Waiter] = [:]
    }

    private let state = Mutex(State())
    private let sleep: Background.Sleep

    public init(sleep: @escaping Background.Sleep = Background.sleep) {
        self.sleep = sleep
    }

    /// Wakes every task waiting now; when none is, the next wait returns at once.
    public func ring() {
        let woken = state.withLock { s -> [CheckedContinuation<Bool, Never>] in
            var woken: [CheckedContinuation<Bool, Never>] = []
            var heard = false
            for (id, w) in s.waiters {
                switch w {
                case .arriving:
                    s.waiters[id] = .ended(true)
                    heard = true
                case .waiting(let c):
                    s.waiters[id] = nil
                    woken.append(c)
                    heard = true
                case .ended:
                    continue  // timed out or cancelled already: this ring is not its answer
                }
            }
            if !heard { s.rung = true }
            return woken
        }
        for c in woken { c.resume(returning: true) }
    }

    /// Waits until the bell rings (true), or `timeout` passes or the task is cancelled (false). A
    /// ring since the last wait ended answers at once, and is used up.
    @discardableResult
    public func wait(timeout: Duration) async -> Bool {
        let id: Int? = state.withLock { s in
            if s.rung {
                s.rung = false
                return nil
            }
            s.next += 1
            s.waiters[s.next] = .arriving
            return s.next
        }
        guard let id else { return true }
        guard timeout > .zero, !Task.isCancelled else {
            end(id, rung: false)
            return await arrive(id)
        }
        let sleep = self.sleep
        let timer = Task {
            await sleep(timeout)
            if !Task.isCancelled { self.end(id, rung: false) }
        }
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await arrive(id)
        } onCancel: {
            end(id, rung: false)
        }
    }

    /// Stores the waiter's continuation, or answers at once if its wait has ended meanwhile.
    private func arrive(_ id: Int) async -> Bool {
        await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
            let ended = state.withLock { s -> Bool? in
                if case .ended(let rung) = s.waiters[id] {
                    s.waiters[id] = nil
                    return rung
                }
                s.waiters[id] = .waiting(c)
                return nil
            }
            if let ended { c.resume(returning: ended) }
        }
    }

    /// Ends one wait (its timeout, or its task's cancellation); a wait already over is left alone.
    private func end(_ id: Int, rung: Bool) {
        let c = state.withLock { s -> CheckedContinuation<Bool, Never>? in
            switch s.waiters[id] {
            case .arriving:
                s.waiters[id] = .ended(rung)
                return nil
            case .waiting(let c):
                s.waiters[id] = nil
                return c
            case .ended, nil:
                return nil
            }
        }
        c?.resume(returning: rung)
    }
}

/// Exponential backoff with time as an input: the pause after the n-th failure in a row is
/// `initial` doubled n − 1 times, at most `max`, spread by `jitter` (0.2: anywhere from 20 % under
/// to 20 % over, never over `max`) with the random number an input. A success starts it over.
public struct Backoff: Sendable, Equatable {
    public var initial: TimeInterval
    public var max: TimeInterval
    public var jitter: Double
    /// Failures in a row so far.
    public private(set) var failures = 0

    public init(initial: TimeInterval, max: TimeInterval, jitter: Double = 0) {
        self.initial = initial
        self.max = max
        self.jitter = jitter
    }

    /// The pause after `failures` failures in a row (counted from 1); `random` in 0..<1.
    public func delay(afterFailures failures: Int, random: Double) -> TimeInterval {
        let grown = Swift.min(max, initial * pow(2, Double(Swift.max(0, failures - 1))))
        guard jitter > 0 else { return grown }
        return Swift.min(grown * ((1 - jitter) + 2 * jitter * random), max)
    }

    /// One more failure: answers the pause before the next attempt.
    public mutating func failed(random: Double) -> TimeInterval {
        failures += 1
        return delay(afterFailures: failures, random: random)
    }

    /// A success: the next failure pauses `initial` again.
    public mutating func succeeded() {
        failures = 0
    }

    /// Runs `attempt` until it succeeds (answering its value) or the task is cancelled (nil),
    /// pausing after each failure; `failed` hears each error with the pause that follows it.
    public func retry<T>(sleep: Background.Sleep = Background.sleep, random: () -> Double = { Double.random(in: 0..<1) },
                         _ attempt: () async throws -> T, failed: (any Error, TimeInterval) -> Void) async -> T? {
        var backoff = self
        while !Task.isCancelled {
            do {
                return try await attempt()
            } catch {
                let pause = backoff.failed(random: random())
                failed(error, pause)
                await sleep(.seconds(pause))
            }
        }
        return nil
    }
}

/// A loop that runs a body until its task is cancelled, pausing `interval` after each run, or
/// less when its doorbell rings. Runs never overlap: a slow run delays the next.
public struct Periodic: Sendable {
    /// What follows a run.
    public enum Next: Sendable, Equatable {
        /// The run found work: the next starts at once.
        case again
        /// The next starts after `interval`, or when the doorbell rings.
        case pause
    }

    public let interval: Duration
    public let doorbell: Doorbell?
    private let sleep: Background.Sleep

    /// With a doorbell, the pause is the doorbell's wait (and its sleep); without, `sleep`.
    public init(every interval: Duration, doorbell: Doorbell? = nil, sleep: @escaping Background.Sleep = Background.sleep) {
        self.interval = interval
        self.doorbell = doorbell
        self.sleep = sleep
    }

    /// Runs `body`, then pauses, until the task is cancelled.
    public func run(_ body: () async -> Void) async {
        await poll { () async -> Next in
            await body()
            return .pause
        }
    }

    /// Runs `body`, which looks for work, until the task is cancelled: again at once after a run
    /// that answers `.again`, after a pause otherwise.
    public func poll(_ body: () async -> Next) async {
        while !Task.isCancelled {
            guard await body() == .pause, !Task.isCancelled else { continue }
            if let doorbell { await doorbell.wait(timeout: interval) } else { await sleep(interval) }
        }
    }
}
