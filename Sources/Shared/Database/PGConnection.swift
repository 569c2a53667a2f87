internal import CLibPQ
import Core
import Foundation

/// One libpq connection. Not thread-safe: a connection belongs to one caller at a time, which the
/// pool guarantees by handing it out exclusively (`PGPool.withConnection`).
public final class PGConnection {
    private let conn: OpaquePointer
    /// Names of statements prepared on this connection (prepared once per connection, then reused).
    private var prepared: Set<String> = []
    /// Statements sent since the pool handed this connection out (see `PGPool.withConnection`).
    var statementCount = 0

    public init(url: String) throws {
        // GSSAPI encryption is off unless the URL asks for it (`gssencmode=prefer`): looking for
        // Kerberos credentials on every connection costs time and loads Kerberos into each
        // service, for a setup Redeem's deployments don't use. Keywords before `dbname` are the
        // defaults the URL's own parameters override.
        let keywords: [String?] = ["gssencmode", "dbname", nil], values: [String?] = ["disable", url, nil]  // NULL-terminated
        // PQconnectdbParams always returns an object, which must be freed even when the connection failed.
        let c = withCStringArray(keywords) { k in withCStringArray(values) { v in PQconnectdbParams(k, v, 1) } }!
        guard PQstatus(c) == CONNECTION_OK else {
            let message = String(cString: PQerrorMessage(c)).trimmingCharacters(in: .whitespacesAndNewlines)
            PQfinish(c)
            throw PGError(kind: .connection, message: PGConnection.redact(message))
        }
        conn = c
        // Notices ("schema already exists, skipping") would go to stderr as plain text, between
        // the JSON log lines; they report nothing to act on.
        PQsetNoticeProcessor(c, { _, _ in }, nil)
        // Times are read back in one known format; see Date.init?(pgText:).
        _ = try execute("SET TimeZone = 'UTC'; SET DateStyle = 'ISO'")
    }

    deinit { PQfinish(conn) }

    /// Whether the connection is still usable (false after the server went away).
    public var isHealthy: Bool { !broken && PQstatus(conn) == CONNECTION_OK }

    /// Runs one parameterized statement. Values are never interpolated into `sql`.
    @discardableResult
    public func query(_ sql: String, _ params: [any PGBindable] = []) throws -> PGResult {
        try run([.statement(sql, PGParameters(params))])[0]
    }

    /// Runs a statement prepared once per connection under `name`. PostgreSQL soon settles on one
    /// generic plan for it, chosen with the statistics of that moment and kept until the table is
    /// analyzed again. A plan made while a table was small reads it sequentially, even by key, for
    /// as long as the statistics lag behind its growth: fine for tables that grow slowly, wrong
    /// for lookups into one a flash sale fills. Those use `query`, planned with its actual values
    /// each time, or a function planned with sequential scans off (coupons' batch lookups).
    @discardableResult
    public func prepared(_ name: String, _ sql: String, _ params: [any PGBindable]) throws -> PGResult {
        try prepared([(name, sql, params)])[0]
    }

    /// Runs prepared statements (as `prepared`) in one round trip, in order, and answers their
    /// results. Inside a transaction each still reads what the ones before it locked and wrote.
    public func prepared(_ statements: [PreparedStatement]) throws -> [PGResult] {
        let (steps, positions) = preparing(statements)
        let results = try run(steps)
        return positions.map { results[$0] }
    }

    public typealias PreparedStatement = (name: String, sql: String, params: [any PGBindable])

    /// Runs a prepared statement (as `prepared`) and commits the transaction in the same round
    /// trip: the last statement of a `transaction` body, which then sends no COMMIT of its own.
    /// A hot coupon's row lock is held until the commit, so every round trip saved there is
    /// time the next batch does not wait.
    @discardableResult
    public func preparedThenCommit(_ name: String, _ sql: String, _ params: [any PGBindable]) throws -> PGResult {
        try preparedThenCommit([(name, sql, params)])[0]
    }

    /// Runs prepared statements (as `prepared([...])`) and commits, all in one round trip.
    @discardableResult
    public func preparedThenCommit(_ statements: [PreparedStatement]) throws -> [PGResult] {
        precondition(state == .beginPending || state == .open, "preparedThenCommit outside a transaction")
        let (steps, positions) = preparing(statements)
        let results = try run(steps + [.statement("COMMIT", PGParameters([]))])
        state = .committed
        return positions.map { results[$0] }
    }

