import Foundation
import Testing

@testable import Core
@testable import CouponsService

/// The overview's figures from the rows `coupons.redemption_stats` answers: every day of the
/// window, sandbox apart, platforms and codes summed, the ten codes redeemed most.
@Suite struct RedemptionStatsTests {
    typealias Row = RedemptionStatsReport.Row

    @Test func theWindowIsItsDaysInUTCEndingToday() {
        let now = ISO8601DateFormatter().date(from: "2026-03-01T23:30:00Z")!
        let window = RedemptionStatsReport.window(days: 3, endingAt: now)
        #expect(window.dates == ["2026-02-27", "2026-02-28", "2026-03-01"])
        #expect(window.since == ISO8601DateFormatter().date(from: "2026-02-27T00:00:00Z")!)
        #expect(RedemptionStatsReport.window(days: 1, endingAt: now).dates == ["2026-03-01"])
    }

    @Test func rowsAreSummedByDayPlatformAndCodeWithTheSandboxApart() {
        let rows = [
            Row(day: "2026-02-28", platform: .ios, code: "SPRING", sandbox: false, redemptions: 2),
            Row(day: "2026-02-28", platform: .web, code: "SPRING", sandbox: false, redemptions: 1),
            Row(day: "2026-03-01", platform: .android, code: "GIFT", sandbox: false, redemptions: 4),
            Row(day: "2026-03-01", platform: .android, code: "GIFT", sandbox: true, redemptions: 7),
            // Outside the window (a day the query would not answer): counted in the totals only.
            Row(day: "2026-02-01", platform: .web, code: "OLD", sandbox: false, redemptions: 1)
        ]
        let stats = RedemptionStatsReport.summarize(rows, dates: ["2026-02-27", "2026-02-28", "2026-03-01"])
        #expect(
            stats.days == [
                .init(date: "2026-02-27"), .init(date: "2026-02-28", ios: 2, web: 1),
                .init(date: "2026-03-01", android: 4)
            ])
        #expect(stats.platforms == .init(date: "", ios: 2, android: 4, web: 2))
        #expect(stats.coupons.map(\.code) == ["GIFT", "SPRING", "OLD"])
        #expect(stats.coupons.map(\.redemptions) == [4, 3, 1])
        #expect(stats.sandbox == 7)
    }

    @Test func theTenCodesRedeemedMostAreKeptTiesByCode() {
        let rows = (0..<12).map { i in
            Row(
                day: "2026-03-01", platform: .web, code: "C\(String(format: "%02d", i))", sandbox: false,
                redemptions: i < 3 ? 5 : 1)
        }
        let stats = RedemptionStatsReport.summarize(rows, dates: ["2026-03-01"])
        #expect(stats.coupons.count == 10)
        #expect(stats.coupons.prefix(3).map(\.code) == ["C00", "C01", "C02"])
        #expect(stats.coupons.last?.code == "C09")
        #expect(stats.days == [.init(date: "2026-03-01", web: 24)])
    }
}
