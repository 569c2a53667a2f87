import Synchronization

/// Tasks that run handlers (an HTTP request's, a bus request's), each kept once its handler has
/// answered, to run the next one: a pool of tasks, as a server keeps a pool of threads.
///
/// A task made per request allocates its stack of async frames afresh, in slabs of 1 to 5 kB (a
/// hot reservation's HTTP handler takes three), and frees them when it ends. Blocks that large
/// bypass glibc's per-thread cache and take malloc's slow path, where a block of 1 kB or more
/// first consolidates the fast bins (docs/performance.md, "Session 41"). A kept task keeps its
/// slabs, and the executor preference it was made with.
public final class HandlerTasks: Sendable {
    public typealias Handling = @Sendable () async -> Void

    /// The most tasks kept waiting; beyond it a task ends when its handler has answered.
    public let limit: Int
    /// Tasks waiting for a handler to run, and whether tasks are still kept.
    private let idle = Mutex<(tasks: [UnsafeContinuation<Handling?, Never>], open: Bool)>(([], true))
    private let startedCount = Atomic<Int>(0)

    /// At most `limit` tasks kept waiting.
    public init(limit: Int) { self.limit = limit }

    /// Runs `handling` in a task kept from an earlier handler when one waits, else in a new one
    /// that prefers `executor` (nil: the global executor). A kept task keeps the preference it
    /// was made with: a pool's callers pass one executor, or none.
    public func run(_ handling: @escaping Handling, preferring executor: (any TaskExecutor)? = nil) {
        if let waiting = idle.withLock({ $0.tasks.popLast() }) {
            waiting.resume(returning: handling)
        } else {
            startedCount.add(1, ordering: .relaxed)
            Task(executorPreference: executor) { await self.serve(first: handling) }
        }
    }

    /// Ends the tasks waiting now, and from now on every task once its handler has answered.
    public func close() {
        let waiting = idle.withLock { s in
            s.open = false
            defer { s.tasks = [] }
            return s.tasks
        }
        for task in waiting { task.resume(returning: nil) }
    }

    /// Tasks started so far, and tasks waiting for a handler now.
    public var started: Int { startedCount.load(ordering: .relaxed) }
    public var waiting: Int { idle.withLock { $0.tasks.count } }

    /// A task's life: each handler it is given, then a wait for the next, until the pool closes
    /// or `limit` others wait already.
    private func serve(first: @escaping Handling) async {
        var next: Handling? = first
        while let handling = next {
            await handling()
            next = await withUnsafeContinuation { task in
                let kept = idle.withLock { s in
                    guard s.open, s.tasks.count < limit else { return false }
                    s.tasks.append(task)
                    return true
                }
                if !kept { task.resume(returning: nil) }
            }
        }
    }
}