    /// Runs SQL text without parameters (several statements allowed). Only for fixed SQL such as migrations.
    @discardableResult
    public func execute(_ sql: String) throws -> PGResult {
        if state == .beginPending {
            state = .open
            _ = try PGResult.checked(PQexec(conn, "BEGIN"), conn: conn)
        }
        statementCount += 1
        return try PGResult.checked(PQexec(conn, sql), conn: conn)
    }

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws. BEGIN
    /// is not sent on its own: it travels with the body's first statement.
    public func transaction<T>(_ body: (PGConnection) throws -> T) throws -> T {
        precondition(state == .none, "transactions don't nest")
        state = .beginPending
        defer { state = .none }
        do {
            let value = try body(self)
            if state == .open { try execute("COMMIT") }
            return value
        } catch {
            if state == .open, isHealthy { _ = try? execute("ROLLBACK") }
            throw error
        }
    }

    // MARK: - Round trips

    /// Where the connection stands in `transaction`.
    private enum TransactionState { case none, beginPending, open, committed }
    private var state = TransactionState.none
    /// Set when a pipeline could not be sent or read whole: the connection's state is unknown, so
    /// it reports itself unhealthy and the pool drops it.
    private var broken = false

    /// One statement of a round trip.
    private enum Step {
        case statement(String, PGParameters)
        case prepare(name: String, sql: String, count: Int)
        case executePrepared(String, PGParameters)
    }

    /// The steps of several prepared statements (a statement used twice is prepared once), and
    /// where each one's result will be.
    private func preparing(_ statements: [PreparedStatement]) -> (steps: [Step], positions: [Int]) {
        var steps: [Step] = [], positions: [Int] = [], preparingNow = Set<String>()
        for s in statements {
            let new = !prepared.contains(s.name) && preparingNow.insert(s.name).inserted
            if new { steps.append(.prepare(name: s.name, sql: s.sql, count: s.params.count)) }
            steps.append(.executePrepared(s.name, PGParameters(s.params)))
            positions.append(steps.count - 1)
        }
        return (steps, positions)
    }

    /// Sends `steps` in one round trip, after the transaction's pending BEGIN, and answers their
    /// results in order. A single step goes alone; several go through libpq's pipeline mode,
    /// where the server runs them one after another (each statement with a snapshot of its own
    /// start) and skips every step after a failed one; the first failure is thrown.
    private func run(_ steps: [Step]) throws -> [PGResult] {
        precondition(state != .committed, "no statement after preparedThenCommit")
        var steps = steps
        var skip = 0
        if state == .beginPending {
            steps.insert(.statement("BEGIN", PGParameters([])), at: 0)
            skip = 1
            state = .open
        }
        statementCount += 1
        if steps.count == 1 { return [try finish(steps[0], executeAlone(steps[0]))] }

        guard PQenterPipelineMode(conn) == 1 else { throw lastError() }
        defer { PQexitPipelineMode(conn) }
        for step in steps where !queue(step) { throw lostPipeline() }
        guard PQpipelineSync(conn) == 1 else { throw lostPipeline() }
        var results: [PGResult] = []
        var failure: (any Error)?
        for (i, step) in steps.enumerated() {
            guard let res = PQgetResult(conn) else { throw lostPipeline() }
            if PQresultStatus(res) == PGRES_PIPELINE_ABORTED {
                PQclear(res)
            } else {
                do {
                    let result = try finish(step, res)
                    if i >= skip { results.append(result) }
                } catch {
                    failure = failure ?? error
                }
            }
            while let extra = PQgetResult(conn) { PQclear(extra) }  // a step's results end with NULL
        }
        guard let sync = PQgetResult(conn) else { throw lostPipeline() }
        let synced = PQresultStatus(sync) == PGRES_PIPELINE_SYNC
        PQclear(sync)
        guard synced else { throw lostPipeline() }
        if let failure { throw failure }
        guard results.count == steps.count - skip else { throw lostPipeline() }
        return results
    }

    private func executeAlone(_ step: Step) -> OpaquePointer? {
        switch step {
        case .statement(let sql, let params):
            params.withPointers { PQexecParams(conn, sql, $0, nil, $1, $2, $3, 0) }
        case .prepare(let name, let sql, let count):
            PQprepare(conn, name, sql, Int32(count), nil)
        case .executePrepared(let name, let params):
            params.withPointers { PQexecPrepared(conn, name, $0, $1, $2, $3, 0) }
        }
    }

    /// Queues a step in the pipeline (sent by `PQpipelineSync`).
    private func queue(_ step: Step) -> Bool {
        switch step {
        case .statement(let sql, let params):
            params.withPointers { PQsendQueryParams(conn, sql, $0, nil, $1, $2, $3, 0) } == 1
        case .prepare(let name, let sql, let count):
            PQsendPrepare(conn, name, sql, Int32(count), nil) == 1
        case .executePrepared(let name, let params):
            params.withPointers { PQsendQueryPrepared(conn, name, $0, $1, $2, $3, 0) } == 1
        }
    }

    /// Checks a step's result; a statement prepared successfully is remembered.
    private func finish(_ step: Step, _ res: OpaquePointer?) throws -> PGResult {
        let result = try PGResult.checked(res, conn: conn)
        if case .prepare(let name, _, _) = step { prepared.insert(name) }
        return result
    }

