import Foundation
import TestSupport
import Testing

@testable import Core
@testable import CouponsService
@testable import Database

/// Coupons' batch statements must find rows by index whatever PostgreSQL's statistics say, with
/// the plans each connection keeps: a deployment minutes into a flash sale, whose tables were
/// analyzed while they held a handful of rows and have had thousands inserted since, before
/// autovacuum looks again. (Written as `account_id = ANY($1)`, the lookups read the whole table
/// every batch; as plain prepared statements, the plans they kept from the small table did.)
@Suite struct RedemptionPlanTests {
    /// A fresh database with coupons' schema, on one connection, where autovacuum never analyzes
    /// `tables`: their statistics stay those of the moment they were last analyzed.
    static func couponsDatabase(autovacuumOff tables: [String]) async throws -> PGPool {
        let pool = PGPool(url: try await TestPostgres.shared().freshDatabase(), maxConnections: 1)
        do {
            _ = try await CouponsService.migrator.apply(on: pool)
            try await pool.withConnection { c in
                for table in tables { try c.execute("ALTER TABLE coupons.\(table) SET (autovacuum_enabled = false)") }
            }
        } catch {
            pool.close()
            throw error
        }
        return pool
    }

    @Test func batchStatementsNeverReadTheWholeTable() async throws {
        let pool = try await Self.couponsDatabase(autovacuumOff: ["redemptions", "outbox"])
        defer { pool.close() }
        // Measured on the pool's thread, judged here (an expectation off the test's task is not
        // attributed to the test).
        let r = try await pool.withConnection { c in
            let coupon = UUID.random()
            try c.query(
                """
                INSERT INTO coupons.coupons (id, code, kind, duration_unit, duration_count, product_ids, platforms, mode, new_customers_only)
                VALUES ($1, 'PLAN', 'freePeriod', 'month', 1, '{}', '{web}', 'live', true)
                """, [coupon])
            func add(_ n: Int, status: RedemptionStatus) throws {
                try c.query(
                    """
                    WITH r AS (
                        INSERT INTO coupons.redemptions (id, coupon_id, code, account_id, app_user_id, platform, sandbox, status)
                        SELECT gen_random_uuid(), $1, 'PLAN', gen_random_uuid(), 'u' || g, 'web', false, $3 FROM generate_series(1, $2::int) g
                        RETURNING id
                    )
                    INSERT INTO coupons.outbox (redemption_id, type, payload) SELECT id, 'grant.command', '{}' FROM r
                    """, [coupon, n, status])
            }
            /// The lookups of a batch, by the names and statements the service uses: how many
            /// accounts hold a use, how many are no longer new customers, how many answers.
            func lookUp(_ accounts: [UUID]) throws -> [Int] {
                let array = PGArray(accounts.map { $0.lowercasedString })
                let validations = try RedemptionStore.validateBatch(
                    c, accounts.map { Coupons.Validate(accountId: $0, code: "PLAN", platform: .web) }, now: Date())
                let held = try c.prepared(
                    "held_by_account", RedemptionStore.BatchSQL.heldByAccount, [array, "PLAN", DefaultApp.id])
                return [
                    held.rows.count,
                    try c.prepared(
                        "veterans_by_account_in_app", RedemptionStore.BatchSQL.veteransByAccount, [array, DefaultApp.id]
                    ).rows.count,
                    validations.filter { $0.reason == .alreadyRedeemed }.count
                ]
            }
            func complete(_ ids: [UUID]) throws {
                try RedemptionStore.completeMany(
                    c, ids.map { .init(redemptionId: $0, entitlement: .init(entitlementId: "pro", expiresAt: Date())) })
                try Outbox.ack(c, redemptions: ids, type: "grant.command")
            }
            func scans() throws -> [Int] {
                try ["coupons.redemptions", "coupons.outbox"].map { try c.sequentialScans(of: $0) }
            }

            try add(5, status: .completed)
            try c.execute("ANALYZE coupons.redemptions; ANALYZE coupons.outbox")
            for _ in 0..<10 {  // the connection settles on its plans
                _ = try lookUp([UUID.random(), UUID.random()])
                try complete([UUID.random(), UUID.random()])
            }
            try add(8000, status: .granting)
            let tuples = try c.query(
                """
                SELECT reltuples::int AS n FROM pg_class WHERE oid IN ('coupons.redemptions'::regclass, 'coupons.outbox'::regclass)
                """
            ).rows.map { try $0.decode("n", as: Int.self) }

            let picked = try c.query(
                "SELECT id, account_id FROM coupons.redemptions WHERE status = 'granting' ORDER BY random() LIMIT 45"
            ).rows
            let ids = try picked.map { try $0.decode("id", as: UUID.self) },
                accounts = try picked.map { try $0.decode("account_id", as: UUID.self) }
            // Each account also holds a use of three other coupons (its history, not yet completed,
            // so it is still a new customer), which the lookup of a use of this coupon must not return.
            for other in ["OTHER1", "OTHER2", "OTHER3"] {
                try c.query(
                    """
                    WITH o AS (
                        INSERT INTO coupons.coupons (id, code, kind, duration_unit, duration_count, product_ids, platforms, mode)
                        VALUES (gen_random_uuid(), $1, 'freePeriod', 'month', 1, '{}', '{web}', 'live') RETURNING id
                    )
                    INSERT INTO coupons.redemptions (id, coupon_id, code, account_id, app_user_id, platform, sandbox, status)
                    SELECT gen_random_uuid(), o.id, $1, a, a::text, 'web', false, 'granting' FROM o, unnest($2::uuid[]) a
                    """, [other, PGArray(accounts.map { $0.lowercasedString })])
            }
            let before = try scans()
            let granting = try lookUp(accounts)
            try complete(ids)
            let completed = try lookUp(accounts)
            let after = try scans()
            let left = try c.query(
                """
                SELECT (SELECT count(*) FROM coupons.redemptions WHERE id = ANY($1::uuid[]) AND status = 'completed')::int AS done,
                       (SELECT count(*) FROM coupons.outbox WHERE redemption_id = ANY($1::uuid[]))::int AS queued
                """, [PGArray(ids.map { $0.lowercasedString })]
            ).first!
            return (
                tuples: tuples, scans: zip(after, before).map { $0 - $1 }, granting: granting, completed: completed,
                done: try left.decode("done", as: Int.self), queued: try left.decode("queued", as: Int.self)
            )
        }
        #expect(
            r.tuples == [5, 5], "the statistics must still be those of the small tables for this test to mean anything")
        #expect(r.scans == [0, 0], "statements read a whole table (redemptions, outbox) this many times")
        #expect(r.granting == [45, 0, 45], "each account holds a use, and is still a new customer until it completes")
        #expect(r.completed == [45, 45, 45])
        #expect(r.done == 45 && r.queued == 0)
    }

    /// The batch lookups that take arrays of accounts ask for a generic plan, which a connection
    /// makes once. With the arrays' values, PostgreSQL planned each call again, at more cost than
    /// the lookup itself (docs/performance.md, "Session 35": `./bench/pg-statements` shows the
    /// plans made, which no test can read without `pg_stat_statements`); the tests above hold the
    /// generic plans to one probe per account.
    @Test func theBatchLookupsAskForAGenericPlan() async throws {
        let pool = try await Self.couponsDatabase(autovacuumOff: [])
        defer { pool.close() }
        let settings = try await pool.withConnection { c in
            try c.query(
                """
                SELECT p.proname AS name, array_to_string(p.proconfig, ',') AS settings FROM pg_proc p
                WHERE p.pronamespace = 'coupons'::regnamespace
                AND p.proname IN ('held_by_account', 'validate_standing_in_app', 'veterans_by_account_in_app')
                ORDER BY p.proname
                """
            ).rows.map { [try $0.decode("name", as: String.self), try $0.decode("settings", as: String.self)] }
        }
        #expect(settings.map { $0[0] } == ["held_by_account", "validate_standing_in_app", "veterans_by_account_in_app"])
        for s in settings { #expect(s[1].contains("plan_cache_mode=force_generic_plan"), "\(s)") }
    }

    /// A new code's flash sale, with the statistics of the day before: another coupon holds every
    /// redemption they know of, and the new one has thousands since. A batch's lookup of the uses
    /// its accounts hold is one index probe per account, not a walk through the new coupon's
    /// redemptions for each account (as `held_by_account` once planned it, taking the coupon's
    /// index for one estimated row: about 500 entries read per account at 2,000 a second).
    @Test func aCouponTheStatisticsHaveNotSeenIsLookedUpByAccount() async throws {
        let pool = try await Self.couponsDatabase(autovacuumOff: ["redemptions"])
        defer { pool.close() }
        let r = try await pool.withConnection { c in
            func coupon(_ code: String) throws -> UUID {
                try c.query(
                    """
                    INSERT INTO coupons.coupons (id, code, kind, duration_unit, duration_count, product_ids, platforms, mode)
                    VALUES (gen_random_uuid(), $1, 'freePeriod', 'month', 1, '{}', '{web}', 'live') RETURNING id
                    """, [code]
                ).first!.decode("id")
            }
            func add(_ coupon: UUID, _ code: String, _ n: Int) throws {
                try c.query(
                    """
                    INSERT INTO coupons.redemptions (id, coupon_id, code, account_id, app_user_id, platform, sandbox, status)
                    SELECT gen_random_uuid(), $1, $2, gen_random_uuid(), 'u' || g, 'web', false, 'granting'
                    FROM generate_series(1, $3::int) g
                    """, [coupon, code, n])
            }
            try add(try coupon("YESTERDAY"), "YESTERDAY", 3000)
            try c.execute("ANALYZE coupons.redemptions")
            let today = try coupon("TODAY")
            try add(today, "TODAY", 3000)
            let accounts = try c.query(
                "SELECT account_id FROM coupons.redemptions WHERE coupon_id = $1 ORDER BY random() LIMIT 40", [today]
            ).rows.map { try $0.decode("account_id", as: UUID.self) }
            let array = PGArray(accounts.map { $0.lowercasedString } + [UUID.random().lowercasedString])
            var held: [Int] = []
            let before = try c.indexEntriesRead(of: "coupons.redemptions")
            for _ in 0..<10 {  // past the point where the connection keeps one plan
                held.append(
                    try c.prepared(
                        "held_by_account", RedemptionStore.BatchSQL.heldByAccount, [array, "TODAY", DefaultApp.id]
                    )
                    .rows.count)
                held.append(
                    try c.prepared("held_of_coupon", RedemptionStore.BatchSQL.heldByAccountOfCoupon, [array, today])
                        .rows
                        .count)
            }
            let read = try c.indexEntriesRead(of: "coupons.redemptions") - before
            return (held: held, read: read)
        }
        #expect(r.held == Array(repeating: 40, count: 20), "each of the 40 accounts holds one use of TODAY")
        // 20 lookups of 41 accounts: a probe each reads at most its one entry (and the coupons' own
        // lookups by code read none of this table's indexes).
        #expect(r.read <= 20 * 41, "index entries read: \(r.read)")
    }
}
