import Foundation
import TestSupport
import Testing
@testable import GrantsService
@testable import Core
@testable import Database

/// `GrantLedger.store` hands each round to `grants.store_round_columns`, one binary array per
/// column: what the ledger keeps is what arrived, to the byte, with each period in its unit and
/// each lease as asked.
@Suite struct GrantLedgerTests {
    static func command(holder: String, unit: String, count: Int = 1, sandbox: Bool = false) -> GrantCommand {
        let coupon = PublicCoupon(code: "LEDGER", kind: .freePeriod, percentOff: nil, amountOff: nil,
                                  duration: CouponDuration(unit: unit, count: count), periodCount: nil, entitlementId: "pro")
        return GrantCommand(redemptionId: UUID.random(), accountId: UUID.random(), appUserId: holder, entitlementId: "pro",
                            duration: coupon.duration, sandbox: sandbox, coupon: coupon, platform: .web, productId: nil,
                            reservedAt: Date(timeIntervalSince1970: 1_764_483_573.125), mode: sandbox ? .test : .live)
    }

    /// The previous release's grants hands each round to `grants.store_round(json)` as one JSON
    /// array, and this release keeps that function for it (docs/upgrading.md): from the same
    /// commands it stores what this release's `store_round_columns` does, row for row.
    @Test func thePreviousReleasesJSONRoundStoresWhatTheColumnsStore() async throws {
        var inApp = Self.command(holder: "a \"quoted\" \\ back/slash\n\ttab é 🎟️ \u{1}", unit: "week", count: 2)
        inApp.app = UUID.random()
        let commands = [
            inApp, Self.command(holder: "h-year", unit: "year"),
            Self.command(holder: "h-day", unit: "day", count: 10, sandbox: true),
            Self.command(holder: "h-month", unit: "month", count: 3, sandbox: true),
        ]
        let received = try commands.map {
            try ReceivedCommand(
                $0, message: JSONEncoder.bus.encode(Envelope(id: "m", type: GrantCommand.type, body: $0)))
        }
        let provider = { @Sendable (c: GrantCommand) in c.sandbox ? "revenuecat-sandbox" : "local" }
        let lease = { @Sendable (p: String) -> TimeInterval? in p == "local" ? 30 : nil }
        let items = received.map {
            let p = provider($0.command)
            return GrantLedger.RoundItem($0.command, provider: p, text: $0.text, lease: lease(p))
        }
        #expect(items.contains { $0.inApp != nil } && items.contains { $0.lease == nil }, "the test needs both of each")
        let json = String(decoding: try JSONEncoder().encode(items), as: UTF8.self)

        /// Every stored grant as text, its times as the period and the lease they make.
        func stored(
            _ store: @escaping @Sendable (PGConnection) throws -> Int
        ) async throws -> (answered: Int, rows: String) {
            let pool = PGPool(url: try await TestPostgres.shared().freshDatabase(), maxConnections: 1)
            defer { pool.close() }
            try await GrantsService.migrator.apply(on: pool)
            let answered = try await pool.transaction(store)
            let rows = try await pool.query("""
                SELECT string_agg(concat_ws('|', redemption_id, account_id, app_user_id, entitlement_id, sandbox, provider, status,
                                            end_time - start_time, command, attempts, round(extract(epoch FROM next_attempt_at - created_at)),
                                            app_id, coupons_notified), chr(30) ORDER BY redemption_id) AS rows
                FROM grants.grants
                """).first!.decode("rows", as: String.self)
            return (answered, rows)
        }
        let columns = try await stored { try GrantLedger.store($0, received, provider: provider, lease: lease).count }
        let previous = try await stored {
            try $0.query("SELECT * FROM grants.store_round($1::json)", [json]).rows.count
        }
        #expect(columns.answered == 2, "the ledger answers the two leased grants")
        #expect(previous.answered == 4, "the function answers every grant it stored")
        #expect(columns.rows.split(separator: "\u{1E}").count == 4)
        #expect(previous.rows == columns.rows)
    }