    private func lostPipeline() -> PGError {
        broken = true
        return lastError()
    }

    private func lastError() -> PGError {
        PGError(kind: .connection, message: String(cString: PQerrorMessage(conn)).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Connection URLs may carry a password; libpq messages don't, but be sure.
    static func redact(_ message: String) -> String {
        message.replacingOccurrences(of: #"password=\S+"#, with: "password=***", options: .regularExpression)
    }
}

/// Builds a C array of C strings that lives for the duration of `body`.
func withCStringArray<R>(_ strings: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) throws -> R) rethrows -> R {
    let owned = strings.map { $0.map { strdup($0)! } }
    defer { owned.forEach { free($0) } }
    let ptrs: [UnsafePointer<CChar>?] = owned.map { $0.map { UnsafePointer($0) } }
    return try ptrs.withUnsafeBufferPointer { try body($0.baseAddress) }
}

/// A query result copied out of libpq (the `PGresult` is cleared right away).
public struct PGResult: Sendable {
    public let columns: [String]
    public let rows: [PGRow]
    /// Rows affected, for INSERT/UPDATE/DELETE.
    public let affectedRows: Int

    static func checked(_ res: OpaquePointer?, conn: OpaquePointer) throws -> PGResult {
        guard let res else {
            throw PGError(kind: .connection, message: String(cString: PQerrorMessage(conn)).trimmingCharacters(in: .whitespacesAndNewlines))
        }
        defer { PQclear(res) }
        let status = PQresultStatus(res)
        guard status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK || status == PGRES_EMPTY_QUERY else {
            func field(_ code: Int32) -> String? { PQresultErrorField(res, code).map { String(cString: $0) } }
            let state = field(Int32(UInt8(ascii: "C")))
            let message = field(Int32(UInt8(ascii: "M"))) ?? String(cString: PQresultErrorMessage(res))
            let constraint = field(Int32(UInt8(ascii: "n")))
            let lost = PQstatus(conn) != CONNECTION_OK
            throw PGError(kind: lost ? .connection : .query, sqlState: state, message: message.trimmingCharacters(in: .whitespacesAndNewlines), constraint: constraint)
        }
        let nCols = Int(PQnfields(res))
        let nRows = Int(PQntuples(res))
        var columns = [String]()
        columns.reserveCapacity(nCols)
        for c in 0..<nCols { columns.append(String(cString: PQfname(res, Int32(c)))) }
        let index = PGRow.Index(columns)
        var rows = [PGRow]()
        rows.reserveCapacity(nRows)
        for r in 0..<nRows {
            var values = [String?]()
            values.reserveCapacity(nCols)
            for c in 0..<nCols {
                if PQgetisnull(res, Int32(r), Int32(c)) == 1 {
                    values.append(nil)
                } else {
                    values.append(String(cString: PQgetvalue(res, Int32(r), Int32(c))))
                }
            }
            rows.append(PGRow(index: index, values: values))
        }
        let affected = Int(String(cString: PQcmdTuples(res))) ?? 0
        return PGResult(columns: columns, rows: rows, affectedRows: affected)
    }

    public var first: PGRow? { rows.first }
}

/// One row, with typed access by column name.
public struct PGRow: Sendable {
    final class Index: Sendable {
        let positions: [String: Int]
        init(_ columns: [String]) {
            // Sized once: grown from empty, a result of 20 columns was hashed into five tables.
            var p = [String: Int](minimumCapacity: columns.count)
            for (i, c) in columns.enumerated() where p[c] == nil { p[c] = i }
            positions = p
        }
    }

    let index: Index
    public let values: [String?]

    /// The raw text of a column (nil for SQL NULL).
    public subscript(_ column: String) -> String? {
        guard let i = index.positions[column] else { return nil }
        return values[i]
    }

    /// A non-null column decoded as `T`; throws naming the column when it is missing, NULL or malformed.
    public func decode<T: PGDecodable>(_ column: String, as type: T.Type = T.self) throws -> T {
        guard let i = index.positions[column] else {
            throw PGError(kind: .decoding, message: "no column \(column)")
        }
        guard let text = values[i] else {
            throw PGError(kind: .decoding, message: "column \(column) is NULL")
        }
        guard let v = T(pgText: text) else {
            throw PGError(kind: .decoding, message: "column \(column) is not a \(T.self)")
        }
        return v
    }

    /// A nullable column decoded as `T`.
    public func decodeIfPresent<T: PGDecodable>(_ column: String, as type: T.Type = T.self) throws -> T? {
        guard let i = index.positions[column] else {
            throw PGError(kind: .decoding, message: "no column \(column)")
        }
        guard values[i] != nil else { return nil }
        return try decode(column, as: T.self)
    }
}
