import Foundation
import TestSupport
import Testing

@testable import Core
@testable import CouponsService
@testable import Database

/// `redeem_redemptions{status,platform}` is kept as redemptions change (migration 027), not counted
/// anew from the whole table every 15 s: whatever statements change the table, and however many at
/// once, the counts `CouponsService.figures` reads are the table's own.
@Suite struct RedemptionCountsTests {
    static let newFunctions = ["count_redemption_changes", "fold_redemption_counts"]

    /// The table counted directly, as the gauge counted it before.
    static func counted(_ c: PGConnection) throws -> [String: Double] {
        let rows = try c.query(
            "SELECT status, platform, count(*) AS n FROM coupons.redemptions GROUP BY status, platform")
        return try Dictionary(uniqueKeysWithValues: rows.rows.map { row in
            ("\(try row.decode("status", as: String.self))/\(try row.decode("platform", as: String.self))",
             Double(try row.decode("n", as: Int.self)))
        })
    }

    /// The counts as the gauge reads them now.
    static func kept(_ c: PGConnection) throws -> [String: Double] {
        Dictionary(uniqueKeysWithValues: try CouponsService.figures(c).redemptions.map { labels, n in
            ("\(labels["status"] ?? "")/\(labels["platform"] ?? "")", n)
        })
    }

    static func coupon(_ c: PGConnection, code: String) throws -> UUID {
        let id = UUID.random()
        try c.query(
            """
            INSERT INTO coupons.coupons (id, code, kind, duration_unit, duration_count, product_ids, platforms, mode, new_customers_only)
            VALUES ($1, $2, 'freePeriod', 'month', 1, '{}', '{web,ios}', 'live', false)
            """, [id, code])
        return id
    }

    /// `n` redemptions of `coupon` in one statement, on `platform`, with `status`, for app users
    /// named `user` and a number.
    static func add(
        _ c: PGConnection, _ coupon: UUID, code: String, _ n: Int, platform: String, status: String, user: String = "u"
    ) throws {
        try c.query(
            """
            INSERT INTO coupons.redemptions (id, coupon_id, code, account_id, app_user_id, platform, sandbox, status)
            SELECT gen_random_uuid(), $1, $2, gen_random_uuid(), $6 || g, $3, false, $4 FROM generate_series(1, $5::int) g
            """, [coupon, code, platform, status, n, user])
    }

    @Test func theCountsFollowInsertsUpdatesDeletesAndTruncation() async throws {
        let pool = PGPool(url: try await TestPostgres.shared().freshDatabase(), maxConnections: 1)
        defer { pool.close() }
        _ = try await CouponsService.migrator.apply(on: pool)
        try await pool.withConnection { c in
            let coupon = try Self.coupon(c, code: "COUNT")
            #expect(try Self.kept(c).isEmpty)
            try Self.add(c, coupon, code: "COUNT", 30, platform: "web", status: "reserved")
            try Self.add(c, coupon, code: "COUNT", 12, platform: "ios", status: "granting")
            try c.execute(
                "UPDATE coupons.redemptions SET status = 'completed' WHERE platform = 'web' AND app_user_id < 'u2'")
            try c.execute(
                "UPDATE coupons.redemptions SET status = 'released' WHERE platform = 'ios' AND app_user_id > 'u5'")
            // An update that changes neither status nor platform changes no count.
            try c.execute("UPDATE coupons.redemptions SET failure_reason = 'x' WHERE status = 'released'")
            try c.execute("DELETE FROM coupons.redemptions WHERE status = 'completed' AND app_user_id > 'u15'")
            let direct = try Self.counted(c)
            #expect(direct.count == 4)
            #expect(try Self.kept(c) == direct)
            // Folded: nothing is left to add, and reading again answers the same.
            let left = try c.query("SELECT count(*) AS n FROM coupons.redemption_count_changes").rows[0]
            #expect(try left.decode("n", as: Int.self) == 0)
            #expect(try Self.kept(c) == direct)
            try c.execute("TRUNCATE coupons.redemptions CASCADE")
            #expect(try Self.kept(c).isEmpty)
            try Self.add(c, coupon, code: "COUNT", 3, platform: "web", status: "reserved")
            let afterTruncation = try Self.kept(c)
            #expect(afterTruncation == ["reserved/web": 3])
        }
    }

    /// Redemptions made before the migration are counted by it, once.
    @Test func theMigrationCountsWhatIsThereAlready() async throws {
        let pool = PGPool(url: try await TestPostgres.shared().freshDatabase(), maxConnections: 1)
        defer { pool.close() }
        let before = Migrator(
            schema: "coupons", migrations: CouponsMigrations.all.filter { $0.version < 27 },
            functions: CouponsFunctions.all.filter { !Self.newFunctions.contains($0.name) })
        _ = try await before.apply(on: pool)
        try await pool.withConnection { c in
            let coupon = try Self.coupon(c, code: "EARLIER")
            try Self.add(c, coupon, code: "EARLIER", 25, platform: "web", status: "completed")
            try Self.add(c, coupon, code: "EARLIER", 4, platform: "ios", status: "failed")
        }
        let applied = try await CouponsService.migrator.apply(on: pool)
        #expect(applied == [27])
        try await pool.withConnection { c in
            let kept = try Self.kept(c)
            #expect(kept == ["completed/web": 25, "failed/ios": 4])
        }
    }

    /// Eight connections change redemptions at once, each in transactions of several statements,
    /// some rolled back, while two others fold the counts over and over: no writer waits on
    /// another for a count (none deadlocks), and the counts end exactly the table's.
    @Test func concurrentWritersAndFoldsKeepTheCountsExact() async throws {
        let pool = PGPool(url: try await TestPostgres.shared().freshDatabase(), maxConnections: 10)
        defer { pool.close() }
        _ = try await CouponsService.migrator.apply(on: pool)
        let coupon = try await pool.withConnection { try Self.coupon($0, code: "BUSY") }
        let platforms = ["web", "ios", "android"]
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<8 {
                group.addTask {
                    for round in 0..<25 {
                        let platform = platforms[(writer + round) % platforms.count]
                        do {
                            try await pool.transaction { tx in
                                let user = "w\(writer)-"
                                try Self.add(
                                    tx, coupon, code: "BUSY", 5, platform: platform, status: "reserved", user: user)
                                // Each writer completes its own redemptions: two updating the same
                                // rows in different orders would deadlock on the rows themselves.
                                try tx.query("""
                                    UPDATE coupons.redemptions SET status = 'completed' WHERE id IN (
                                        SELECT id FROM coupons.redemptions WHERE status = 'reserved' AND app_user_id LIKE $1 || '%'
                                        LIMIT 3)
                                    """, [user])
                                if round % 5 == 4 { throw CancellationError() }  // rolled back: counts nothing
                            }
                        } catch is CancellationError {}
                    }
                }
            }
            for _ in 0..<2 {
                group.addTask {
                    for _ in 0..<40 {
                        _ = try await pool.withConnection { try CouponsService.figures($0) }
                    }
                }
            }
            try await group.waitForAll()
        }
        try await pool.withConnection { c in
            let direct = try Self.counted(c)
            let total = direct.values.reduce(0, +)
            #expect(total == 8 * 20 * 5)
            #expect(try Self.kept(c) == direct)
        }
    }
}
