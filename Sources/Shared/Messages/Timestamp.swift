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

    /// Parses with or without fractional seconds; `nil` for anything else.
    public static func parse(_ text: String) -> Date? {
        (try? style.parse(text)) ?? (try? plainStyle.parse(text))
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
