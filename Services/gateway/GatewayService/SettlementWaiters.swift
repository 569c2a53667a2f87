import Foundation
import Synchronization

/// Long-poll waiters by redemption id, woken by `redemptions.settled` events (no database polling,
/// no thread per waiter: a waiter is a suspended task).
final class SettlementWaiters: Sendable {
    private struct Waiter {
        let id: Int
        let continuation: CheckedContinuation<Bool, Never>
    }
    private let waiters = Mutex<[UUID: [Waiter]]>([:])
    private let nextId = Atomic<Int>(0)

    /// Suspends until `redemption` settles (true) or `seconds` pass (false).
    /// `stillPending` runs after the waiter is registered, so an event that lands between the
    /// caller's last read and the registration is not missed.
    func wait(for redemption: UUID, seconds: Int, stillPending: @escaping @Sendable () async -> Bool) async -> Bool {
        let id = nextId.wrappingAdd(1, ordering: .relaxed).newValue
        let timeout = Task {
            guard (try? await Task.sleep(for: .seconds(seconds))) != nil else { return }
            self.resume(redemption, waiter: id, settled: false)
        }
        defer { timeout.cancel() }
        return await withCheckedContinuation { cont in
            waiters.withLock { $0[redemption, default: []].append(Waiter(id: id, continuation: cont)) }
            Task {
                if await !stillPending() { self.resume(redemption, waiter: id, settled: true) }
            }
        }
    }

    /// The event: wake everyone waiting for this redemption.
    func settled(_ redemption: UUID) {
        let woken = waiters.withLock { $0.removeValue(forKey: redemption) } ?? []
        for w in woken { w.continuation.resume(returning: true) }
    }

    private func resume(_ redemption: UUID, waiter: Int, settled: Bool) {
        let w = waiters.withLock { all -> Waiter? in
            // In place (a copy taken out and stored back would copy the whole list each time).
            guard let i = all[redemption]?.firstIndex(where: { $0.id == waiter }) else { return nil }
            let w = all[redemption]!.remove(at: i)
            if all[redemption]!.isEmpty { all[redemption] = nil }
            return w
        }
        w?.continuation.resume(returning: settled)
    }

    var count: Int { waiters.withLock { $0.values.reduce(0) { $0 + $1.count } } }

    /// Nobody waits: an event need not even be decoded (a waiter that registers later reads the
    /// redemption's state itself, see `wait`).
    var isEmpty: Bool { waiters.withLock { $0.isEmpty } }
}
