import Foundation
import TestSupport
import Testing
@testable import Core
@testable import Database

/// List pages: the cursor accepts only what the API gave out, the limit only 1–100,
/// and against a real PostgreSQL a walk by cursor sees every row once, ties in time included.
@Suite(.serialized) struct KeysetTests {
    static let id = UUID(uuidString: "b8f0c8fa-f9ad-407d-96e3-be8ea6477056")!

    static func forged(_ text: String) -> String { Base64URL.encode(Array(text.utf8)) }

    @Test func aCursorReadsBackToItsTimeAndId() throws {
        let c = KeysetCursor(micros: 1_764_483_573_123_456, id: Self.id)
        #expect(try KeysetCursor(parsing: c.text) == c)
        #expect(!c.text.contains("|"), "opaque: not the raw keys")
        let edges = [KeysetCursor.micros.lowerBound, KeysetCursor.micros.upperBound]
        for micros in edges { #expect(try KeysetCursor(parsing: KeysetCursor(micros: micros, id: Self.id).text).micros == micros) }
    }

    @Test func anythingTheAPIDidNotGiveOutIsInvalidOnCursor() {
        let id = Self.id.lowercasedString
        let bad = [
            "", "garbage", "zzz", "-1", "1.5", "0", "20", "MjA", "%%%", String(repeating: "A", count: 4000),
            Self.forged("9223372036854775807|\(id)"), Self.forged("-9223372036854775808|\(id)"),
            Self.forged("99999999999999999999|\(id)"), Self.forged("-1|\(id)"), Self.forged("\(1 << 53)|\(id)"),
            Self.forged("1.5|\(id)"), Self.forged("+5|\(id)"), Self.forged("05|\(id)"), Self.forged("5|\(id.uppercased())"),
            Self.forged("5|\(id)|6"), Self.forged("5|"), Self.forged("|\(id)"), Self.forged("5|not-a-uuid"), Self.forged("5"),
            KeysetCursor(micros: 5, id: Self.id).text + "=", KeysetCursor(micros: 5, id: Self.id).text + "A",
        ]
        for text in bad {
            #expect(throws: KeysetCursor.invalid, "\(text.prefix(40))") { try KeysetCursor(parsing: text) }
            #expect(throws: KeysetCursor.invalid) { try Keyset(limit: 20, cursor: text) }
        }
        #expect(KeysetCursor.invalid.field == "cursor")
        #expect(KeysetCursor.invalid.code == .invalid)
    }

    @Test func theLimitIsOneToOneHundredAndTwentyByDefault() throws {
        #expect(try Keyset(limit: nil, cursor: nil).limit == 20)
        #expect(try Keyset(limit: 1, cursor: nil).fetch == 2)
        #expect(try Keyset(limit: 100, cursor: nil).limit == 100)
        for n in [0, -1, 101, Int.max] {
            #expect(throws: ServiceError(.invalid, "limit must be a whole number from 1 to 100", field: "limit")) {
                try Keyset(limit: n, cursor: nil)
            }
        }
        #expect(try Keyset(limit: 500, cursor: nil, maxLimit: 500).limit == 500)
    }

    /// Rows sharing one time (one transaction's `now()`) are split across pages by id; every row
    /// comes exactly once, newest first, and the last page has no cursor.
    @Test func aWalkByCursorSeesEveryRowOnceWithTiesInTime() async throws {
        let pool = PGPool(url: try await TestPostgres.shared().freshDatabase(), maxConnections: 1)
        defer { pool.close() }
        try await pool.query("CREATE TABLE t (id uuid PRIMARY KEY, created_at timestamptz NOT NULL)")
        try await pool.query("""
            INSERT INTO t SELECT gen_random_uuid(), '2025-11-30 06:19:33.123456+00'::timestamptz + (g / 4) * interval '1 microsecond'
            FROM generate_series(1, 23) g
            """)
        let expected = try await pool.query("SELECT id FROM t ORDER BY created_at DESC, id DESC").rows.map { try $0.decode("id", as: UUID.self) }
        for limit in [1, 2, 4, 7, 23, 100] {
            var seen: [UUID] = []
            var cursor: String?
            var pages = 0
            repeat {
                let keyset = try Keyset(limit: limit, cursor: cursor)
                let rows = try await pool.query("""
                    SELECT id, \(Keyset.micros("created_at")) AS created_us FROM t
                    WHERE \(Keyset.condition(time: "created_at", id: "id", parameter: 1))
                    ORDER BY created_at DESC, id DESC LIMIT $3
                    """, [keyset.afterMicros, keyset.afterId, keyset.fetch]).rows
                let page = try keyset.page(rows, micros: "created_us") { try $0.decode("id", as: UUID.self) }
                #expect(page.data.count == limit || page.nextCursor == nil)
                seen += page.data
                cursor = page.nextCursor
                pages += 1
            } while cursor != nil && pages < 100
            #expect(seen == expected, "limit \(limit)")
            #expect(pages == (23 + limit - 1) / limit)
        }
    }

    /// The extreme times a cursor may carry make a query PostgreSQL answers (no "timestamp out of
    /// range"), in both directions.
    @Test func theExtremeCursorTimesAreQueriesPostgreSQLAnswers() async throws {
        let pool = PGPool(url: try await TestPostgres.shared().freshDatabase(), maxConnections: 1)
        defer { pool.close() }
        for micros in [KeysetCursor.micros.lowerBound, KeysetCursor.micros.upperBound] {
            for ascending in [false, true] {
                let row = try await pool.query("""
                    SELECT count(*) AS n FROM (VALUES (now(), $3::uuid)) AS t(created_at, id)
                    WHERE \(Keyset.condition(time: "created_at", id: "id", parameter: 1, ascending: ascending))
                    """, [micros, Self.id, Self.id]).first
                #expect(try row?.decode("n", as: Int.self) == (ascending == (micros == KeysetCursor.micros.lowerBound) ? 1 : 0))
            }
        }
    }
}
