import Foundation

/// Times on the wire: ISO 8601 UTC with milliseconds, e.g. `2026-11-30T06:19:33.123Z`.
public enum Timestamp {
    /// Rounded to the nearest millisecond (a Double holds .293 as .29299…, which a formatter
    /// that truncates would print as .292). Written with integer date arithmetic: Foundation's
    /// formatter sets up a Gregorian `Calendar`, which brings ICU's time-zone code and data into
    /// every process that logs a line or binds a time (1.8 MB resident in accounts).
    public static func iso8601(_ date: Date) -> String {
        var text = [UInt8]()
        text.reserveCapacity(24)
        iso8601(date, into: &text)
        return String(decoding: text, as: UTF8.self)
    }

    /// The same text, appended to `text` (a log line writes it without a `String` between).
    public static func iso8601(_ date: Date, into text: inout [UInt8]) {
        let ms = milliseconds(date)
        let days = ms.floorDiv(86_400_000)
        let msOfDay = Int(ms - days * 86_400_000)
        let (year, month, day) = civil(daysSinceEpoch: Int(days))
        func put(_ value: Int, digits: Int) {
            var divisor = 1
            for _ in 1..<digits { divisor *= 10 }
            while divisor > 1, value / divisor >= 10 { divisor *= 10 }  // a year beyond 9999 keeps its digits
            var v = value
            while divisor > 0 {
                text.append(UInt8(ascii: "0") + UInt8(v / divisor))
                v %= divisor
                divisor /= 10
            }
        }
        if year < 0 { text.append(UInt8(ascii: "-")) }
        put(abs(year), digits: 4); text.append(UInt8(ascii: "-"))
        put(month, digits: 2); text.append(UInt8(ascii: "-"))
        put(day, digits: 2); text.append(UInt8(ascii: "T"))
        put(msOfDay / 3_600_000, digits: 2); text.append(UInt8(ascii: ":"))
        put(msOfDay / 60_000 % 60, digits: 2); text.append(UInt8(ascii: ":"))
        put(msOfDay / 1000 % 60, digits: 2); text.append(UInt8(ascii: "."))
        put(msOfDay % 1000, digits: 3); text.append(UInt8(ascii: "Z"))
    }

    /// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (the one ISO 8601 and
    /// PostgreSQL use): H. Hinnant's `days_from_civil`, exact for every year.
    public static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The inverse of `daysSinceEpoch`: H. Hinnant's `civil_from_days`.
    public static func civil(daysSinceEpoch days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// Reads RFC 3339 (the ISO 8601 profile the API uses): `YYYY-MM-DDTHH:MM:SS`, optional
    /// fractional seconds, then `Z` or an offset (`+01:00`, `+0100`, `+01`). `nil` for anything else:
    /// a date or time that does not exist (February 30, 25:00), an instant outside years 1 to 9999
    /// in UTC, text after the zone. Dates are proleptic Gregorian, as PostgreSQL's.
    public static func parse(_ text: String) -> Date? {
        let b = Array(text.utf8)
        guard let (days, secondOfDay) = wallClock(b) else { return nil }
        var i = 19
        var milliseconds = 0
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            let start = i
            while i < b.count, let digit = digit(b[i]) {
                if i - start < 3 { milliseconds = milliseconds * 10 + digit }
                i += 1
            }
            guard i > start else { return nil }  // RFC 3339: one digit or more
            for _ in min(i - start, 3)..<3 { milliseconds *= 10 }
        }
        guard i < b.count else { return nil }
        var offset = 0
        switch b[i] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            i += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            let sign = b[i] == UInt8(ascii: "+") ? 1 : -1
            guard let hours = number(b, i + 1, 2), hours < 24 else { return nil }
            i += 3
            var minutes = 0
            if i < b.count {
                if b[i] == UInt8(ascii: ":") { i += 1 }
                guard let m = number(b, i, 2), m < 60 else { return nil }
                minutes = m
                i += 2
            }
            offset = sign * (hours * 3600 + minutes * 60)
        default:
            return nil
        }
        guard i == b.count else { return nil }
        // Kept to the millisecond the wire carries (truncated, so 23:59:59.9999 stays on its day),
        // and within years 1 to 9999 in UTC too (an offset can carry a time across either end).
        let instant = Int64(days * 86_400 + secondOfDay - offset) * 1000 + Int64(milliseconds)
        guard range.contains(instant) else { return nil }
        return Date(timeIntervalSince1970: Double(instant) / 1000)
    }

    /// The instants ISO 8601's four-digit years (and PostgreSQL) hold, in Unix milliseconds:
    /// 0001-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z.
    public static let range: ClosedRange<Int64> = -62_135_596_800_000...253_402_300_799_999

    /// `YYYY-MM-DDTHH:MM:SS` at the start of `b` as days since 1970-01-01 and the second of the
    /// day; `nil` unless it names a day of its month and a time of day.
    private static func wallClock(_ b: [UInt8]) -> (days: Int, secondOfDay: Int)? {
        guard b.count >= 19, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"), b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t"),
              b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":") else { return nil }
        guard let year = number(b, 0, 4), let month = number(b, 5, 2), let day = number(b, 8, 2),
              let hour = number(b, 11, 2), let minute = number(b, 14, 2), let second = number(b, 17, 2),
              year >= 1, (1...12).contains(month), hour < 24, minute < 60, second < 60 else { return nil }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        guard (1...days).contains(day) else { return nil }
        return (daysSinceEpoch(year: year, month: month, day: day), hour * 3600 + minute * 60 + second)
    }

    public static func digit(_ c: UInt8) -> Int? {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) ? Int(c - UInt8(ascii: "0")) : nil
    }

    /// The decimal number of `count` digits at `from`; `nil` if any of them is not a digit.
    public static func number(_ b: [UInt8], _ from: Int, _ count: Int) -> Int? {
        guard from + count <= b.count else { return nil }
        var n = 0
        for c in b[from..<(from + count)] {
            guard let d = digit(c) else { return nil }
            n = n * 10 + d
        }
        return n
    }

    /// An ISO 8601 time read from a decoder's single value; a decoding error for anything else.
    static func decodeText(_ c: any SingleValueDecodingContainer) throws -> Date {
        let text = try c.decode(String.self)
        guard let date = parse(text) else {
            throw DecodingError.dataCorruptedError(in: c, debugDescription: "not an ISO 8601 time: \(text.prefix(40))")
        }
        return date
    }

    /// Milliseconds since the Unix epoch.
    public static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
}

extension Int64 {
    /// Division rounding toward minus infinity (for times before 1970 too).
    func floorDiv(_ d: Int64) -> Int64 { self >= 0 ? self / d : -((-self + d - 1) / d) }
}
