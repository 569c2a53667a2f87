import Foundation
import Synchronization
import Testing
@testable import Runtime

/// Time the test decides: each sleep is announced on `begun` (its duration), and lasts until the
/// test calls `pass()` or the sleeping task is cancelled. Nothing here waits for a real clock.
final class ManualTime: Sendable {
    private struct State {
        var next = 0
        var sleepers: [Int: CheckedContinuation<Void, Never>] = [:]
        /// Ended (by `pass` or cancellation) before the sleeper's continuation was stored.
        var over: Set<Int> = []
    }
    private let state = Mutex(State())
    let begun: AsyncStream<Duration>
    private let announce: AsyncStream<Duration>.Continuation
    /// Sleeps cut short by their task's cancellation.
    let cancelled = Atomic<Int>(0)

    init() {
        (begun, announce) = AsyncStream.makeStream(of: Duration.self)
    }

    /// Ends every sleep under way: their time is up.
    func pass() {
        let woken = state.withLock { s in
            defer { s.sleepers.removeAll() }
            return Array(s.sleepers.values)
        }
        for c in woken { c.resume() }
    }

    @Sendable func sleep(_ d: Duration) async {
        let id = state.withLock { s in
            s.next += 1
            return s.next
        }
        announce.yield(d)
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let over = state.withLock { s in
                    if s.over.remove(id) != nil { return true }
                    s.sleepers[id] = c
                    return false
                }
                if over { c.resume() }
            }
        } onCancel: {
            cancelled.wrappingAdd(1, ordering: .relaxed)
            let c = state.withLock { s -> CheckedContinuation<Void, Never>? in
                if let c = s.sleepers.removeValue(forKey: id) { return c }
                s.over.insert(id)
                return nil
            }
            c?.resume()
        }
    }
}

/// A broken part would leave a test waiting for a ring or a sleep: it fails after a minute.
@Suite(.timeLimit(.minutes(1))) struct DoorbellTests {
    /// A wait whose timeout never comes unless the test says so.
    static let forever = Duration.seconds(3600)

    @Test func aRingBeforeTheWaitAnswersItAtOnceAndRingsCoalesce() async {
        let time = ManualTime()
        let bell = Doorbell(sleep: time.sleep)
        bell.ring()
        bell.ring()
        bell.ring()
        #expect(await bell.wait(timeout: Self.forever), "rung: no time needs to pass")
        // The three rings were one: the next wait sleeps until its timeout.
        async let second = bell.wait(timeout: .seconds(5))
        var begun = time.begun.makeAsyncIterator()
        #expect(await begun.next() == .seconds(5))
        time.pass()
        #expect(await second == false)
    }

    @Test func aRingWakesATaskThatIsWaiting() async {
        let time = ManualTime()
        let bell = Doorbell(sleep: time.sleep)
        async let woken = bell.wait(timeout: Self.forever)
        var begun = time.begun.makeAsyncIterator()
        _ = await begun.next()  // the waiter's timer is running: it is waiting
        bell.ring()
        #expect(await woken)
        #expect(!(await bell.wait(timeout: .zero)), "the ring was used up by the wait it woke")
    }

    @Test func oneRingWakesEveryWaiter() async {
        let time = ManualTime()
        let bell = Doorbell(sleep: time.sleep)
        async let a = bell.wait(timeout: Self.forever)
        async let b = bell.wait(timeout: Self.forever)
        var begun = time.begun.makeAsyncIterator()
        _ = await begun.next()
        _ = await begun.next()
        bell.ring()
        let both = await (a, b)
        #expect(both == (true, true))
    }

    /// A ring that comes after a wait timed out is not lost: the next wait answers it.
    @Test func aTimeoutAnswersFalseAndALaterRingIsKept() async {
        let time = ManualTime()
        let bell = Doorbell(sleep: time.sleep)
        async let first = bell.wait(timeout: .milliseconds(500))
        var begun = time.begun.makeAsyncIterator()
        #expect(await begun.next() == .milliseconds(500))
        time.pass()
        #expect(await first == false)
        bell.ring()
        #expect(await bell.wait(timeout: Self.forever))
        #expect(await bell.wait(timeout: .zero) == false, "a timeout of zero does not wait")
    }

    @Test func aCancelledWaitEndsWithoutARing() async {
        let time = ManualTime()
        let bell = Doorbell(sleep: time.sleep)
        let waiter = Task { await bell.wait(timeout: Self.forever) }
        var begun = time.begun.makeAsyncIterator()
        _ = await begun.next()
        waiter.cancel()
        #expect(await waiter.value == false)
        let already = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await bell.wait(timeout: Self.forever)
        }
        #expect(await already.value == false, "a task cancelled before it waits does not wait")
    }

    /// `Lifecycle.withDeadline` is a doorbell the work rings when it ends (one short real wait).
    @Test func aDeadlineAnswersWhetherTheWorkEndedInTime() async {
        #expect(await Lifecycle.withDeadline(seconds: 3600) {})
        let release = Doorbell()
        #expect(await Lifecycle.withDeadline(seconds: 0.02) { await release.wait(timeout: .seconds(3600)) } == false)
        release.ring()
    }

    /// The production clock, with one short real wait: the timeout ends the wait, nothing else.
    @Test func withTheRealClockATimeoutEndsTheWait() async {
        let bell = Doorbell()
        #expect(await bell.wait(timeout: .milliseconds(20)) == false)
        bell.ring()
        #expect(await bell.wait(timeout: .seconds(3600)))
    }
}

