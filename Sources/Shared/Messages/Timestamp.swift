import Foundation

/// Times on the wire: ISO 8601 UTC with milliseconds (SPEC §4), e.g. `2026-11-30T06:19:33.123Z`.
public enum Timestamp {
    private static let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt)
    private static let plainStyle = Date.ISO8601FormatStyle(timeZone: .gmt)

    /// Rounded to the nearest millisecond (a Double holds .293 as .29299…, which a formatter
    /// that truncates would print as .292).
    public static func iso8601(_ date: Date) -> String {
        let ms = milliseconds(date)
        let seconds = Date(timeIntervalSince1970: TimeInterval(ms.floorDiv(1000)))
        let whole = plainStyle.format(seconds)  // 2026-11-30T06:19:33Z
        let frac = ms - ms.floorDiv(1000) * 1000
        let digits = String(frac)
        return whole.dropLast() + "." + String(repeating: "0", count: 3 - digits.count) + digits + "Z"
    }

    /// Parses with or without fractional seconds; `nil` for anything else, including a date or
    /// time that does not exist (Foundation's parser moves February 30 to March 2 and 25:00 to the
    /// next day) and years beyond 9999 (which PostgreSQL cannot store).
    public static func parse(_ text: String) -> Date? {
        guard namesARealTime(text) else { return nil }
        return (try? style.parse(text)) ?? (try? plainStyle.parse(text))
    }

    /// Whether `text` begins `YYYY-MM-DDTHH:MM:SS` with a day of its month and a time of day.
    static func namesARealTime(_ text: String) -> Bool {
        let b = Array(text.utf8.prefix(19))
        guard b.count == 19, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"), b[10] == UInt8(ascii: "T"),
              b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":") else { return false }
        func number(_ r: Range<Int>) -> Int? {
            var n = 0
            for c in b[r] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) else { return nil }
                n = n * 10 + Int(c - UInt8(ascii: "0"))
            }
            return n
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              year >= 1, (1...12).contains(month), hour < 24, minute < 60, second < 60 else { return false }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        return (1...days).contains(day)
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

extension JSONEncoder {
    private static let wireEncoder: JSONEncoder = {
        let e = JSONEncoder()
        e.dateEncodingStrategy = .custom { date, encoder in
            var c = encoder.singleValueContainer()
            try c.encode(Timestamp.iso8601(date))
        }
        e.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
        return e
    }()

    private static let busEncoder = makeBus()

    /// A new encoder with the bus's options (for callers that need their own `userInfo`).
    static func makeBus() -> JSONEncoder {
        let e = JSONEncoder()
        e.dateEncodingStrategy = .millisecondsSince1970
        return e
    }

    /// The encoder of what leaves the system (HTTP bodies, webhooks): ISO 8601 dates with
    /// milliseconds, no escaped slashes, sorted keys. One shared instance (encoding is thread-safe
    /// and nobody changes its options).
    public static func wire() -> JSONEncoder { wireEncoder }

    /// The encoder of bus envelopes (and the outbox rows that hold them): dates as Unix
    /// milliseconds, which cost a fraction of formatting ISO 8601 text on every hop.
    public static var bus: JSONEncoder { busEncoder }
}

extension JSONDecoder {
    private static let wireDecoder: JSONDecoder = {
        let d = JSONDecoder()
        d.dateDecodingStrategy = .custom { try Timestamp.decodeText(try $0.singleValueContainer()) }
        return d
    }()

    private static let busDecoder = makeBus()

    /// A new decoder with the bus's options (for callers that need their own `userInfo`).
    static func makeBus() -> JSONDecoder {
        let d = JSONDecoder()
        d.dateDecodingStrategy = .custom { decoder in
            let c = try decoder.singleValueContainer()
            if let ms = try? c.decode(Double.self) { return Date(timeIntervalSince1970: ms / 1000) }
            // Envelopes written by earlier versions (outbox rows, grant commands) carry ISO 8601 text.
            return try Timestamp.decodeText(c)
        }
        return d
    }

    /// The decoder matching `JSONEncoder.wire()`.
    public static func wire() -> JSONDecoder { wireDecoder }

    /// The decoder matching `JSONEncoder.bus`.
    public static var bus: JSONDecoder { busDecoder }
}

extension Int64 {
    /// Division rounding toward minus infinity (for times before 1970 too).
    func floorDiv(_ d: Int64) -> Int64 { self >= 0 ? self / d : -((-self + d - 1) / d) }
}
