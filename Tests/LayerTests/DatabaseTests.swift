import Foundation
import TestSupport
import Testing
@testable import Core
@testable import Database
@testable import Runtime

/// Against a real PostgreSQL cluster started for this test process.
@Suite(.serialized) struct DatabaseTests {
    let url: String

    init() async throws {
        url = try await TestPostgres.shared().freshDatabase()
    }

    @Test func parametersAreSentSeparatelyAndDecodedByType() async throws {
        let pool = PGPool(url: url, maxConnections: 2)
        defer { pool.close() }
        let hostile = "x'); DROP TABLE t; --"
        let when = Date(timeIntervalSince1970: 1_764_483_573.123)
        let row = try #require(try await pool.query(
            "SELECT $1::text AS s, $2::int AS i, $3::bool AS b, $4::timestamptz AS t, $5::uuid AS u, NULL::text AS n",
            [hostile, 42, true, when, UUID(uuidString: "6f9c2a0e-1b7d-4a53-9b7e-2d1c1f0a9e11")!]).first)
        #expect(try row.decode("s", as: String.self) == hostile)
        #expect(try row.decode("i", as: Int.self) == 42)
        #expect(try row.decode("b", as: Bool.self) == true)
        #expect(abs(try row.decode("t", as: Date.self).timeIntervalSince(when)) < 0.001)
        #expect(try row.decode("u", as: UUID.self).uuidString.lowercased() == "6f9c2a0e-1b7d-4a53-9b7e-2d1c1f0a9e11")
        #expect(try row.decodeIfPresent("n", as: String.self) == nil)
        #expect(throws: PGError.self) { try row.decode("n", as: String.self) }
        #expect(throws: PGError.self) { try row.decode("s", as: Int.self) }
    }

    /// Arrays reach the server element for element: quotes, backslashes, commas, braces, JSON,
    /// non-ASCII text, the word NULL and real NULLs.
    @Test func arraysRoundTripEveryElement() async throws {
        let pool = PGPool(url: url, maxConnections: 1)
        defer { pool.close() }
        let items: [String?] = [#"{"a":"b\"c"}"#, #"back\slash"#, "a,b", "{x}", "NULL", nil, "", "café ✓", " padded "]
        let rows = try await pool.query("SELECT u.v, u.n FROM unnest($1::text[]) WITH ORDINALITY AS u(v, n) ORDER BY u.n",
                                        [PGArray(optionals: items)]).rows
        #expect(try rows.map { try $0.decodeIfPresent("v", as: String.self) } == items)
    }

    /// Arrays in the binary format reach the server element for element, of each element type,
    /// with NULLs, empty, beside text parameters, prepared or not; and their text is `PGArray`'s.
    @Test func binaryArraysRoundTripEveryElement() async throws {
        let pool = PGPool(url: url, maxConnections: 1)
        defer { pool.close() }
        let texts: [String?] = [
            #"{"a":"b\"c"}"#, #"back\slash"#, "a,b", "NULL", nil, "", "café ✓", String(repeating: "x", count: 700),
        ]
        let ids: [UUID?] = [UUID(uuidString: "6f9c2a0e-1b7d-4a53-9b7e-2d1c1f0a9e11")!, nil, UUID.random()]
        let flags: [Bool?] = [true, false, nil]
        let numbers: [Int64?] = [0, -1, nil, Int64.max, Int64.min, 1 << 40]
        // Before 1970 and before 2000 (PostgreSQL's epoch), a leap day, beyond 9999; to the millisecond.
        let dates: [Date?] = [-86_400.123, 946_684_799.999, 951_782_400.5, nil, 1_764_483_573.1234, 253_402_300_800.25]
            .map { $0.map(Date.init(timeIntervalSince1970:)) }
        // A fraction, the extremes of magnitude (the least subnormal), a negative zero, π to the last bit.
        let doubles: [Double?] = [0.25, -1.5e300, nil, 30, .pi, 5e-324, -0.0, Double.greatestFiniteMagnitude]
        let sql = """
            SELECT (SELECT array_agg(coalesce(t, '<null>') ORDER BY n) FROM unnest($1::text[]) WITH ORDINALITY AS u(t, n)) AS texts,
                   (SELECT array_agg(coalesce(i::text, '<null>') ORDER BY n) FROM unnest($2::uuid[]) WITH ORDINALITY AS u(i, n)) AS ids,
                   (SELECT array_agg(coalesce(b::text, '<null>') ORDER BY n) FROM unnest($3::boolean[]) WITH ORDINALITY AS u(b, n)) AS flags,
                   (SELECT array_agg(coalesce(x::text, '<null>') ORDER BY n) FROM unnest($4::bigint[]) WITH ORDINALITY AS u(x, n)) AS numbers,
                   cardinality($5::uuid[]) AS empty, $6::text AS plain, $7::int AS number,
                   (SELECT array_agg(coalesce((extract(epoch FROM d) * 1000)::bigint::text, '<null>') ORDER BY n)
                    FROM unnest($8::timestamptz[]) WITH ORDINALITY AS u(d, n)) AS dates,
                   (SELECT array_agg(coalesce(x::text, '<null>') ORDER BY n)
                    FROM unnest($9::float8[]) WITH ORDINALITY AS u(x, n)) AS doubles,
                   (SELECT count(*)::int FROM unnest($9::float8[]) AS x WHERE x::text = '-0') AS negative_zeros
            """
        let params: [any PGBindable] = [
            PGBinaryArray.texts(texts), PGBinaryArray.uuids(ids), PGBinaryArray.bools(flags),
            PGBinaryArray.int8s(numbers), PGBinaryArray.uuids([]), "after", 7, PGBinaryArray.timestamps(dates),
            PGBinaryArray.float8s(doubles),
        ]
        for row in [
            try #require(try await pool.query(sql, params).first),
            try #require(try await pool.withConnection { try $0.prepared("binary_arrays", sql, params) }.first),
        ] {
            let read = { (column: String) throws in PGArray.parse(try row.decode(column, as: String.self)) }
            #expect(try read("texts") == texts.map { $0 ?? "<null>" })
            #expect(try read("ids") == ids.map { $0?.lowercasedString ?? "<null>" })
            #expect(try read("flags") == ["true", "false", "<null>"])
            #expect(try read("numbers") == numbers.map { $0.map { String($0) } ?? "<null>" })
            #expect(try row.decode("empty", as: Int.self) == 0)
            #expect(try row.decode("plain", as: String.self) == "after")
            #expect(try row.decode("number", as: Int.self) == 7)
            #expect(try read("dates") == dates.map { $0.map { String(Timestamp.milliseconds($0)) } ?? "<null>" })
            #expect(try read("doubles").map { $0 == "<null>" ? nil : Double($0) } == doubles, "every value as sent")
            #expect(try row.decode("negative_zeros", as: Int.self) == 1, "a negative zero stays negative")
        }
        #expect(PGBinaryArray.texts(texts).pgText == PGArray(optionals: texts).pgText)
        #expect(PGBinaryArray.bools([true, nil]).pgText == "{\"t\",NULL}")
        #expect(PGBinaryArray.float8s([0.25, nil, 1e-7]).pgText == "{\"0.25\",NULL,\"1e-07\"}")
        #expect(PGBinaryArray.timestamps([dates[4]]).pgText == "{\"2025-11-30T06:19:33.123Z\"}")
        // The element type is the parameter's: the server refuses another.
        await #expect(throws: PGError.self) { try await pool.query("SELECT $1::uuid[]", [PGBinaryArray.texts(["x"])]) }
    }

    /// Timestamps as PostgreSQL prints them read back to the instant it means, across leap days,
    /// centuries, dates before 1970 and offsets written in the text.
    @Test func timestampsReadBackToTheSameInstant() async throws {
        let pool = PGPool(url: url, maxConnections: 1)
        defer { pool.close() }
        let rows = try await pool.query("""
            SELECT t, extract(epoch FROM t)::float8 AS e FROM generate_series('1899-12-31 23:59:59.5+00'::timestamptz,
                '2401-03-01', interval '13 days 5 hours 7 minutes 11.123457 seconds') t
            """).rows
        #expect(rows.count > 13_000)
        for row in rows {
            let text = try #require(row["t"])
            #expect(abs(try row.decode("t", as: Date.self).timeIntervalSince1970 - (try row.decode("e", as: Double.self))) < 0.000_002, "\(text)")
        }
        for text in ["2024-02-29 12:00:00.25+05:30", "1969-12-31 23:00:00-01", "2000-02-29 00:00:00+00"] {
            let epoch = try await pool.query("SELECT extract(epoch FROM $1::timestamptz)::float8 AS e", [text]).first!.decode("e", as: Double.self)
            #expect(Date(pgText: text)?.timeIntervalSince1970 == epoch, "\(text)")
        }
        // Past year 9999 PostgreSQL prints more digits; such a row is still read (not a decoding
        // error that would stop every query reading it).
        let far = try #require(try await pool.query("SELECT '9999-12-31 00:00:00+00'::timestamptz + interval '27 years 2 months' AS t, "
                                                    + "extract(epoch FROM '9999-12-31 00:00:00+00'::timestamptz + interval '27 years 2 months')::float8 AS e").first)
        #expect(far["t"] == "10027-02-28 00:00:00+00")
        #expect(try far.decode("t", as: Date.self).timeIntervalSince1970 == (try far.decode("e", as: Double.self)))
        #expect(Date(pgText: "2024-13-01 00:00:00+00") == nil)
    }

    @Test func errorsCarrySQLStateAndConstraint() async throws {
        let pool = PGPool(url: url, maxConnections: 2)
        defer { pool.close() }
        try await pool.query("CREATE TABLE uniq (k text CONSTRAINT uniq_k UNIQUE)")
        try await pool.query("INSERT INTO uniq VALUES ($1)", ["a"])
        do {
            try await pool.query("INSERT INTO uniq VALUES ($1)", ["a"])
            Issue.record("duplicate accepted")
        } catch let e as PGError {
            #expect(e.sqlState == "23505")
            #expect(e.isUniqueViolation)
            #expect(e.constraint == "uniq_k")
        }
        do {
            try await pool.query("SELECT nope FROM uniq")
        } catch let e as PGError {
            #expect(e.sqlState == "42703")
        }
    }

    @Test func transactionsRollBackOnError() async throws {
        let pool = PGPool(url: url, maxConnections: 2)
        defer { pool.close() }
        try await pool.query("CREATE TABLE tx (v int)")
        struct Boom: Error {}
        await #expect(throws: Boom.self) {
            try await pool.transaction { c in
                try c.query("INSERT INTO tx VALUES (1)")
                throw Boom()
            }
        }
        try await pool.transaction { c in _ = try c.query("INSERT INTO tx VALUES (2)") }
        let values = try await pool.query("SELECT v FROM tx").rows.map { try $0.decode("v", as: Int.self) }
        #expect(values == [2])
    }

    /// BEGIN rides with a transaction's first statement and COMMIT with `preparedThenCommit`'s, in
    /// one pipeline each: a failure anywhere in one still rolls the whole transaction back, and
    /// the connection goes on working, its prepared statements known.
    @Test func pipelinedBeginAndCommitKeepTransactionsWhole() async throws {
        let pool = PGPool(url: url, maxConnections: 1)
        defer { pool.close() }
        try await pool.query("CREATE TABLE piped (k int PRIMARY KEY, n int NOT NULL DEFAULT 0)")
        let insert = "INSERT INTO piped (k) SELECT unnest($1::int[]) RETURNING k"
        let committed = try await pool.transaction { c in
            let before = try c.query("SELECT count(*) AS n FROM piped").first!.decode("n", as: Int.self)
            let rows = try c.preparedThenCommit("piped_insert", insert, [PGArray(["1", "2"])]).rows
            return (before, try rows.map { try $0.decode("k", as: Int.self) })
        }
        #expect(committed.0 == 0 && committed.1 == [1, 2])

        // The statement that would commit fails (k = 2 exists): the COMMIT is skipped, so the
        // update before it is rolled back as well.
        await #expect(throws: PGError.self) {
            try await pool.transaction { c in
                try c.query("UPDATE piped SET n = n + 1")
                try c.preparedThenCommit("piped_insert", insert, [PGArray(["3", "2"])])
            }
        }
        // The first statement of a transaction fails with BEGIN in the same round trip.
        await #expect(throws: PGError.self) {
            try await pool.transaction { c in try c.query("INSERT INTO piped (k) VALUES (NULL)") }
        }
        // A transaction without statements sends nothing and commits nothing.
        try await pool.transaction { _ in }
        _ = try await pool.transaction { c in try c.preparedThenCommit("piped_insert", insert, [PGArray(["4"])]) }
        // A statement not yet prepared, twice in one round trip: prepared once, and the second
        // run sees what the first wrote.
        let counts = try await pool.transaction { c in
            let count = "SELECT count(*) AS n FROM piped WHERE k > $1"
            return try c.preparedThenCommit([("piped_count", count, [0]), ("piped_insert", insert, [PGArray(["5"])]), ("piped_count", count, [0])])
                .map { try $0.first!.decode($0.columns[0], as: Int.self) }
        }
        #expect(counts == [3, 5, 4])
        let rows = try await pool.query("SELECT k, n FROM piped ORDER BY k").rows
        #expect(try rows.map { try $0.decode("k", as: Int.self) } == [1, 2, 4, 5])
        #expect(try rows.map { try $0.decode("n", as: Int.self) } == [0, 0, 0, 0])
        let open = try await pool.query("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'")
        #expect(try open.first!.decode("n", as: Int.self) == 0)
    }

    /// Statements sent in one round trip still run one after another: the second reads what a
    /// transaction committed while the first waited for its row lock (what a reservation batch
    /// relies on to see the uses the batch before it took).
    @Test func pipelinedStatementsReadWhatTheLockWaitedFor() async throws {
        let pool = PGPool(url: url, maxConnections: 2)
        defer { pool.close() }
        try await pool.query("CREATE TABLE lockrow (id int PRIMARY KEY)")
        try await pool.query("INSERT INTO lockrow VALUES (1)")
        try await pool.query("CREATE TABLE taken (n int)")
        let holder = try PGConnection(url: url)
        try holder.execute("BEGIN; SELECT id FROM lockrow WHERE id = 1 FOR UPDATE; INSERT INTO taken VALUES (1)")
        let waiter = Task {
            try await pool.transaction { c in
                try c.prepared([("lock_row", "SELECT id FROM lockrow WHERE id = $1 FOR UPDATE", [1]),
                                ("count_taken", "SELECT count(*) AS n FROM taken WHERE n > $1", [0])])[1].first!.decode("n", as: Int.self)
            }
        }
        // Wait until the pipeline is blocked on the row lock, then commit under it.
        var blocked = false
        for _ in 0..<500 where !blocked {
            blocked = try await pool.query("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")
                .first!.decode("n", as: Int.self) == 1
            if !blocked { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(blocked)
        try holder.execute("COMMIT")
        #expect(try await waiter.value == 1)
    }

    @Test func poolServesManyConcurrentCallersWithFewConnections() async throws {
        let pool = PGPool(url: url, maxConnections: 3)
        defer { pool.close() }
        let sum = try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<60 {
                group.addTask { try await pool.query("SELECT $1::int + 0 AS v, pg_sleep(0.01)", [i]).first!.decode("v", as: Int.self) }
            }
            return try await group.reduce(0, +)
        }
        #expect(sum == (0..<60).reduce(0, +))
        let backends = try await pool.query("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database()").first!.decode("n", as: Int.self)
        #expect(backends <= 3)
    }

    @Test func migrationsApplyOnceWhenInstancesStartTogether() async throws {
        let migrator = Migrator(schema: "demo", migrations: [
            Migration(1, "table", "CREATE TABLE things (id int PRIMARY KEY)"),
            Migration(2, "column", "ALTER TABLE things ADD COLUMN name text"),
        ])
        let pools = (0..<4).map { _ in PGPool(url: url, maxConnections: 1) }
        defer { pools.forEach { $0.close() } }
        let applied = try await withThrowingTaskGroup(of: [Int].self) { group in
            for p in pools { group.addTask { try await migrator.apply(on: p) } }
            return try await group.reduce(into: [Int]()) { $0 += $1 }
        }
        #expect(applied.sorted() == [1, 2])
        let versions = try await pools[0].query("SELECT version FROM demo.schema_migrations ORDER BY version").rows.map { try $0.decode("version", as: Int.self) }
        #expect(versions == [1, 2])
        // The search_path of the migration put the table in the service's schema.
        try await pools[0].query("INSERT INTO demo.things (id, name) VALUES (1, 'a')")
    }

    /// A function's file is its one text: applied after the migrations at every start, so a changed
    /// file takes effect on the next start without a migration, in the service's schema.
    @Test func functionsAreAppliedAtEveryStartAfterTheMigrations() async throws {
        let pool = PGPool(url: url, maxConnections: 1)
        defer { pool.close() }
        let migrations = [Migration(1, "table", "CREATE TABLE answers (n int)")]
        func answer(_ n: Int) -> SQLFunction {
            SQLFunction("the_answer", "CREATE OR REPLACE FUNCTION the_answer() RETURNS int LANGUAGE sql AS $$ SELECT \(n) + coalesce((SELECT sum(n) FROM fns.answers), 0)::int $$")
        }
        #expect(try await Migrator(schema: "fns", migrations: migrations, functions: [answer(41)]).apply(on: pool) == [1])
        #expect(try await pool.query("SELECT fns.the_answer() AS a").first!.decode("a", as: Int.self) == 41)
        #expect(try await Migrator(schema: "fns", migrations: migrations, functions: [answer(42)]).apply(on: pool).isEmpty)
        #expect(try await pool.query("SELECT fns.the_answer() AS a").first!.decode("a", as: Int.self) == 42)
    }

    /// On a cluster of its own: stopping the shared one would fail whatever other suite is using it.
    @Test func poolRecoversAfterTheServerRestarts() async throws {
        let own = try await TestPostgres.ownCluster()
        let pool = PGPool(url: own.url, maxConnections: 2)
        defer { pool.close() }
        #expect(try await pool.query("SELECT 1 AS one").first!.decode("one", as: Int.self) == 1)
        await own.stop()
        await #expect(throws: PGError.self) { try await pool.query("SELECT 1") }
        try await own.start()
        // The idle connection died with the old server; the pool replaces it by itself.
        #expect(try await pool.query("SELECT 2 AS two").first!.decode("two", as: Int.self) == 2)
        pool.close()
        await own.remove()
    }
}