    @Test func aRoundKeepsEachCommandAsItArrivedWithItsPeriodAndLease() async throws {
        let url = try await TestPostgres.shared().freshDatabase()
        let pool = PGPool(url: url, maxConnections: 1)
        defer { pool.close() }
        try await GrantsService.migrator.apply(on: pool)
        // Text JSON must carry through: quotes, backslashes, a slash, control characters, and
        // characters outside ASCII (one outside the Basic Multilingual Plane).
        let awkward = "a \"quoted\" \\ back/slash\n\ttab é 🎟️ \u{1}"
        let commands = [Self.command(holder: awkward, unit: "year", count: 2), Self.command(holder: "h-month", unit: "month", count: 3),
                        Self.command(holder: "h-week", unit: "week", count: 1, sandbox: true), Self.command(holder: "h-day", unit: "day", count: 10)]
        let received = try commands.map { try ReceivedCommand($0, message: JSONEncoder.bus.encode(Envelope(id: "m", type: GrantCommand.type, body: $0))) }
        #expect(received[0].text.contains(#"\""#) && received[0].text.contains(#"\\"#), "the test's text needs escapes to mean anything")
        // Sandbox grants go to a rate-limited provider (stored due); live ones are leased at once.
        let store = { @Sendable (tx: PGConnection) throws -> [Grant] in
            try GrantLedger.store(tx, received, provider: { $0.sandbox ? "revenuecat-sandbox" : "local" },
                                  lease: { $0 == "local" ? 30 : nil })
        }
        let leased = try await pool.transaction(store)
        #expect(Set(leased.map(\.redemptionId)) == Set(commands.filter { !$0.sandbox }.map(\.redemptionId)))
        #expect(leased.allSatisfy { $0.attempts == 1 && $0.status == .pending })

        let rows = try await pool.query("""
            SELECT redemption_id, account_id, app_user_id, sandbox, provider, command, attempts,
                   CASE end_time WHEN start_time + interval '2 years' THEN '2 years' WHEN start_time + interval '3 months' THEN '3 months'
                                 WHEN start_time + interval '7 days' THEN '1 week' WHEN start_time + interval '10 days' THEN '10 days' END AS period,
                   next_attempt_at > now() + interval '20 seconds' AS leased
            FROM grants.grants
            """).rows
        #expect(rows.count == 4)
        // The period in the unit the coupon names (a month is not a number of days).
        let expected = ["h-month": "3 months", "h-week": "1 week", "h-day": "10 days", awkward: "2 years"]
        for (c, r) in zip(commands, received) {
            let row = try #require(try rows.first { try $0.decode("redemption_id", as: UUID.self) == c.redemptionId })
            #expect(try row.decode("command", as: String.self) == r.text, "the command is kept byte for byte")
            #expect(try row.decode("app_user_id", as: String.self) == c.appUserId)
            #expect(try row.decode("account_id", as: UUID.self) == c.accountId)
            #expect(try row.decode("sandbox", as: Bool.self) == c.sandbox)
            #expect(try row.decode("provider", as: String.self) == (c.sandbox ? "revenuecat-sandbox" : "local"))
            #expect(try row.decodeIfPresent("period", as: String.self) == expected[c.appUserId])
            #expect(try row.decode("attempts", as: Int.self) == (c.sandbox ? 0 : 1))
            #expect(try row.decode("leased", as: Bool.self) == !c.sandbox)
            #expect(try ReceivedCommand.decodeStored(try row.decode("command")).command == c)
        }

        // Stored again (a re-sent batch): nothing changes, nothing is handed over twice.
        #expect(try await pool.transaction(store).isEmpty)
        #expect(try await pool.query("SELECT count(*)::int AS n FROM grants.grants").first!.decode("n", as: Int.self) == 4)
    }

