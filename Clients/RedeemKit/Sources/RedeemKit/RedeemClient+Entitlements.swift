import Foundation

extension RedeemClient {
    /// The signed-in user's active entitlements (`GET /v1/me/entitlements`), read now. Each read
    /// is yielded to `entitlementUpdates` and kept for `isEntitled(to:)`.
    public func entitlements() async throws -> [Entitlement] {
        let list = try await authorized(APIRequest("GET", "/v1/me/entitlements")).decode(DataList<Entitlement>.self).data
        cachedEntitlements = list
        broadcaster.yield(list)
        return list
    }

    /// Whether the user holds `entitlementId` now, so the app can keep the paywall away. Uses the
    /// last entitlements read (reads them when there are none yet). In production, sandbox grants
    /// don't count; in sandbox, both do. A guest is entitled to nothing.
    public func isEntitled(to entitlementId: String) async throws -> Bool {
        guard try currentSession() != nil else { return false }
        let list: [Entitlement]
        if let cachedEntitlements { list = cachedEntitlements } else { list = try await entitlements() }
        let now = Date()
        return list.contains {
            $0.entitlementId == entitlementId && $0.isActive(at: now) && (!$0.sandbox || configuration.environment == .sandbox)
        }
    }

    /// The entitlements each time they are read: after a completion, a CloudKit link, a call to
    /// `entitlements()`, and an empty list at sign-out. Each access makes a new stream; it ends
    /// when its consumer stops iterating.
    public nonisolated var entitlementUpdates: AsyncStream<[Entitlement]> {
        broadcaster.stream()
    }
}

/// Hands each value to every open stream of it (`entitlementUpdates`, `purchaseUpdates`). Its
/// continuations are only touched under `lock`.
final class Broadcaster<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var continuations: [UUID: AsyncStream<Value>.Continuation] = [:]
    /// How many values a slow consumer is kept, the newest.
    private let buffer: Int

    init(buffer: Int) { self.buffer = buffer }

    func stream() -> AsyncStream<Value> {
        let id = UUID()
        return AsyncStream(bufferingPolicy: .bufferingNewest(buffer)) { continuation in
            lock.lock()
            continuations[id] = continuation
            lock.unlock()
            continuation.onTermination = { [weak self] _ in
                guard let self else { return }
                self.lock.lock()
                self.continuations[id] = nil
                self.lock.unlock()
            }
        }
    }

    func yield(_ value: Value) {
        lock.lock()
        let all = Array(continuations.values)
        lock.unlock()
        for c in all { c.yield(value) }
    }
}
