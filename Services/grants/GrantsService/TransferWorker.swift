import Core
import Database
import Foundation
import Runtime
import Telemetry

/// Grants moved periods again under the id their account moved to (`GrantLedger.move`):
/// each transfer calls its provider with the new id and the grant's own `end_time_ms`, once the
/// grant it follows has succeeded (a transfer whose grant failed is cancelled). A repeated call is
/// a duplicate the provider ignores, so a lease that runs out mid-call costs nothing but a call.
final class TransferWorker: Sendable {
    struct Transfer: Sendable, Equatable {
        let redemptionId: UUID
        let appUserId: String
        let entitlementId: String
        let provider: String
        let endTime: Date
        let attempts: Int
    }

    let pool: PGPool
    let logger: Logger
    let providers: ProviderDirectory
    let retry: RetryPolicy
    let lease: TimeInterval
    private let bell = Doorbell()

    init(pool: PGPool, logger: Logger, providers: ProviderDirectory, retry: RetryPolicy, lease: TimeInterval) {
        self.pool = pool
        self.logger = logger
        self.providers = providers
        self.retry = retry
        self.lease = lease
    }

    func nudge() { bell.ring() }

    func run() async {
        await Periodic(every: .seconds(1), doorbell: bell).poll { () async -> Periodic.Next in
            let due: [Transfer]
            do {
                due = try await pool.withConnection { [lease] in try Self.claim($0, limit: 100, lease: lease) }
            } catch {
                logger.warning("claiming transfers failed", ["error": String(describing: error)])
                return .pause
            }
            let outcomes = await withTaskGroup(of: (Transfer, GrantDecision).self) { group in
                for t in due {
                    group.addTask {
                        guard let provider = await self.providers.resolve(t.provider)?.provider else { return (t, .leave) }
                        let answer = await provider.grant(appUserId: t.appUserId, entitlementId: t.entitlementId, endTimeMs: Timestamp.milliseconds(t.endTime))
                        return (t, GrantDecision.decide(answer, attempt: t.attempts, policy: self.retry, random: Double.random(in: 0..<1)))
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            do {
                try await pool.transaction { tx in for (t, d) in outcomes { try Self.record(tx, t, d) } }
            } catch {
                logger.warning("transfer outcomes not recorded; they are called again", ["error": String(describing: error)])
            }
            for (t, d) in outcomes {
                if case .fail(let reason) = d {
                    logger.warning("a moved grant was refused under its new id", ["redemption.id": t.redemptionId.lowercasedString, "reason": reason])
                }
            }
            return due.isEmpty ? .pause : .again
        }
    }

    /// Cancels transfers whose grant failed, then leases those due whose grant succeeded.
    static func claim(_ c: PGConnection, limit: Int, lease: TimeInterval) throws -> [Transfer] {
        try c.query("""
            UPDATE grants.transfers t SET status = 'cancelled', settled_at = now()
            FROM grants.grants g WHERE g.redemption_id = t.redemption_id AND t.status = 'pending' AND g.status = 'failed'
            """)
        return try c.query("""
            UPDATE grants.transfers SET attempts = attempts + 1, next_attempt_at = now() + make_interval(secs => $2)
            WHERE (redemption_id, app_user_id) IN (
                SELECT t.redemption_id, t.app_user_id FROM grants.transfers t JOIN grants.grants g ON g.redemption_id = t.redemption_id
                WHERE t.status = 'pending' AND t.next_attempt_at <= now() AND g.status = 'succeeded'
                ORDER BY t.next_attempt_at LIMIT $1 FOR UPDATE OF t SKIP LOCKED
            )
            RETURNING redemption_id, app_user_id, entitlement_id, provider, end_time, attempts
            """, [limit, lease]).rows.map {
            Transfer(redemptionId: try $0.decode("redemption_id"), appUserId: try $0.decode("app_user_id"), entitlementId: try $0.decode("entitlement_id"),
                     provider: try $0.decode("provider"), endTime: try $0.decode("end_time"), attempts: try $0.decode("attempts"))
        }
    }

    static func record(_ tx: PGConnection, _ t: Transfer, _ decision: GrantDecision) throws {
        let key: [any PGBindable] = [t.redemptionId, t.appUserId]
        switch decision {
        case .succeed:
            try tx.query("UPDATE grants.transfers SET status = 'succeeded', settled_at = now(), last_error = NULL WHERE redemption_id = $1 AND app_user_id = $2", key)
        case .fail(let reason):
            try tx.query("UPDATE grants.transfers SET status = 'failed', settled_at = now(), last_error = $3 WHERE redemption_id = $1 AND app_user_id = $2",
                         key + [reason])
        case .retry(let after, let reason):
            try tx.query("UPDATE grants.transfers SET next_attempt_at = now() + make_interval(secs => $3), last_error = $4 WHERE redemption_id = $1 AND app_user_id = $2",
                         key + [after, reason])
        case .leave:
            break
        }
    }
}
