import Core
import Database
import Foundation

/// The dashboard overview's figures: completed redemptions of an app and mode over the last days, read by
/// `coupons.redemption_stats` (counted by day, platform, code and sandbox) and summed here.
enum RedemptionStatsReport {
    struct Row: Equatable {
        var day: String
        var platform: Platform
        var code: String
        var sandbox: Bool
        var redemptions: Int
    }

    /// The most days one report covers.
    static let maxDays = 366

    static func query(_ c: PGConnection, mode: Mode, app: UUID, days: Int, now: Date) throws -> RedemptionStats {
        let window = window(days: min(max(days, 1), maxDays), endingAt: now)
        let rows = try c.query(
            "SELECT day, platform, code, sandbox, redemptions FROM coupons.redemption_stats($1, $2, $3)",
            [mode.rawValue, window.since, app]
        ).rows.map { row in
            Row(
                day: try row.decode("day"), platform: try row.decode("platform", as: Platform.self),
                code: try row.decode("code"), sandbox: try row.decode("sandbox"),
                redemptions: Int(try row.decode("redemptions", as: Int64.self)))
        }
        return summarize(rows, dates: window.dates)
    }

    /// The window's dates (UTC, oldest first, today last) and the start of its first day.
    static func window(days: Int, endingAt now: Date) -> (dates: [String], since: Date) {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let today = calendar.startOfDay(for: now)
        let since = calendar.date(byAdding: .day, value: -(days - 1), to: today)!
        let format = DateFormatter()
        format.locale = Locale(identifier: "en_US_POSIX")
        format.timeZone = calendar.timeZone
        format.dateFormat = "yyyy-MM-dd"
        let dates = (0..<days).map { format.string(from: calendar.date(byAdding: .day, value: $0, to: since)!) }
        return (dates, since)
    }

    /// Sums the rows: live ones per day and platform, per platform and per code (the ten most
    /// redeemed, then by code); sandbox ones in one count.
    static func summarize(_ rows: [Row], dates: [String]) -> RedemptionStats {
        var days = Dictionary(uniqueKeysWithValues: dates.map { ($0, RedemptionStats.Day(date: $0)) })
        var total = RedemptionStats.Day(date: "")
        var byCode: [String: Int] = [:]
        var sandbox = 0
        for row in rows {
            if row.sandbox {
                sandbox += row.redemptions
                continue
            }
            days[row.day]?.add(row.platform, row.redemptions)
            total.add(row.platform, row.redemptions)
            byCode[row.code, default: 0] += row.redemptions
        }
        let coupons = byCode.map { RedemptionStats.CouponCount(code: $0.key, redemptions: $0.value) }
            .sorted { ($0.redemptions, $1.code) > ($1.redemptions, $0.code) }
        return RedemptionStats(
            days: dates.compactMap { days[$0] }, platforms: total, coupons: Array(coupons.prefix(10)), sandbox: sandbox)
    }
}

extension RedemptionStats.Day {
    mutating func add(_ platform: Platform, _ n: Int) {
        switch platform {
        case .ios: ios += n
        case .android: android += n
        case .web: web += n
        }
    }
}
