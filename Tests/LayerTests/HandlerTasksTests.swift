import Foundation
import Synchronization
import Testing
@testable import Core

/// `HandlerTasks`: a task is kept once its handler has answered and runs the next one; at most
/// `limit` wait; closing ends the waiting ones and every one that answers later.
@Suite struct HandlerTasksTests {
    /// A value the handlers and the test share.
    final class Shared<Value: Sendable>: Sendable {
        let state: Mutex<Value>
        init(_ value: Value) { state = Mutex(value) }
        var value: Value { state.withLock { $0 } }
        func change(_ body: (inout Value) -> Void) { state.withLock { body(&$0) } }
    }

    /// Runs `body` as a handler of `tasks` and waits until it has answered and its task is kept
    /// (or has ended: `kept` is how many should wait after).
    func runOne(_ tasks: HandlerTasks, kept: Int, _ body: @escaping @Sendable () -> Void = {}) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            tasks.run {
                body()
                c.resume()
            }
        }
        _ = await waitUntil(.now + .seconds(5), every: .milliseconds(1)) { tasks.waiting == kept }
    }

    /// With a task per handler, every handler below starts one and this fails.
    @Test func aKeptTaskRunsTheNextHandler() async {
        let tasks = HandlerTasks(limit: 4)
        let ran = Shared(0)
        for _ in 0..<20 {
            await runOne(tasks, kept: 1) { ran.change { $0 += 1 } }
        }
        #expect(ran.value == 20)
        #expect(tasks.started == 1)
        #expect(tasks.waiting == 1)
        tasks.close()
    }

    /// Handlers that run at once each have a task; once they have answered, `limit` tasks wait
    /// and the rest have ended.
    @Test func atMostLimitTasksWait() async {
        let tasks = HandlerTasks(limit: 3)
        let together = 8
        let arrived = Shared(0)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<together {
                group.addTask {
                    await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                        tasks.run {
                            // Each holds its task until all have one.
                            arrived.change { $0 += 1 }
                            _ = await waitUntil(.now + .seconds(5), every: .milliseconds(1)) { arrived.value == together }
                            c.resume()
                        }
                    }
                }
            }
        }
        #expect(tasks.started == together)
        _ = await waitUntil(.now + .seconds(5), every: .milliseconds(1)) { tasks.waiting == 3 }
        #expect(tasks.waiting == 3)
        // Three waiting tasks serve the next three at once: no task is started for them.
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<3 { group.addTask { await withCheckedContinuation { c in tasks.run { c.resume() } } } }
        }
        #expect(tasks.started == together)
        tasks.close()
    }

    /// Closing ends the waiting tasks, and a task whose handler answers after it ends too: none is
    /// kept, and the next handler still runs, in a new task.
    @Test func closingEndsWaitingTasksAndKeepsNoMore() async {
        let tasks = HandlerTasks(limit: 4)
        await runOne(tasks, kept: 1)
        let release = Shared<CheckedContinuation<Void, Never>?>(nil)
        let answered = Shared(false)
        // A handler still running when the pool closes.
        tasks.run {
            await withCheckedContinuation { c in release.change { $0 = c } }
            answered.change { $0 = true }
        }
        _ = await waitUntil(.now + .seconds(5), every: .milliseconds(1)) { release.value != nil }
        tasks.close()
        #expect(tasks.waiting == 0)
        release.value?.resume()
        _ = await waitUntil(.now + .seconds(5), every: .milliseconds(1)) { answered.value }
        try? await Task.sleep(for: .milliseconds(20))
        #expect(tasks.waiting == 0)
        await runOne(tasks, kept: 0)
        #expect(tasks.started == 2)  // the first one, then this one: the closed pool kept none
    }
}
