import Core
import Foundation

/// A value that can be sent as a query parameter, in PostgreSQL's text format.
/// Parameters are always sent separately from the SQL text (`$1`, `$2`, …).
public protocol PGBindable: Sendable {
    var pgText: String? { get }
    /// Adds the value to a statement's parameters: by default as its text (`pgText`).
    func bind(into parameters: inout PGParameters)
}

extension PGBindable {
    public func bind(into parameters: inout PGParameters) { parameters.append(text: pgText) }
}

extension String: PGBindable { public var pgText: String? { self } }
extension Int: PGBindable { public var pgText: String? { String(self) } }
extension Int64: PGBindable { public var pgText: String? { String(self) } }
extension Int32: PGBindable { public var pgText: String? { String(self) } }
extension Double: PGBindable { public var pgText: String? { String(self) } }
extension Bool: PGBindable { public var pgText: String? { self ? "t" : "f" } }
extension UUID: PGBindable { public var pgText: String? { lowercasedString } }
extension Date: PGBindable { public var pgText: String? { Timestamp.iso8601(self) } }
extension Decimal: PGBindable { public var pgText: String? { "\(self)" } }
extension Optional: PGBindable where Wrapped: PGBindable {
    public var pgText: String? { self.flatMap { $0.pgText } }
    public func bind(into parameters: inout PGParameters) {
        if let self { self.bind(into: &parameters) } else { parameters.append(text: nil) }
    }
}

/// A byte string sent as `bytea` (hex text format).
public struct PGBytes: PGBindable, Hashable {
    public let data: Data
    public init(_ data: Data) { self.data = data }
    public var pgText: String? { "\\x" + data.map { String(format: "%02x", $0) }.joined() }
}

/// A value decoded from a column's text representation.
public protocol PGDecodable {
    init?(pgText: String)
}

extension String: PGDecodable { public init?(pgText: String) { self = pgText } }
extension Int: PGDecodable { public init?(pgText: String) { self.init(pgText) } }
extension Int64: PGDecodable { public init?(pgText: String) { self.init(pgText) } }
extension Int32: PGDecodable { public init?(pgText: String) { self.init(pgText) } }
extension Double: PGDecodable { public init?(pgText: String) { self.init(pgText) } }
extension Decimal: PGDecodable { public init?(pgText: String) { self.init(string: pgText, locale: Locale(identifier: "en_US_POSIX")) } }
extension Bool: PGDecodable {
    public init?(pgText: String) {
        switch pgText {
        case "t", "true": self = true
        case "f", "false": self = false
        default: return nil
        }
    }
}
extension UUID: PGDecodable { public init?(pgText: String) { self.init(parsing: pgText) } }
extension Date: PGDecodable {
    /// Reads `timestamptz` output. The pool sets `TimeZone=UTC` and `DateStyle=ISO`, so values look
    /// like `2026-11-30 06:19:33.123456+00`.
    public init?(pgText: String) {
        guard let d = PGTime.parse(pgText) else { return nil }
        self = d
    }
}
extension PGBytes: PGDecodable {
    public init?(pgText: String) {
        guard pgText.hasPrefix("\\x") else { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity((pgText.utf8.count - 2) / 2)
        var it = pgText.utf8.dropFirst(2).makeIterator()
        while let hi = it.next() {
            guard let lo = it.next(), let h = PGBytes.nibble(hi), let l = PGBytes.nibble(lo) else { return nil }
            bytes.append(h << 4 | l)
        }
        self.init(Data(bytes))
    }
    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 48...57: return c - 48
        case 97...102: return c - 87
        case 65...70: return c - 55
        default: return nil
        }
    }
}

