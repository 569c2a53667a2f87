import Foundation
import TestSupport
import Testing
@testable import CouponsService
@testable import GrantsService
@testable import Core
@testable import Database

/// Data made before test and live mode were two worlds migrates into them (coupons migration 10,
/// grants migration 4): coupons keep their mode, a code becomes unique per mode (enforced by the
/// database), messages still in the outbox learn their coupon's mode, and webhook endpoints are live.
@Suite struct ModeMigrationTests {
    @Test func couponsKeepTheirModeAndACodeThenExistsOncePerMode() async throws {
        let url = try await TestPostgres.shared().freshDatabase()
        let pool = PGPool(url: url, maxConnections: 1)
        defer { pool.close() }
        try await Migrator(schema: "coupons", migrations: CouponsMigrations.all.filter { $0.version < 10 }).apply(on: pool)
        let coupon = UUID.random(), redemption = UUID.random()
        let publicCoupon = PublicCoupon(code: "OLD-1", kind: .freePeriod, percentOff: nil, amountOff: nil,
                                        duration: CouponDuration(unit: "month", count: 1), periodCount: nil, entitlementId: "pro")
        // A live coupon's sandbox redemption, its grant command still in the outbox as an earlier
        // version wrote it: without a mode, which alone would be read as test.
        let command = GrantCommand(redemptionId: redemption, accountId: UUID.random(), appUserId: "u-1", entitlementId: "pro",
                                   duration: publicCoupon.duration, sandbox: true, coupon: publicCoupon, platform: .web, productId: nil,
                                   reservedAt: Date(), mode: .live)
        var envelope = try #require(try JSONSerialization.jsonObject(with: try JSONEncoder.bus.encode(Envelope(id: "m1", type: GrantCommand.type, body: command))) as? [String: Any])
        var body = try #require(envelope["body"] as? [String: Any])
        body["mode"] = nil
        envelope["body"] = body
        let oldPayload = String(decoding: try JSONSerialization.data(withJSONObject: envelope), as: UTF8.self)
        #expect(try ReceivedCommand.decodeStored(oldPayload).command.couponMode == .test)

        @Sendable func insertCoupon(_ c: PGConnection, id: UUID, mode: String) throws {
            try c.query("""
                INSERT INTO coupons.coupons (id, code, kind, duration_unit, duration_count, product_ids, platforms, mode)
                VALUES ($1, 'OLD-1', 'freePeriod', 'month', 1, '{}', '{web}', $2)
                """, [id, mode])
        }
        let sameCodeBefore = try await pool.withConnection { c -> PGError? in
            try insertCoupon(c, id: coupon, mode: "live")
            try c.query("""
                INSERT INTO coupons.redemptions (id, coupon_id, code, account_id, app_user_id, platform, sandbox, status)
                VALUES ($1, $2, 'OLD-1', $3, 'u-1', 'web', true, 'granting')
                """, [redemption, coupon, command.accountId])
            try c.query("INSERT INTO coupons.outbox (redemption_id, type, payload) VALUES ($1, $2, $3)", [redemption, GrantCommand.type, oldPayload])
            do { try insertCoupon(c, id: UUID.random(), mode: "test"); return nil } catch let e as PGError { return e }
        }
        #expect(sameCodeBefore?.isUniqueViolation == true, "before: one coupon per code, whatever its mode")

        #expect(try await CouponsService.migrator.apply(on: pool).first == 10)
        let (mode, payload, test, again) = try await pool.withConnection { c -> (String, String, PGError?, PGError?) in
            let mode = try c.query("SELECT mode FROM coupons.coupons WHERE id = $1", [coupon]).first!.decode("mode", as: String.self)
            let payload = try c.query("SELECT payload FROM coupons.outbox WHERE redemption_id = $1", [redemption]).first!.decode("payload", as: String.self)
            var test: PGError?
            do { try insertCoupon(c, id: UUID.random(), mode: "test") } catch let e as PGError { test = e }
            var again: PGError?
            do { try insertCoupon(c, id: UUID.random(), mode: "live") } catch let e as PGError { again = e }
            return (mode, payload, test, again)
        }
        #expect(mode == "live")
        #expect(test == nil, "the same code in the other mode")
        #expect(again?.isUniqueViolation == true)
        // Since apps, a code is unique per app and mode (coupons migration 026).
        #expect(again?.constraint == "coupons_code_app_mode_key")
        let migrated = try ReceivedCommand.decodeStored(payload).command
        #expect(migrated.mode == .live)
        #expect(migrated.couponMode == .live)
        #expect(migrated.redemptionId == redemption)
    }

    @Test func webhookEndpointsMadeBeforeAreLive() async throws {
        let url = try await TestPostgres.shared().freshDatabase()
        let pool = PGPool(url: url, maxConnections: 1)
        defer { pool.close() }
        try await Migrator(schema: "grants", migrations: GrantsMigrations.all.filter { $0.version < 4 }).apply(on: pool)
        let endpoint = UUID.random()
        try await pool.query("INSERT INTO grants.webhook_endpoints (id, url, events, secret) VALUES ($1, 'https://example.com/h', '{coupon.redeemed}', 'whsec_x')",
                             [endpoint])
        #expect(try await GrantsService.migrator.apply(on: pool).first == 4)
        let live = try await Webhooks.list(pool, .init(limit: 20, cursor: nil, mode: .live, app: DefaultApp.id))
        #expect(live.data.map(\.id) == [endpoint])
        #expect(live.data.first?.mode == .live)
        let test = try await Webhooks.list(pool, .init(limit: 20, cursor: nil, mode: .test, app: DefaultApp.id))
        #expect(test.data.isEmpty)
        await #expect(throws: PGError.self, "every endpoint made from now on names its mode") {
            try await pool.query("INSERT INTO grants.webhook_endpoints (id, url, events, secret) VALUES ($1, 'https://example.com/h', '{coupon.redeemed}', 'whsec_y')",
                                 [UUID.random()])
        }
    }
}
