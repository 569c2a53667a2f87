import Foundation
import Synchronization

/// A pool of PostgreSQL connections.
///
/// libpq calls block, so they never run on Swift's cooperative threads (there are only as many as
/// cores): each connection has its own serial dispatch queue, and async callers suspend until the
/// blocking work on that queue is done. A connection is handed to one caller at a time.
/// Connections that lost the server are dropped and replaced on demand, so the pool recovers by
/// itself after a database restart.
public final class PGPool: Sendable {
    /// A connection and the queue its blocking calls run on. Safe to send because the pool hands a
    /// slot to exactly one holder at a time and all use of `conn` happens on `queue`.
    struct Slot: @unchecked Sendable {
        let conn: PGConnection
        let queue: DispatchQueue
    }

    private struct State {
        var idle: [Slot] = []
        var open = 0
        var waiters: [CheckedContinuation<Slot?, any Error>] = []
        var closed = false
    }

    private let url: String
    public let maxConnections: Int
    private let state = Mutex(State())

    public init(url: String, maxConnections: Int = 8) {
        self.url = url
        self.maxConnections = max(1, maxConnections)
    }

    /// Runs blocking work with exclusive use of one connection. If the connection turns out to be
    /// dead on its first statement (the server restarted while it sat idle), the work is retried
    /// once on a fresh connection: nothing can have been executed on the dead one.
    public func withConnection<T: Sendable>(_ body: @escaping @Sendable (PGConnection) throws -> T) async throws -> T {
        for attempt in 0..<2 {
            let slot = try await acquire()
            let outcome: Result<T, any Error> = await withCheckedContinuation { cont in
                slot.queue.async {
                    slot.conn.statementCount = 0
                    cont.resume(returning: Result { try body(slot.conn) })
                }
            }
            switch outcome {
            case .success(let v):
                release(slot)
                return v
            case .failure(let error):
                let lost = (error as? PGError)?.isConnectionLoss == true || !slot.conn.isHealthy
                let firstStatement = slot.conn.statementCount <= 1
                if lost { discard(); dropIdle() } else { release(slot) }
                if lost && firstStatement && attempt == 0 { continue }
                throw error
            }
        }
        preconditionFailure("unreachable")
    }

    /// Runs `body` in a transaction on one connection.
    public func transaction<T: Sendable>(_ body: @escaping @Sendable (PGConnection) throws -> T) async throws -> T {
        try await withConnection { try $0.transaction(body) }
    }

    /// A one-statement query.
    @discardableResult
    public func query(_ sql: String, _ params: [any PGBindable] = []) async throws -> PGResult {
        try await withConnection { try $0.query(sql, params) }
    }

    /// Closes idle connections and refuses new work; connections in use close when returned.
    public func close() {
        let waiters = state.withLock { s -> [CheckedContinuation<Slot?, any Error>] in
            s.closed = true
            s.open -= s.idle.count
            s.idle.removeAll()
            defer { s.waiters.removeAll() }
            return s.waiters
        }
        for w in waiters { w.resume(throwing: PGError(kind: .poolClosed, message: "database pool closed")) }
    }

    // MARK: - Slots

    private enum Acquired { case slot(Slot), create, wait }

    private func acquire() async throws -> Slot {
        let decision: Acquired = try state.withLock { s in
            if s.closed { throw PGError(kind: .poolClosed, message: "database pool closed") }
            if let slot = s.idle.popLast() { return .slot(slot) }
            if s.open < maxConnections { s.open += 1; return .create }
            return .wait
        }
        switch decision {
        case .slot(let slot): return slot
        case .create: return try await create()
        case .wait:
            let handed: Slot? = try await withCheckedThrowingContinuation { cont in
                let immediate: Acquired? = state.withLock { s in
                    if let slot = s.idle.popLast() { return .slot(slot) }
                    if s.open < maxConnections { s.open += 1; return .create }
                    s.waiters.append(cont)
                    return nil
                }
                switch immediate {
                case .slot(let slot): cont.resume(returning: slot)
                case .create: cont.resume(returning: nil)
                default: break
                }
            }
            // nil: a place was freed and this caller may open a new connection.
            if let handed { return handed }
            return try await create()
        }
    }

    private func create() async throws -> Slot {
        let queue = DispatchQueue(label: "redeem.pg")
        let url = self.url
        let result: Result<Slot, any Error> = await withCheckedContinuation { cont in
            queue.async { cont.resume(returning: Result { Slot(conn: try PGConnection(url: url), queue: queue) }) }
        }
        switch result {
        case .success(let slot): return slot
        case .failure(let error):
            discard()
            throw error
        }
    }

    private func release(_ slot: Slot) {
        let waiter: CheckedContinuation<Slot?, any Error>? = state.withLock { s in
            if s.closed { s.open -= 1; return nil }
            if !s.waiters.isEmpty { return s.waiters.removeFirst() }
            s.idle.append(slot)
            return nil
        }
        waiter?.resume(returning: slot)
    }

    /// After one connection found the server gone, the idle ones are most likely dead too.
    private func dropIdle() {
        let dropped = state.withLock { s -> [Slot] in
            defer { s.open -= s.idle.count; s.idle.removeAll() }
            return s.idle
        }
        _ = dropped  // freed here, outside the lock
    }

    /// Forgets one open connection (dead or never opened) and lets a waiter open a new one.
    private func discard() {
        let waiter: CheckedContinuation<Slot?, any Error>? = state.withLock { s in
            if !s.waiters.isEmpty && !s.closed { return s.waiters.removeFirst() }  // its place passes on
            s.open -= 1
            return nil
        }
        waiter?.resume(returning: nil)
    }
}