enum PGTime {
    /// Parses `YYYY-MM-DD HH:MM:SS[.ffffff]+TZ[:MM]` as printed with DateStyle ISO (a year may have
    /// more than four digits: a row that cannot be read would stop every query that reads it).
    static func parse(_ s: String) -> Date? {
        let u = Array(s.utf8)
        func num(_ from: Int, _ len: Int) -> Int? { Timestamp.number(u, from, len) }
        // Years past 9999 print with more digits (`10026-12-01 …`); every field after moves along.
        guard let dash = u.firstIndex(of: UInt8(ascii: "-")), dash >= 4 else { return nil }
        let o = dash - 4
        guard u.count >= 19 + o, let y = num(0, 4 + o), let mo = num(5 + o, 2), let d = num(8 + o, 2),
              let h = num(11 + o, 2), let mi = num(14 + o, 2), let se = num(17 + o, 2) else { return nil }
        var i = 19 + o
        var frac = 0.0
        if i < u.count, u[i] == UInt8(ascii: ".") {
            i += 1
            var scale = 0.1
            while i < u.count, u[i] >= 48, u[i] <= 57 {
                frac += Double(u[i] - 48) * scale
                scale /= 10
                i += 1
            }
        }
        var offset = 0
        if i < u.count, u[i] == UInt8(ascii: "+") || u[i] == UInt8(ascii: "-") {
            let sign = u[i] == UInt8(ascii: "+") ? 1 : -1
            guard let oh = num(i + 1, 2) else { return nil }
            var om = 0
            if i + 3 < u.count, u[i + 3] == UInt8(ascii: ":"), let m = num(i + 4, 2) { om = m }
            offset = sign * (oh * 3600 + om * 60)
        }
        guard (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, se < 61 else { return nil }
        let seconds = (Timestamp.daysSinceEpoch(year: y, month: mo, day: d) * 86_400 + h * 3600 + mi * 60 + se - offset)
        return Date(timeIntervalSince1970: Double(seconds) + frac)
    }
}

/// A one-dimensional `text[]` parameter and parser for its text output.
public struct PGArray: PGBindable {
    public let items: [String?]
    public init(_ items: [String]) { self.items = items }
    /// An array whose nil elements are SQL NULLs.
    public init(optionals items: [String?]) { self.items = items }

    /// The array literal: every element quoted, with its quotes and backslashes escaped, in one pass
    /// over the bytes (batches carry hundreds of JSON payloads, full of quotes).
    public var pgText: String? {
        var out: [UInt8] = [UInt8(ascii: "{")]
        out.reserveCapacity(items.reduce(2) { $0 + ($1?.utf8.count ?? 4) + 3 })
        for (i, item) in items.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            guard var item else {
                out.append(contentsOf: "NULL".utf8)
                continue
            }
            out.append(UInt8(ascii: "\""))
            item.withUTF8 { bytes in
                // Runs between escapes are copied at once (a grant command's payload is 600 bytes).
                var copied = 0
                for at in bytes.indices where bytes[at] == UInt8(ascii: "\"") || bytes[at] == UInt8(ascii: "\\") {
                    out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[copied..<at]))
                    out.append(UInt8(ascii: "\\"))
                    copied = at
                }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[copied...]))
            }
            out.append(UInt8(ascii: "\""))
        }
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    /// Parses `{a,"b c","d\"e"}` (PostgreSQL's output for text[]).
    public static func parse(_ text: String) -> [String] {
        var out: [String] = []
        var chars = Array(text)
        guard chars.first == "{", chars.last == "}" else { return [] }
        chars = Array(chars.dropFirst().dropLast())
        guard !chars.isEmpty else { return [] }
        var i = 0
        while i < chars.count {
            var item = ""
            if chars[i] == "\"" {
                i += 1
                while i < chars.count, chars[i] != "\"" {
                    if chars[i] == "\\", i + 1 < chars.count { i += 1 }
                    item.append(chars[i])
                    i += 1
                }
                i += 1  // closing quote
            } else {
                while i < chars.count, chars[i] != "," {
                    item.append(chars[i])
                    i += 1
                }
            }
            out.append(item)
            i += 1  // comma
        }
        return out
    }
}

/// A closed set of values stored as its text (a CHECK constraint keeps the column to the same set):
/// bound as its raw value, and read back only when the text is one of its cases.
public protocol PGTextEnum: PGBindable, PGDecodable, RawRepresentable where RawValue == String {}

extension PGTextEnum {
    public var pgText: String? { rawValue }
    public init?(pgText: String) { self.init(rawValue: pgText) }
}

extension Platform: PGTextEnum {}
extension CouponKind: PGTextEnum {}
extension RedemptionStatus: PGTextEnum {}
extension WebhookEventType: PGTextEnum {}
extension WebhookDeliveryStatus: PGTextEnum {}
