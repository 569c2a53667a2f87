import Foundation
import Testing
import TestSupport
@testable import CouponsService
@testable import Shared

/// The batch lookups by account must probe an index per account whatever PostgreSQL's statistics
/// say, with the plans each connection keeps: a deployment minutes into a flash sale, whose table
/// was analyzed while it held a handful of rows and has had thousands inserted since, before
/// autovacuum looks again. (Written as `account_id = ANY($1)`, the lookups read the whole table
/// every batch; as plain prepared statements, the plans they kept from the small table did.)
@Suite struct RedemptionPlanTests {
    @Test func batchLookupsNeverReadTheWholeTable() async throws {
        let url = try await TestPostgres.shared().freshDatabase()
        let pool = PGPool(url: url, maxConnections: 1)
        defer { pool.close() }
        _ = try await CouponsService.migrator.apply(on: pool)
        // Measured on the pool's thread, judged here (an expectation off the test's task is not
        // attributed to the test).
        let (tuples, scans, found, reasons) = try await pool.withConnection { c in
            try c.execute("ALTER TABLE coupons.redemptions SET (autovacuum_enabled = false)")
            let coupon = UUID.random()
            try c.query("""
                INSERT INTO coupons.coupons (id, code, kind, duration_unit, duration_count, product_ids, platforms, mode, new_customers_only)
                VALUES ($1, 'PLAN', 'freePeriod', 'month', 1, '{}', '{web}', 'live', true)
                """, [coupon])
            func add(_ n: Int) throws {
                try c.query("""
                    INSERT INTO coupons.redemptions (id, coupon_id, code, account_id, app_user_id, platform, sandbox, status)
                    SELECT gen_random_uuid(), $1, 'PLAN', gen_random_uuid(), 'u' || g, 'web', false, 'completed' FROM generate_series(1, $2::int) g
                    """, [coupon, n])
            }
            /// Every batch lookup, by the names and statements the service uses.
            func lookUp(_ accounts: [UUID]) throws -> [Int] {
                let array = PGArray(accounts.map { $0.lowercasedString })
                let validations = try RedemptionStore.validateBatch(c, accounts.map { Coupons.Validate(accountId: $0, code: "PLAN", platform: "web") }, now: Date())
                return [try c.prepared("held_by_account", RedemptionStore.BatchSQL.heldByAccount, [array]).rows.count,
                        try c.prepared("veterans_by_account", RedemptionStore.BatchSQL.veteransByAccount, [array]).rows.count,
                        validations.count]
            }
            func sequentialScans() throws -> Int {
                try c.query("SELECT pg_stat_force_next_flush()")  // this connection's counts reach the view when the statement ends
                return try c.query("SELECT seq_scan FROM pg_stat_user_tables WHERE relid = 'coupons.redemptions'::regclass").first!.decode("seq_scan")
            }

            try add(5)
            try c.execute("ANALYZE coupons.redemptions")
            for _ in 0..<10 { _ = try lookUp([UUID.random(), UUID.random()]) }  // the connection settles on its plans
            try add(8000)
            let tuples = try c.query("SELECT reltuples::int AS n FROM pg_class WHERE oid = 'coupons.redemptions'::regclass").first!.decode("n", as: Int.self)

            let accounts = try c.query("SELECT account_id FROM coupons.redemptions ORDER BY random() LIMIT 45").rows.map { try $0.decode("account_id", as: UUID.self) }
            let before = try sequentialScans()
            let found = try lookUp(accounts)
            let after = try sequentialScans()
            let answers = try RedemptionStore.validateBatch(c, accounts.map { Coupons.Validate(accountId: $0, code: "PLAN", platform: "web") }, now: Date())
            return (tuples, after - before, found, Set(answers.map { $0.reason }))
        }
        #expect(tuples == 5, "the statistics must still be those of the small table for this test to mean anything")
        #expect(found == [45, 45, 45], "each account's redemption is found, and is no longer a new customer's")
        #expect(scans == 0, "\(scans) lookups read the whole table")
        #expect(reasons == ["alreadyRedeemed"])
    }
}
