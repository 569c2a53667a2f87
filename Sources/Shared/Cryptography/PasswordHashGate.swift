import Synchronization

/// How many password hashes run at once: at most `concurrency`, with up to `waiting` more queued
/// in arrival order. A caller beyond both is turned away at once (`enter` answers false), so the
/// memory of hashes in progress is bounded whatever the load, and a queued caller costs only
/// its suspended task.
final class PasswordHashGate: Sendable {
    let concurrency: Int
    let waiting: Int
    private let state = Mutex<(running: Int, queue: [CheckedContinuation<Void, Never>])>((0, []))

    init(concurrency: Int, waiting: Int) {
        precondition(concurrency >= 1 && waiting >= 0)
        self.concurrency = concurrency
        self.waiting = waiting
    }

    /// Takes a place, waiting for one if all are taken and the queue has room; false when it has
    /// none. A caller that entered must `leave`.
    func enter() async -> Bool {
        enum Decision { case run, wait, refuse }
        // The decision and the enqueue happen under one lock hold: `leave` can't slip in between.
        var decision = Decision.refuse
        await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
            decision = state.withLock { s in
                if s.running < concurrency {
                    s.running += 1
                    return .run
                }
                guard s.queue.count < waiting else { return .refuse }
                s.queue.append(cont)
                return .wait
            }
            if decision != .wait { cont.resume() }
        }
        return decision != .refuse
    }

    /// Gives the place to the first caller waiting, or frees it.
    func leave() {
        let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if s.queue.isEmpty {
                s.running -= 1
                return nil
            }
            return s.queue.removeFirst()
        }
        next?.resume()
    }

    /// Hashes running and callers waiting (for tests and metrics).
    var load: (running: Int, waiting: Int) { state.withLock { ($0.running, $0.queue.count) } }
}