/// A broken part would leave a test waiting for a ring or a sleep: it fails after a minute.
@Suite(.timeLimit(.minutes(1))) struct BackoffTests {
    @Test func pausesDoubleFromTheFirstUpToTheCapAndStartOverOnSuccess() {
        var b = Backoff(initial: 0.2, max: 5)
        let pauses = (0..<7).map { _ in b.failed(random: 0.9) }
        #expect(pauses == [0.2, 0.4, 0.8, 1.6, 3.2, 5, 5], "no jitter: the random number is not used")
        #expect(b.failures == 7)
        b.succeeded()
        #expect(b.failures == 0)
        #expect(b.failed(random: 0.9) == 0.2)
    }

    @Test func jitterSpreadsEachPauseEitherSideButNeverPastTheCap() {
        let b = Backoff(initial: 1, max: 300, jitter: 0.2)
        #expect(b.delay(afterFailures: 3, random: 0) == 3.2)
        #expect(b.delay(afterFailures: 3, random: 0.5) == 4)
        let high = b.delay(afterFailures: 3, random: 0.999)
        #expect(high > 4.79 && high < 4.8)
        #expect(b.delay(afterFailures: 9, random: 0.999) == 300, "256 s plus 20 % is over the cap")
        #expect(b.delay(afterFailures: 60, random: 0) == 240, "the spread applies below the cap too")
    }

    @Test func retryPausesAfterEachFailureUntilASuccess() async {
        struct Refused: Error {}
        let slept = Mutex<[Duration]>([])
        let heard = Mutex<[TimeInterval]>([])
        let tries = Atomic<Int>(0)
        let answer = await Backoff(initial: 0.2, max: 5).retry(sleep: { d in slept.withLock { $0.append(d) } }, {
            if tries.wrappingAdd(1, ordering: .relaxed).newValue < 4 { throw Refused() }
            return "done"
        }, failed: { error, pause in
            #expect(error is Refused)
            heard.withLock { $0.append(pause) }
        })
        #expect(answer == "done")
        #expect(heard.withLock { $0 } == [0.2, 0.4, 0.8])
        #expect(slept.withLock { $0 } == [.seconds(0.2), .seconds(0.4), .seconds(0.8)], "each failure's pause, slept after it")
    }

    @Test func retryGivesUpWhenItsTaskIsCancelled() async {
        struct Refused: Error {}
        let tries = Atomic<Int>(0)
        let task = Task {
            await Backoff(initial: 1, max: 1).retry(sleep: { _ in }, {
                if tries.wrappingAdd(1, ordering: .relaxed).newValue == 3 { withUnsafeCurrentTask { $0?.cancel() } }
                throw Refused()
            }, failed: { _, _ in }) as Int?
        }
        #expect(await task.value == nil)
        #expect(tries.load(ordering: .relaxed) == 3)
    }
}

/// A broken part would leave a test waiting for a ring or a sleep: it fails after a minute.
@Suite(.timeLimit(.minutes(1))) struct PeriodicTests {
    @Test func runsTheBodyThenPausesTheIntervalUntilCancelled() async {
        let time = ManualTime()
        let runs = Atomic<Int>(0)
        let loop = Task { await Periodic(every: .seconds(2), sleep: time.sleep).run { _ = runs.wrappingAdd(1, ordering: .relaxed) } }
        var begun = time.begun.makeAsyncIterator()
        #expect(await begun.next() == .seconds(2))
        #expect(runs.load(ordering: .relaxed) == 1, "one run, then the pause")
        time.pass()
        #expect(await begun.next() == .seconds(2))
        #expect(runs.load(ordering: .relaxed) == 2)
        loop.cancel()
        await loop.value
        #expect(runs.load(ordering: .relaxed) == 2, "no run after the cancellation")
        #expect(time.cancelled.load(ordering: .relaxed) == 1, "the pause under way ended with it")
    }

    @Test func pollRunsAgainAtOnceWhileTheBodyFindsWork() async {
        let time = ManualTime()
        let runs = Atomic<Int>(0)
        let loop = Task {
            await Periodic(every: .seconds(1), sleep: time.sleep).poll {
                runs.wrappingAdd(1, ordering: .relaxed).newValue % 3 == 0 ? .pause : .again
            }
        }
        var begun = time.begun.makeAsyncIterator()
        _ = await begun.next()
        #expect(runs.load(ordering: .relaxed) == 3, "two runs that found work, one that did not, then the pause")
        time.pass()
        _ = await begun.next()
        #expect(runs.load(ordering: .relaxed) == 6)
        loop.cancel()
        await loop.value
    }

    /// With a doorbell, a ring ends the pause: the next run needs no time to pass.
    @Test func aRingDuringARunStartsTheNextWithoutAPause() async {
        let time = ManualTime()
        let bell = Doorbell(sleep: time.sleep)
        let runs = Atomic<Int>(0)
        let loop = Task {
            await Periodic(every: .seconds(3600), doorbell: bell).run {
                if runs.wrappingAdd(1, ordering: .relaxed).newValue == 1 { bell.ring() }
            }
        }
        var begun = time.begun.makeAsyncIterator()
        #expect(await begun.next() == .seconds(3600))
        #expect(runs.load(ordering: .relaxed) == 2, "the first run rang: the second came at once")
        bell.ring()
        #expect(await begun.next() == .seconds(3600))
        #expect(runs.load(ordering: .relaxed) == 3, "a ring during the pause ends it")
        loop.cancel()
        await loop.value
    }
}
