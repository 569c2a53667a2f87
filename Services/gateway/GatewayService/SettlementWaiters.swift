import Foundation
import Runtime
import Synchronization

/// Long-poll waiters by redemption id, woken by `redemptions.settled` events (no database polling,
/// no thread per waiter: a waiter is a suspended task).
final class SettlementWaiters: Sendable {
    private struct Waiter {
        let id: Int
        let bell: Doorbell
    }
    private let waiters = Mutex<[UUID: [Waiter]]>([:])
    private let nextId = Atomic<Int>(0)

    /// Suspends until `redemption` settles (true) or `seconds` pass (false).
    /// `stillPending` runs after the waiter is registered, so an event that lands between the
    /// caller's last read and the registration is not missed.
    func wait(for redemption: UUID, seconds: Int, stillPending: @escaping @Sendable () async -> Bool) async -> Bool {
        let waiter = Waiter(id: nextId.wrappingAdd(1, ordering: .relaxed).newValue, bell: Doorbell())
        waiters.withLock { $0[redemption, default: []].append(waiter) }
        defer { remove(redemption, waiter: waiter.id) }
        Task {
            if await !stillPending() { waiter.bell.ring() }
        }
        return await waiter.bell.wait(timeout: .seconds(seconds))
    }

    /// The event: wake everyone waiting for this redemption.
    func settled(_ redemption: UUID) {
        let woken = waiters.withLock { $0.removeValue(forKey: redemption) } ?? []
        for w in woken { w.bell.ring() }
    }

    private func remove(_ redemption: UUID, waiter: Int) {
        waiters.withLock { all in
            // In place (a copy taken out and stored back would copy the whole list each time).
            guard let i = all[redemption]?.firstIndex(where: { $0.id == waiter }) else { return }
            all[redemption]!.remove(at: i)
            if all[redemption]!.isEmpty { all[redemption] = nil }
        }
    }

    var count: Int { waiters.withLock { $0.values.reduce(0) { $0 + $1.count } } }

    /// Nobody waits: an event need not even be decoded (a waiter that registers later reads the
    /// redemption's state itself, see `wait`).
    var isEmpty: Bool { waiters.withLock { $0.isEmpty } }
}
