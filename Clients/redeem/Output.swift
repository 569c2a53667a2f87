import Foundation
import RedeemKit

/// A list as the API writes it: `{data, nextCursor}`.
private struct Listed<Item: Encodable>: Encodable {
    var data: [Item]
    var nextCursor: String?

    private enum CodingKeys: String, CodingKey { case data, nextCursor }

    /// `nextCursor` is written as null on the last page, as the API does.
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(data, forKey: .data)
        try c.encode(nextCursor, forKey: .nextCursor)
    }
}

/// How answers are printed: tables for people, JSON for scripts (`--json`).
struct Output {
    var json: Bool

    static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        e.dateEncodingStrategy = .custom { date, encoder in
            var c = encoder.singleValueContainer()
            try c.encode(time(date))
        }
        return e
    }()

    static func time(_ date: Date?) -> String {
        date.map { $0.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)) } ?? ""
    }

    /// A JSON document, or a table with one row per item.
    func list<T: Encodable>(_ items: [T], nextCursor: String?, columns: [(String, (T) -> String)]) throws {
        if json {
            try write(Listed(data: items, nextCursor: nextCursor))
            return
        }
        print(Self.table(header: columns.map(\.0), rows: items.map { item in columns.map { $0.1(item) } }), terminator: "")
        if let nextCursor { print("more: --cursor \(nextCursor)") }
    }

    /// One object: JSON, or `name  value` lines.
    func one<T: Encodable>(_ item: T, fields: [(String, String)]) throws {
        if json { return try write(item) }
        let width = fields.map(\.0.count).max() ?? 0
        for (name, value) in fields { print(name.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + value) }
    }

    /// A sentence for people, `{"ok": true, …}` for scripts.
    func done(_ sentence: String, _ fields: [String: String] = [:]) throws {
        if json {
            var all: [String: Any] = fields
            all["ok"] = true
            let data = try JSONSerialization.data(withJSONObject: all, options: [.sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        } else {
            print(sentence)
        }
    }

    func write<T: Encodable>(_ value: T) throws {
        print(String(decoding: try Self.encoder.encode(value), as: UTF8.self))
    }

    static func table(header: [String], rows: [[String]]) -> String {
        var widths = header.map(\.count)
        for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { i, c in i == cells.count - 1 ? c : c.padding(toLength: widths[i], withPad: " ", startingAt: 0) }
                .joined(separator: "  ") + "\n"
        }
        return line(header) + rows.map(line).joined() + (rows.isEmpty ? "(none)\n" : "")
    }
}

extension Money {
    var text: String { "\(amount) \(currency)" }
}

extension Coupon {
    var discount: String {
        switch kind {
        case .freePeriod: "\(duration.count) \(duration.unit) free"
        case .percentOff: "\(percentOff ?? 0)% off × \(periodCount ?? 1) \(duration.unit)"
        case .amountOff: "\(amountOff?.text ?? "?") off × \(periodCount ?? 1) \(duration.unit)"
        case .unknown: kind.rawValue
        }
    }
    var uses: String { "\(redeemedCount)/\(maxRedemptions.map(String.init) ?? "∞")" }
}
