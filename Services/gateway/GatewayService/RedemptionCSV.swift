import Core
import Foundation

/// Redemptions as CSV (RFC 4180): every field quoted when it holds a comma, quote, CR or LF,
/// quotes doubled; a cell that would start with `=`, `+`, `-` or `@` gets a leading `'` so a
/// spreadsheet never runs it as a formula. Ids are written as the JSON API and the
/// webhooks write them, so rows can be joined with either.
enum RedemptionCSV {
    static let columns = [
        "redemptionId", "code", "accountId", "appUserId", "platform", "productId", "pricePaid", "currency", "status",
        "sandbox", "reservedAt", "completedAt", "uniqueCodeLast4", "couponName", "couponMetadata"
    ]

    static var header: String { line(columns) }

    /// A redemption of `coupon`, with the coupon's name and its metadata as a JSON object (keys sorted).
    static func row(_ r: RedemptionView, of coupon: CouponView?) -> String {
        line([
            r.redemptionId.uppercasedString, r.code, r.accountId?.uppercasedString ?? "", r.appUserId ?? "", r.platform.rawValue,
            r.productId ?? "", r.pricePaid?.amount ?? "", r.pricePaid?.currency ?? "", r.status.rawValue, r.sandbox ? "true" : "false",
            Timestamp.iso8601(r.reservedAt), r.completedAt.map(Timestamp.iso8601) ?? "", r.uniqueCodeLast4 ?? "",
            coupon?.name ?? "", metadataText(coupon?.metadata ?? [:]),
        ])
    }

    static func metadataText(_ metadata: [String: String]) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(metadata)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    static func line(_ cells: [String]) -> String { cells.map(cell).joined(separator: ",") + "\r\n" }

    static func cell(_ raw: String) -> String {
        var value = raw
        if let first = value.first, "=+-@".contains(first) { value = "'" + value }
        guard value.contains(where: { $0 == "," || $0 == "\"" || $0 == "\r" || $0 == "\n" }) else { return value }
        return "\"" + value.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
