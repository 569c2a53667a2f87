import Foundation

extension JSONEncoder {
    /// Both write the text themselves (`TextJSONEncoder`), and set Foundation's options to match
    /// for what they leave to it (`JSONText.configure`).
    private static let wireEncoder: JSONEncoder = TextJSONEncoder(dates: .text, escapeSlashes: false)
    private static let busEncoder: JSONEncoder = TextJSONEncoder(dates: .milliseconds, escapeSlashes: true)

    /// A new encoder with the bus's options (for callers that need their own `userInfo`).
    public static func makeBus() -> JSONEncoder {
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
    /// Reads the text itself first (`TextJSONDecoder`), and Foundation's options are set to match.
    private static let wireDecoder: JSONDecoder = TextJSONDecoder(dates: .text)

    private static let busDecoder = makeBus()

    /// A new decoder with the bus's options (for callers that need their own `userInfo`).
    public static func makeBus() -> JSONDecoder {
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
