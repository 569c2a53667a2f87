import Foundation
import TestSupport
import Testing
@testable import GrantsService
@testable import Core
@testable import Database

/// Grants' batch statements find rows by index with the plans each connection keeps, after the
/// table was analyzed small and has grown since (the case `RedemptionPlanTests` describes).
@Suite struct GrantPlanTests {
    @Test func batchStatementsNeverReadTheWholeTable() async throws {
        let url = try await TestPostgres.shared().freshDatabase()
        let pool = PGPool(url: url, maxConnections: 1)
        defer { pool.close() }
        _ = try await GrantsService.migrator.apply(on: pool)
        let coupon = PublicCoupon(code: "PLAN", kind: .freePeriod, percentOff: nil, amountOff: nil,
                                  duration: CouponDuration(unit: "month", count: 1), periodCount: nil, entitlementId: "pro")
        @Sendable func command(for holder: String) -> GrantCommand {
            GrantCommand(redemptionId: UUID.random(), accountId: UUID.random(), appUserId: holder, entitlementId: "pro",
                         duration: coupon.duration, sandbox: false, coupon: coupon, platform: .web, productId: nil, reservedAt: Date(), mode: .live)
        }
        // Measured on the pool's thread, judged here.
        let r = try await pool.withConnection { c in
            try c.execute("ALTER TABLE grants.grants SET (autovacuum_enabled = false)")
            func store(_ commands: [GrantCommand]) throws -> Int {
                try c.transaction { tx in try GrantLedger.store(tx, try commands.map(ReceivedCommand.init), provider: { _ in "local" }, lease: { _ in 30 }).count }
            }
            func settle(_ ids: [UUID]) throws -> Int {
                try c.transaction { tx in try GrantLedger.settleSucceeded(tx, ids).count }
            }
            _ = try store((0..<5).map { command(for: "first-\($0)") })
            try c.execute("ANALYZE grants.grants")
            for i in 0..<10 {  // the connection settles on its plans
                let batch = [command(for: "warm-\(i)-a"), command(for: "warm-\(i)-b")]
                _ = try store(batch)
                _ = try settle(batch.map(\.redemptionId))
            }
            try c.query("""
                INSERT INTO grants.grants (redemption_id, account_id, app_user_id, entitlement_id, sandbox, provider, start_time, end_time, command)
                SELECT gen_random_uuid(), gen_random_uuid(), 'holder-' || g, 'pro', false, 'local', now(), now() + interval '1 year', '{}'
                FROM generate_series(1, 8000) g
                """)
            let tuples = try c.query("SELECT reltuples::int AS n FROM pg_class WHERE oid = 'grants.grants'::regclass").first!.decode("n", as: Int.self)

            // Holders with a grant already: their new periods start where the old ones end.
            let holders = try c.query("SELECT app_user_id, redemption_id FROM grants.grants WHERE app_user_id LIKE 'holder-%' ORDER BY random() LIMIT 45").rows
            let fresh = try holders.map { command(for: try $0.decode("app_user_id")) }
            let before = try c.sequentialScans(of: "grants.grants")
            let stored = try store(fresh)
            let settled = try settle(try holders.map { try $0.decode("redemption_id", as: UUID.self) })
            let after = try c.sequentialScans(of: "grants.grants")
            let extending = try c.query("""
                SELECT count(*)::int AS n FROM grants.grants g JOIN grants.grants old ON old.app_user_id = g.app_user_id AND old.redemption_id <> g.redemption_id
                WHERE g.redemption_id = ANY($1::uuid[]) AND g.start_time = date_trunc('milliseconds', old.end_time)
                """, [PGArray(fresh.map { $0.redemptionId.lowercasedString })]).first!.decode("n", as: Int.self)
            return (tuples: tuples, scans: after - before, stored: stored, settled: settled, extending: extending)
        }
        #expect(r.tuples == 5, "the statistics must still be those of the small table for this test to mean anything")
        #expect(r.scans == 0, "statements read the whole table this many times")
        #expect(r.stored == 45 && r.settled == 45)
        #expect(r.extending == 45, "each new period starts where the holder's grant ends")
    }
}