    /// Two coupons of one holder in one batch go to two rounds: the second period starts where
    /// the first ends.
    @Test func aHoldersSecondCommandInABatchExtendsTheFirst() async throws {
        let url = try await TestPostgres.shared().freshDatabase()
        let pool = PGPool(url: url, maxConnections: 1)
        defer { pool.close() }
        try await GrantsService.migrator.apply(on: pool)
        let both = [Self.command(holder: "twice", unit: "month"), Self.command(holder: "twice", unit: "week"), Self.command(holder: "once", unit: "day")]
        let received = try both.map { try ReceivedCommand($0) }
        _ = try await pool.transaction { tx in try GrantLedger.store(tx, received, provider: { _ in "local" }, lease: { _ in nil }) }
        let chained = try await pool.query("""
            SELECT count(*)::int AS n FROM grants.grants a JOIN grants.grants b
                ON b.app_user_id = a.app_user_id AND b.redemption_id <> a.redemption_id AND b.start_time = a.end_time
            WHERE a.app_user_id = 'twice'
            """).first!.decode("n", as: Int.self)
        #expect(chained == 1)
        #expect(try await pool.query("SELECT count(*)::int AS n FROM grants.grants WHERE attempts = 0").first!.decode("n", as: Int.self) == 3,
                "without a lease, every grant is stored due")
    }

    /// A holder's grants of one entitlement in two apps (an account is shared, an entitlement is
    /// one app's): each is stored in its app, with its app's provider, and neither period waits
    /// for the other; in one app the second still extends the first.
    @Test func aHoldersPeriodsRunPerApp() async throws {
        let url = try await TestPostgres.shared().freshDatabase()
        let pool = PGPool(url: url, maxConnections: 1)
        defer { pool.close() }
        try await GrantsService.migrator.apply(on: pool)
        let other = UUID.random()
        var inOther = Self.command(holder: "shared", unit: "month")
        inOther.app = other
        var againInOther = Self.command(holder: "shared", unit: "month")
        againInOther.app = other
        let inDefault = Self.command(holder: "shared", unit: "month")
        let choice = ProviderChoice(defaultLive: "revenuecat", defaultSandbox: "revenuecat-sandbox")
        let received = try [inOther, inDefault, againInOther].map { try ReceivedCommand($0) }
        _ = try await pool.transaction { tx in
            try GrantLedger.store(tx, received, provider: choice.name(for:), lease: { _ in nil })
        }
        let rows = try await pool.query("""
            SELECT redemption_id, app_id, provider, start_time = (SELECT min(start_time) FROM grants.grants) AS first
            FROM grants.grants
            """).rows
        func row(_ c: GrantCommand) throws -> PGRow {
            try #require(try rows.first { try $0.decode("redemption_id", as: UUID.self) == c.redemptionId })
        }
        #expect(try row(inDefault).decode("app_id", as: UUID.self) == DefaultApp.id)
        #expect(try row(inDefault).decode("provider", as: String.self) == "revenuecat")
        #expect(try row(inDefault).decode("first", as: Bool.self), "the default app's month waits for no other app's")
        #expect(try row(inOther).decode("app_id", as: UUID.self) == other)
        #expect(try row(inOther).decode("provider", as: String.self) == "local")
        let firstInOther = try [inOther, againInOther].filter { try row($0).decode("first", as: Bool.self) }
        #expect(firstInOther.count == 1, "in one app, the second month extends the first")
        let ledger = try await pool.withConnection { try GrantLedger.entitlements($0, appUserId: "shared", app: other) }
        #expect(ledger.isEmpty, "nothing is granted until the provider answers")
    }
}

/// Which provider records an app's grants: the default app the environment's, another app
/// Redeem's own ledger.
@Suite struct ProviderChoiceTests {
    @Test(arguments: [
        ("revenuecat", "revenuecat-sandbox", DefaultApp.id, false, "revenuecat"),
        ("revenuecat", "revenuecat-sandbox", DefaultApp.id, true, "revenuecat-sandbox"),
        ("local", "local-sandbox", DefaultApp.id, false, "local"),
        ("revenuecat", "revenuecat-sandbox", UUID(uuidString: "6F1C0000-0000-0000-0000-000000000002")!, false, "local"),
        ("revenuecat", "revenuecat-sandbox", UUID(uuidString: "6F1C0000-0000-0000-0000-000000000002")!, true,
         "local-sandbox"),
    ])
    func aGrantsProviderIsItsAppsChoice(live: String, sandbox: String, app: UUID, isSandbox: Bool, expected: String) {
        var command = GrantLedgerTests.command(holder: "h", unit: "day", sandbox: isSandbox)
        command.app = app
        #expect(ProviderChoice(defaultLive: live, defaultSandbox: sandbox).name(for: command) == expected)
    }
}
