import Core
import Database
import Foundation
import Runtime
import Telemetry

/// Group commit for reservations, and the only way a reservation is made: a single request is a
/// batch of one. Requests for one coupon queue up while a transaction for that coupon is running
/// and go together in the next one, so a flash campaign costs one commit per batch instead of one
/// per request — with every batch durable before any of its requests is answered. Different
/// coupons run in parallel. Two transactions of a coupon may be open at once. For a coupon with a
/// cap or store offers, the second waits for the coupon's row lock, which the first holds to its
/// commit, and starts the moment it is released instead of a round trip later: the lock keeps them
/// in order, and the second reads the count and the redemptions the first committed. For any other
/// coupon, the second reads and plans while the first commits, and waits for the lock only to add
/// to the counter (`RedemptionStore.redeemBatch`); a batch that meets a use the other took for one
/// of its accounts is committed again with the lock first.
final class ReservationBatcher: Sendable {
    private let coalescer: Coalescer<Coupons.Redeem, RedemptionStore.Outcome>

    /// `appleAppIds`, when given, answers another app's batches with the app's own Apple id.
    init(
        pool: PGPool, reservationTTL: TimeInterval, stores: StoreSettings = .none, appleAppIds: AppleAppIds? = nil,
        logger: Logger, metrics: MetricsRegistry? = nil,
        maxBatch: Int = 256, resendAfter: TimeInterval, granted: @escaping @Sendable ([OutboxMessage]) -> Void
    ) {
        coalescer = Coalescer(maxBatch: maxBatch, lanes: 2) { requests in
            metrics?.observe(
                "redeem_reservation_batch_size", help: "Reservations committed together in one transaction.",
                Double(requests.count), buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256])
            return await Self.commit(requests) { batch in
                do {
                    let attempt = { (stores: StoreSettings) in
                        try await Self.reserve(
                            batch, pool: pool, reservationTTL: reservationTTL, resendAfter: resendAfter, stores: stores,
                            metrics: metrics)
                    }
                    let (results, commands) =
                        if let appleAppIds {
                            try await appleAppIds.running(app: batch[0].app, stores, attempt)
                        } else {
                            try await attempt(stores)
                        }
                    if !commands.isEmpty { granted(commands) }
                    return results
                } catch {
                    logger.warning(
                        "reservation batch failed", ["batch.size": batch.count, "error": String(describing: error)])
                    throw error
                }
            }
        }
    }

    /// One transaction for `batch`, planned without the coupon's lock where the coupon allows it
    /// (`RedemptionStore.redeemBatch`). Such a batch meets a use that another batch took for one of
    /// its accounts meanwhile on the one-use index, and rolls back: it is committed once more with
    /// the lock first, which answers that use.
    static func reserve(
        _ batch: [Coupons.Redeem], pool: PGPool, reservationTTL: TimeInterval, resendAfter: TimeInterval,
        stores: StoreSettings, metrics: MetricsRegistry?
    ) async throws -> (results: [Result<RedemptionStore.Outcome, any Error>], commands: [OutboxMessage]) {
        let once = { (lockFirst: Bool) in
            try await pool.transaction { tx in
                try RedemptionStore.redeemBatch(
                    tx, batch, reservationTTL: reservationTTL, resendAfter: resendAfter, stores: stores,
                    lockFirst: lockFirst, now: Date())
            }
        }
        do {
            return try await once(false)
        } catch let e as PGError where e.isUniqueViolation {
            metrics?.increment(
                "redeem_reservation_batches_relocked_total",
                help: "Reservation batches committed again with the coupon's lock first, after another batch took a "
                    + "use for one of their accounts.")
            return try await once(true)
        }
    }

    /// Requests for one coupon (one `Coupons.batchKey`) that arrived together; one alone is a batch of one.
    func redeemAll(_ requests: [Coupons.Redeem], key: String) async -> [Result<RedemptionStore.Outcome, any Error>] {
        await coalescer.submitAll(requests, key: key)
    }

    /// Commits `batch` with `attempt` (one transaction), and when it fails as a whole (it rolled
    /// back, so nothing of it stands) decides what each request is answered:
    /// - a batch of one is answered its error: there is no other request to spare;
    /// - a database that can't be reached (`unavailable`: the connection lost mid-batch, the pool
    ///   closed) is no request's fault, and the pool has already retried a dead connection's first
    ///   statement on a fresh one: every request is answered that error, as committing parts
    ///   apart would only multiply the failing connections;
    /// - any other failure (one request the statement chokes on, say) splits the batch into two
    ///   halves committed on their own, in order, and so on down: the request at fault is answered
    ///   its own error and its neighbours still commit. One bad request in n costs about
    ///   2·log2(n) more transactions, where retrying each request alone cost n, and no request
    ///   needs a code path of its own. A request whose twin (same account and coupon) committed in
    ///   an earlier half is answered that redemption, as within a batch.
    static func commit<Input: Sendable, Output: Sendable>(
        _ batch: [Input], _ attempt: ([Input]) async throws -> [Result<Output, any Error>]
    ) async -> [Result<Output, any Error>] {
        do {
            return try await attempt(batch)
        } catch {
            if batch.count == 1 || ServiceError.carrying(error).code == .unavailable {
                return batch.map { _ in .failure(error) }
            }
            let half = batch.count / 2
            return await commit(Array(batch[..<half]), attempt) + commit(Array(batch[half...]), attempt)
        }
    }
}
