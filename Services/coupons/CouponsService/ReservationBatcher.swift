import Core
import Database
import Foundation
import Runtime
import Telemetry

/// Group commit for reservations (the hot-coupon path). Requests for one coupon queue up while a
/// transaction for that coupon is running and go together in the next one, so a flash campaign
/// costs one commit per batch instead of one per request — with every batch durable before any
/// of its requests is answered. Different coupons run in parallel. Two transactions of a coupon
/// may be open at once: the second waits for the coupon's row lock, which the first holds to its
/// commit, and starts the moment it is released instead of a round trip later. The lock keeps
/// them in order: the second reads the count and the redemptions the first committed.
final class ReservationBatcher: Sendable {
    private let coalescer: Coalescer<Coupons.Redeem, RedemptionStore.Outcome>

    init(pool: PGPool, reservationTTL: TimeInterval, logger: Logger, metrics: MetricsRegistry? = nil, maxBatch: Int = 256,
         resendAfter: TimeInterval, granted: @escaping @Sendable ([String]) -> Void,
         single: @escaping @Sendable (Coupons.Redeem) async throws -> RedemptionStore.Outcome) {
        coalescer = Coalescer(maxBatch: maxBatch, lanes: 2) { requests in
            metrics?.observe("redeem_reservation_batch_size", help: "Reservations committed together in one transaction.",
                             Double(requests.count), buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256])
            do {
                let (results, commands) = try await pool.transaction { tx in
                    try RedemptionStore.redeemBatch(tx, requests, reservationTTL: reservationTTL, resendAfter: resendAfter, now: Date())
                }
                if !commands.isEmpty { granted(commands) }
                return results
            } catch {
                // Something unexpected failed the whole batch (and rolled it back): answer each request
                // on its own, so one bad request or a lost connection can't fail its neighbours.
                logger.warning("reservation batch failed; retrying one by one", ["batch.size": requests.count, "error": String(describing: error)])
                var results: [Result<RedemptionStore.Outcome, any Error>] = []
                for r in requests {
                    do { results.append(.success(try await single(r))) } catch { results.append(.failure(error)) }
                }
                return results
            }
        }
    }

    func redeem(_ request: Coupons.Redeem) async throws -> RedemptionStore.Outcome {
        try await coalescer.submit(request, key: CouponsService.batchKey(request))
    }

    /// Requests for one coupon (one `Coupons.batchKey`) that arrived together.
    func redeemAll(_ requests: [Coupons.Redeem], key: String) async -> [Result<RedemptionStore.Outcome, any Error>] {
        await coalescer.submitAll(requests, key: key)
    }
}
