import Foundation
import Testing
import TestSupport
@testable import CouponsService
@testable import Shared

/// The batch lookups of redemptions by account must probe an index per account even on a table
/// PostgreSQL has never analyzed: a fresh deployment minutes into a flash sale, before autovacuum
/// has looked at it. (Written as `account_id = ANY($1)`, they read the whole table every batch.)
@Suite struct RedemptionPlanTests {
    @Test func batchLookupsByAccountNeverReadTheWholeTable() async throws {
        let url = try await TestPostgres.shared().freshDatabase()
        let pool = PGPool(url: url, maxConnections: 1)
        defer { pool.close() }
        _ = try await CouponsService.migrator.apply(on: pool)
        let plans = try await pool.withConnection { c -> [(String, String)] in
            let coupon = UUID.random()
            try c.query("""
                INSERT INTO coupons.coupons (id, code, kind, duration_unit, duration_count, product_ids, platforms, mode)
                VALUES ($1, 'PLAN', 'freePeriod', 'month', 1, '{}', '{web}', 'live')
                """, [coupon])
            try c.query("""
                INSERT INTO coupons.redemptions (id, coupon_id, code, account_id, app_user_id, platform, sandbox, status)
                SELECT gen_random_uuid(), $1, 'PLAN', gen_random_uuid(), 'u' || g, 'web', false, 'granting' FROM generate_series(1, 8000) g
                """, [coupon])
            let analyzed = try c.query("SELECT reltuples FROM pg_class WHERE oid = 'coupons.redemptions'::regclass").first!.decode("reltuples", as: Double.self)
            #expect(analyzed < 0, "the table must not have been analyzed for this test to mean anything")
            let accounts = PGArray(try c.query("SELECT account_id::text AS a FROM coupons.redemptions ORDER BY random() LIMIT 45").rows.map { try $0.decode("a") })
            let statements: [(String, String, [any PGBindable])] = [
                ("heldByAccount", RedemptionStore.BatchSQL.heldByAccount, [accounts]),
                ("veteransByAccount", RedemptionStore.BatchSQL.veteransByAccount, [accounts]),
                ("validate", RedemptionStore.BatchSQL.validate, ["PLAN", accounts]),
            ]
            return try statements.map { name, sql, params in
                (name, try c.query("EXPLAIN " + sql, params).rows.map { $0["QUERY PLAN"] ?? "" }.joined(separator: "\n"))
            }
        }
        #expect(plans.count == 3)
        for (name, plan) in plans {
            #expect(plan.contains("redemptions_one_active"), "\(name) probes the one-use index:\n\(plan)")
            #expect(!plan.contains("Seq Scan on redemptions"), "\(name) reads the whole table:\n\(plan)")
        }
    }
}
