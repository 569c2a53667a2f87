import Foundation
import Shared
import Synchronization

/// Group commit for reservations (the hot-coupon path). Requests for one coupon queue up while
/// a transaction for that coupon is running and go together in the next one, so a flash
/// campaign costs one commit per batch instead of one per request — with every batch durable
/// before any of its requests is answered. Different coupons run in parallel.
final class ReservationBatcher: Sendable {
    private struct Waiting {
        let request: Coupons.Redeem
        let continuation: CheckedContinuation<Coupons.Redeem.Response, any Error>
    }

    private let queues = Mutex<[String: [Waiting]]>([:])
    private let pool: PGPool
    private let reservationTTL: TimeInterval
    private let logger: Logger
    private let metrics: MetricsRegistry?
    private let granted: @Sendable () -> Void
    private let single: @Sendable (Coupons.Redeem) async throws -> Coupons.Redeem.Response
    let maxBatch: Int

    init(pool: PGPool, reservationTTL: TimeInterval, logger: Logger, metrics: MetricsRegistry? = nil, maxBatch: Int = 256,
         granted: @escaping @Sendable () -> Void,
         single: @escaping @Sendable (Coupons.Redeem) async throws -> Coupons.Redeem.Response) {
        self.pool = pool
        self.reservationTTL = reservationTTL
        self.logger = logger
        self.metrics = metrics
        self.maxBatch = maxBatch
        self.granted = granted
        self.single = single
    }

    func redeem(_ request: Coupons.Redeem) async throws -> Coupons.Redeem.Response {
        let key = CouponRules.normalizeCode(request.code)
        return try await withCheckedThrowingContinuation { cont in
            // The first request of an idle coupon starts its drain; later ones just queue.
            let starts = queues.withLock { q -> Bool in
                if q[key] != nil {
                    q[key]!.append(Waiting(request: request, continuation: cont))
                    return false
                }
                q[key] = [Waiting(request: request, continuation: cont)]
                return true
            }
            if starts { Task { await self.drain(key) } }
        }
    }

    /// Runs batches for one coupon until its queue is empty; the entry is removed in the same
    /// locked step that finds it empty, so a request arriving later starts a new drain.
    private func drain(_ key: String) async {
        while true {
            let batch = queues.withLock { q -> [Waiting] in
                guard let waiting = q[key], !waiting.isEmpty else {
                    q[key] = nil
                    return []
                }
                let take = Array(waiting.prefix(maxBatch))
                q[key] = Array(waiting.dropFirst(take.count))
                return take
            }
            if batch.isEmpty { return }
            await run(batch)
        }
    }

    private func run(_ batch: [Waiting]) async {
        let requests = batch.map(\.request)
        metrics?.observe("redeem_reservation_batch_size", help: "Reservations committed together in one transaction.",
                         Double(batch.count), buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256])
        let ttl = reservationTTL
        do {
            let (results, grants) = try await pool.transaction { tx in
                try RedemptionStore.redeemBatch(tx, requests, reservationTTL: ttl, now: Date())
            }
            if grants > 0 { granted() }
            for (w, r) in zip(batch, results) { w.continuation.resume(with: r) }
        } catch {
            // Something unexpected failed the whole batch (and rolled it back): answer each request
            // on its own, so one bad request or a lost connection can't fail its neighbours.
            logger.warning("reservation batch failed; retrying one by one", ["batch.size": batch.count, "error": String(describing: error)])
            await withTaskGroup(of: Void.self) { group in
                for w in batch {
                    group.addTask {
                        do { w.continuation.resume(returning: try await self.single(w.request)) } catch { w.continuation.resume(throwing: error) }
                    }
                }
            }
        }
    }
}
