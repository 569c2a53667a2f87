import Foundation

/// Where a page of a list ended: the last row's time in microseconds since 1970 and its id, the
/// keys every list sorts on. Clients see it as an opaque `nextCursor`, base64url of
/// "microseconds|id" (exact, unlike a formatted time).
public struct KeysetCursor: Sendable, Equatable {
    public var micros: Int64
    public var id: UUID

    /// Times a cursor may carry. Rows get theirs from `now()`, so one from before 1970 was never
    /// given out; up to 2^53 µs (the year 2255) PostgreSQL turns it back into a time exactly (it
    /// multiplies in float8), and a time far outside its range would fail the query with a 500.
    public static let micros: ClosedRange<Int64> = 0...((1 << 53) - 1)

    public static let invalid = ServiceError(.invalid, "cursor is not one this API gave out", field: "cursor")

    public init(micros: Int64, id: UUID) {
        self.micros = micros
        self.id = id
    }

    public var text: String { Base64URL.encode(Array("\(micros)|\(id.lowercasedString)".utf8)) }

    /// Reads a cursor this API gave out, or throws `invalid` on `cursor`: anything that is not
    /// the exact text `text` writes (another spelling of the number or id, padding, trailing bytes)
    /// or whose time is out of range, before it gets near a query.
    public init(parsing text: String) throws {
        guard text.utf8.count <= 128, let bytes = Base64URL.decode(text), let s = String(bytes: bytes, encoding: .utf8) else { throw Self.invalid }
        let parts = s.split(separator: "|", omittingEmptySubsequences: false)
        guard parts.count == 2, let micros = Int64(parts[0]), Self.micros.contains(micros), let id = UUID(parsing: parts[1]) else {
            throw Self.invalid
        }
        self.init(micros: micros, id: id)
        guard self.text == text else { throw Self.invalid }
    }
}

/// One request for a page of a list sorted newest first by (time, id) (`limit` 1–100,
/// default 20; `nextCursor` null on the last page). Checks the limit and cursor before any query,
/// so nothing a client sends reaches PostgreSQL as a value it refuses.
///
///     let keyset = try Keyset(limit: req.limit, cursor: req.cursor)
///     let rows = try c.query("""
///         SELECT id, …, \(Keyset.micros("t.created_at")) AS created_us FROM t
///         WHERE \(Keyset.condition(time: "t.created_at", id: "t.id", parameter: 1))
///         ORDER BY t.created_at DESC, t.id DESC LIMIT $3
///         """, [keyset.afterMicros, keyset.afterId, keyset.fetch]).rows
///     return try keyset.page(rows, micros: "created_us", view)
public struct Keyset: Sendable {
    public static let defaultLimit = 20
    public static let maxLimit = 100

    public let limit: Int
    public let after: KeysetCursor?

    /// `limit` nil (a caller from before the list had pages) is the default. `maxLimit` is larger
    /// only for internal callers that read a whole list a page at a time (the CSV export).
    public init(limit: Int?, cursor: String?, maxLimit: Int = Keyset.maxLimit) throws {
        let limit = limit ?? Self.defaultLimit
        guard (1...maxLimit).contains(limit) else {
            throw ServiceError(.invalid, "limit must be a whole number from 1 to \(maxLimit)", field: "limit")
        }
        self.limit = limit
        after = try cursor.map(KeysetCursor.init(parsing:))
    }

    /// Rows to ask for: one more than a page, to learn whether another follows.
    public var fetch: Int { limit + 1 }
    public var afterMicros: Int64? { after?.micros }
    public var afterId: UUID? { after?.id }

    /// SQL that keeps the rows after the cursor in the list's order, `(time, id)` below it (above it
    /// when `ascending`), with the cursor's micros as parameter `$parameter` and its id as the next
    /// one; it keeps every row when they are null (the first page).
    public static func condition(time: String, id: String, parameter n: Int, ascending: Bool = false) -> String {
        "($\(n)::bigint IS NULL OR (\(time), \(id)) \(ascending ? ">" : "<") ('epoch'::timestamptz + $\(n)::bigint * interval '1 microsecond', $\(n + 1)::uuid))"
    }

    /// SQL for a row's time in whole microseconds since 1970, the cursor's time.
    public static func micros(_ time: String) -> String { "(extract(epoch FROM \(time)) * 1000000)::bigint" }
}
