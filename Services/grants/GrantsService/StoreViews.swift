import Core
import Foundation
import Synchronization

/// The store's own view of a holder: RevenueCat's subscriber, read with a bounded
/// wait and kept per holder for `ttl` (forgotten at once when the holder redeems or moves). Under
/// `local` there is no store to ask: no purchase, no URL, no entries.
final class StoreViews: Sendable {
    /// How long a read may take before Redeem answers with its own grants alone.
    static let readTimeout: TimeInterval = 2
    /// How long an answer is kept.
    static let ttl: TimeInterval = 30

    private let revenueCat: RevenueCat?
    private let cache = Mutex<[String: (view: Grants.StoreView.Response, at: Date)]>([:])

    init(revenueCat: RevenueCat?) { self.revenueCat = revenueCat }

    /// The view, or nil when the store could not be read in time. `fresh` skips the cache.
    func view(_ appUserId: String, fresh: Bool, now: Date = Date()) async -> Grants.StoreView.Response? {
        guard let revenueCat else {
            return Grants.StoreView.Response(holdsStorePurchase: false, managementUrl: nil, entitlements: [], playSubscriptions: [])
        }
        if !fresh, let kept = cache.withLock({ $0[appUserId] }), now.timeIntervalSince(kept.at) < Self.ttl { return kept.view }
        let read = await Self.within(Self.readTimeout) { await revenueCat.subscriber(appUserId: appUserId, timeout: Self.readTimeout) }
        switch read ?? .unavailable("no answer within \(Self.readTimeout) s") {
        case .found(let s):
            let view = Grants.StoreView.Response(holdsStorePurchase: s.holdsStorePurchase, managementUrl: s.management_url,
                                                 entitlements: s.activeEntitlements(now: now), playSubscriptions: s.activePlayProducts(now: now))
            cache.withLock {
                if $0.count > 10_000 { $0.removeAll() }  // bounded: a flood of holders costs a re-read, not memory
                $0[appUserId] = (view, now)
            }
            return view
        case .unavailable:
            return nil
        }
    }

    func forget(_ appUserIds: some Sequence<String>) {
        cache.withLock { c in for id in appUserIds { c[id] = nil } }
    }

    /// Redeem's grants with the store's entries: a store entry is left out when it is one of
    /// Redeem's own promotional grants (same entitlement, not sandbox, ending no later than
    /// Redeem's), since the ledger lists that one already.
    static func merge(ledger: [EntitlementView], store: [EntitlementView]) -> [EntitlementView] {
        let own = store.filter { s in
            s.source == "promotional" && ledger.contains { !$0.sandbox && $0.entitlementId == s.entitlementId && s.expiresAt <= $0.expiresAt.addingTimeInterval(1) }
        }
        return (ledger + store.filter { s in !own.contains(s) })
            .sorted { ($0.entitlementId, $0.sandbox ? 1 : 0, $0.source) < ($1.entitlementId, $1.sandbox ? 1 : 0, $1.source) }
    }

    /// The work's answer, or nil when it takes longer than `seconds` (then nobody waits for it):
    /// the request's own timeout is not enforced by every URLSession while a server holds the
    /// connection open without answering. The late work is left to end on its own, never
    /// cancelled: cancelling a task inside FoundationNetworking's `URLSession.data(for:)` while
    /// the request fails deadlocks both (the cancellation handler waits for the session's queue
    /// under the task's status lock, which the queue's completion needs), and it took both of
    /// grants' concurrency threads with it, stalling every worker.
    static func within<T: Sendable>(_ seconds: TimeInterval, _ work: @escaping @Sendable () async -> T) async -> T? {
        let waiting = Mutex<CheckedContinuation<T?, Never>?>(nil)
        let finish = { @Sendable (value: T?) -> Bool in
            waiting.withLock { w in
                guard let c = w else { return false }
                w = nil
                c.resume(returning: value)
                return true
            }
        }
        return await withCheckedContinuation { continuation in
            waiting.withLock { $0 = continuation }
            Task { _ = finish(await work()) }
            Task {
                try? await Task.sleep(for: .seconds(seconds))
                _ = finish(nil)
            }
        }
    }
}
