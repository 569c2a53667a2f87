import Foundation
import TestSupport
import Testing

@testable import Core
@testable import CouponsService
@testable import Database
@testable import Runtime
@testable import Telemetry

/// A batch of an uncapped coupon is planned without the coupon's row lock and takes it only to add
/// to the counter (`RedemptionStore.redeemBatch`); a coupon with a cap is decided under it. Each
/// test holds a row in another transaction, waits until the batch is blocked behind it, then
/// commits, so the batch meets exactly the interleaving it is built for.
@Suite struct ReservationLockTests {
    struct World {
        let url: String
        let pool: PGPool
        let metrics = MetricsRegistry()
        let batcher: ReservationBatcher

        init() async throws {
            url = try await TestPostgres.shared().freshDatabase()
            pool = PGPool(url: url, maxConnections: 4)
            _ = try await CouponsService.migrator.apply(on: pool)
            batcher = ReservationBatcher(
                pool: pool, reservationTTL: 3600, logger: Logger(service: "coupons-test", minimum: .error),
                metrics: metrics, resendAfter: 3, granted: { _ in })
        }

        func coupon(_ code: String, cap: Int? = nil) async throws -> UUID {
            let id = UUID.random()
            try await pool.withConnection { c in
                _ = try c.query(
                    """
                    INSERT INTO coupons.coupons (id, code, kind, duration_unit, duration_count, product_ids, platforms, mode,
                        new_customers_only, max_redemptions)
                    VALUES ($1, $2, 'freePeriod', 'month', 1, '{}', '{web}', 'live', false, $3)
                    """, [id, code, cap])
            }
            return id
        }

        func redeem(_ code: String, account: UUID) async -> Result<RedemptionStore.Outcome, any Error> {
            let request = Coupons.Redeem(
                accountId: account, appUserId: "app-\(account.lowercasedString.prefix(8))", code: code, productId: nil,
                platform: .web, sandbox: false, playOwned: [])
            return await batcher.redeemAll([request], key: code)[0]
        }

        /// Waits until a backend of the database waits for a lock (the batch, behind `holder`).
        func blockedBehind(_ holder: PGConnection) async throws -> Bool {
            for _ in 0..<500 {
                let waiting = try holder.query(
                    """
                    SELECT count(*) AS n FROM pg_stat_activity
                    WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()
                    """
                ).first!.decode("n", as: Int.self)
                if waiting > 0 { return true }
                try await Task.sleep(for: .milliseconds(10))
            }
            return false
        }
    }

    @Test func aUseAnotherBatchTookMeanwhileIsAnsweredUnderTheLock() async throws {
        let world = try await World()
        defer { world.pool.close() }
        let coupon = try await world.coupon("FLASH")
        let account = UUID.random(), theirs = UUID.random()
        // Another batch's use of the same account, not committed yet: the batch reads no use for it.
        let holder = try PGConnection(url: world.url)
        _ = try holder.query("BEGIN")
        _ = try holder.query(
            """
            INSERT INTO coupons.redemptions (id, coupon_id, code, account_id, app_user_id, platform, sandbox, status)
            VALUES ($1, $2, 'FLASH', $3, 'app', 'web', false, 'completed')
            """, [theirs, coupon, account])
        let answer = Task { await world.redeem("FLASH", account: account) }
        #expect(try await world.blockedBehind(holder), "the batch waits on the one-use index")
        _ = try holder.query("COMMIT")

        let outcome = try await answer.value.get()
        #expect(outcome.created == false)
        #expect(outcome.redemption?.redemptionId == theirs, "the use the other batch took")
        #expect(world.metrics.value("redeem_reservation_batches_relocked_total") == 1)
        let rows = try holder.query(
            "SELECT count(*) AS n FROM coupons.redemptions WHERE account_id = $1", [account]
        ).first!.decode("n", as: Int.self)
        #expect(rows == 1)
    }

    @Test func anUncappedCouponsBatchDoesNotWaitForTheCouponsLockToPlan() async throws {
        let world = try await World()
        defer { world.pool.close() }
        let coupon = try await world.coupon("OPEN")
        // The coupon's row, locked as a batch adding to its counter locks it.
        let holder = try PGConnection(url: world.url)
        _ = try holder.query("BEGIN")
        _ = try holder.query("UPDATE coupons.coupons SET used_count = used_count + 1 WHERE id = $1", [coupon])
        let answer = Task { await world.redeem("OPEN", account: UUID.random()) }
        #expect(try await world.blockedBehind(holder))
        // Blocked only where it adds to the counter, in the statement that writes its rows (it holds
        // that statement's lock on the redemptions), not where it reads the coupon.
        let writing = try holder.query(
            """
            SELECT count(*) AS n FROM pg_locks l JOIN pg_stat_activity a USING (pid)
            WHERE a.wait_event_type = 'Lock' AND a.datname = current_database()
              AND l.relation = 'coupons.redemptions'::regclass AND l.mode = 'RowExclusiveLock' AND l.granted
            """
        ).first!.decode("n", as: Int.self)
        #expect(writing == 1)
        _ = try holder.query("COMMIT")
        let outcome = try await answer.value.get()
        #expect(outcome.created)
        let used = try holder.query("SELECT used_count FROM coupons.coupons WHERE id = $1", [coupon]).first!.decode(
            "used_count", as: Int.self)
        #expect(used == 2)
    }

    @Test func aCappedCouponIsDecidedUnderItsLock() async throws {
        let world = try await World()
        defer { world.pool.close() }
        let coupon = try await world.coupon("CAPPED", cap: 1)
        // Another batch takes the cap's one use and has not committed: read without the lock, the
        // counter would still say one is left.
        let holder = try PGConnection(url: world.url)
        _ = try holder.query("BEGIN")
        _ = try holder.query("UPDATE coupons.coupons SET used_count = 1 WHERE id = $1", [coupon])
        let answer = Task { await world.redeem("CAPPED", account: UUID.random()) }
        #expect(try await world.blockedBehind(holder))
        _ = try holder.query("COMMIT")
        let outcome = try await answer.value.get()
        #expect(outcome.refusal == .exhausted, "\(outcome)")
        #expect(world.metrics.value("redeem_reservation_batches_relocked_total") == nil)
    }
}
