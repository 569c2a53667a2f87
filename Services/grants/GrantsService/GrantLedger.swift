import Core
import Database
import Foundation

/// A stored grant, as the worker sees it.
struct Grant: Sendable {
    let redemptionId: UUID
    let appUserId: String
    let entitlementId: String
    let provider: String
    let endTime: Date
    let status: GrantStatus
    let attempts: Int
    let failureReason: String?
    let command: GrantCommand
    /// The span the command was received in (or, for a grant claimed from the table, sent from):
    /// the provider's call joins that trace.
    var traceparent: String? = nil

    var endTimeMs: Int64 { Timestamp.milliseconds(endTime) }
}

/// Where a grant is: waiting for (another) provider call, or settled for good. A closed set: the
/// column's CHECK constraint holds the same values.
enum GrantStatus: String, Sendable, CaseIterable, PGTextEnum {
    case pending, succeeded, failed
}

/// A grant command and the text the ledger keeps of it: the bus message it arrived in, as it
/// arrived, so storing it costs no second encoding (re-encoding each command was a tenth of
/// grants' CPU per completion).
struct ReceivedCommand: Sendable {
    let command: GrantCommand
    let text: String
    /// The span it is handled in.
    let traceparent: String?

    init(_ command: GrantCommand, message: Data, traceparent: String? = LogContext.trace?.traceparent) {
        self.command = command
        self.traceparent = traceparent
        // The ledger keeps text. Commands come from the coupons outbox as JSON, pushed at once with
        // their binary form, which the router decodes (`BusContext.message` is then the JSON). A
        // binary envelope alone (a router takes both formats) is kept as the same envelope in JSON.
        if BusBinary.isBinary(message),
           let envelope = try? BusBinary.decode(Envelope<GrantCommand>.self, from: message),
           let json = try? JSONEncoder.bus.encode(envelope) {
            text = String(decoding: json, as: UTF8.self)
        } else {
            text = String(decoding: message, as: UTF8.self)
        }
    }

    /// A command as the ledger keeps it: the envelope it arrived in (with the span it was sent
    /// from), or the command alone (rows stored by earlier versions).
    static func decodeStored(_ text: String) throws -> (command: GrantCommand, traceparent: String?) {
        let stored = try JSONDecoder.bus.decode(Stored.self, from: Data(text.utf8))
        return (stored.command, stored.traceparent)
    }

    private struct Stored: Decodable {
        let command: GrantCommand
        let traceparent: String?
        private enum Keys: String, CodingKey { case body, traceparent }
        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: Keys.self)
            command = c.contains(.body) ? try c.decode(GrantCommand.self, forKey: .body) : try GrantCommand(from: decoder)
            traceparent = c.contains(.body) ? try c.decodeIfPresent(String.self, forKey: .traceparent) : nil
        }
    }
}

/// The grant ledger in SQL: one grant per redemption (primary key), `end_time` computed once.
enum GrantLedger {
    /// Stores commands unless their redemptions have a grant already. A period starts where the
    /// holder's latest Redeem grant of the entitlement ends, or now. Each holder's lock
    /// is taken first, all in one statement and in one order (so two instances storing
    /// overlapping batches cannot deadlock); then one insert per round, where round n holds each
    /// holder's n-th command, so a holder's second coupon extends from its first.
    ///
    /// A grant whose provider has no rate limit is stored leased for `lease` seconds (its first
    /// attempt counted) and answered, so the caller's worker calls the provider at once without
    /// claiming it back from the table; if that worker dies, the lease runs out and any worker
    /// claims it. The others are stored due, for `claimDue`.
    ///
    /// It ends the caller's transaction: the locks, every round and the COMMIT go to the database
    /// in one round trip.
    static func store(_ tx: PGConnection, _ received: [ReceivedCommand], provider: (GrantCommand) -> String,
                      lease: (String) -> TimeInterval?) throws -> [Grant] {
        guard !received.isEmpty else { return [] }
        // A holder's periods run per app (an account is shared by every app, an entitlement is one app's).
        let holderRest = { (c: GrantCommand) in
            let app = DefaultApp.of(c.app)
            return app == DefaultApp.id
                ? "|\(c.entitlementId)|\(c.sandbox)" : "|\(app.lowercasedString)|\(c.entitlementId)|\(c.sandbox)"
        }
        let holder = { (c: GrantCommand) in "grants.holder.\(c.appUserId)" + holderRest(c) }
        let commands = received.map(\.command)
        // Each round keeps the commands' texts beside them, in the same order.
        var rounds: [[GrantCommand]] = [], texts: [[String]] = []
        var seen: [String: Int] = [:]
        // In the order of the ids (their bytes: making their text at each comparison was 2 µs per
        // completed redemption).
        for r in received.sorted(by: { $0.command.redemptionId.precedes($1.command.redemptionId) }) {
            let n = seen[holder(r.command), default: 0]
            seen[holder(r.command)] = n + 1
            if n == rounds.count { rounds.append([]); texts.append([]) }
            rounds[n].append(r.command)
            texts[n].append(r.text)
        }
        // The accounts' shared locks (an account's move takes it alone, `move`), the holders' locks
        // (under the id a moved holder took), then every round, and the commit, in one round trip:
        // each round is a statement of its own, so it reads the periods the rounds before it stored.
        let accounts = PGBinaryArray.texts(commands.map { $0.accountId.lowercasedString })
        var statements: [PGConnection.PreparedStatement] = [("lock_accounts", """
            SELECT pg_advisory_xact_lock_shared(\(moveLockClass), a) FROM (SELECT DISTINCT hashtext(k) AS a FROM unnest($1::text[]) AS k ORDER BY a) locks
            """, [accounts]), ("lock_holders", """
            SELECT pg_advisory_xact_lock(h) FROM (
                SELECT DISTINCT hashtext('grants.holder.' || coalesce(m.to_app_user_id, k.app) || k.rest) AS h
                FROM unnest($1::text[], $2::text[]) AS k(app, rest) LEFT JOIN grants.holder_moves m ON m.from_app_user_id = k.app
                ORDER BY h) locks
            """, [PGBinaryArray.texts(commands.map(\.appUserId)), PGBinaryArray.texts(commands.map(holderRest))])]
        let providers = rounds.map { $0.map(provider) }
        // One binary array per column: the commands' texts go as they are, where a round as one
        // JSON value had each escaped by grants and parsed twice by PostgreSQL (`json_in`, then
        // `json_to_recordset`: 8.6 µs of its CPU per completed redemption).
        for (i, (round, roundProviders)) in zip(rounds, providers).enumerated() {
            let items = zip(round, zip(roundProviders, texts[i])).map { c, pt in
                RoundItem(c, provider: pt.0, text: pt.1, lease: lease(pt.0))
            }
            statements.append(("store_round_columns", """
                SELECT redemption_id, end_time, attempts, app_user_id
                FROM grants.store_round_columns($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
                """, RoundItem.columns(items)))
        }
        let results = try tx.preparedThenCommit(statements)
        var leased: [Grant] = []
        let traces = Dictionary(
            received.map { ($0.command.redemptionId, $0.traceparent) }, uniquingKeysWith: { a, _ in a })
        for (i, round) in rounds.enumerated() {
            let byId = Dictionary(zip(round.map(\.redemptionId), zip(round, providers[i])), uniquingKeysWith: { a, _ in a })
            for row in results[i + 2].rows where try row.decode("attempts", as: Int.self) == 1 {
                let id: UUID = try row.decode("redemption_id")
                guard let (c, p) = byId[id] else { continue }
                leased.append(Grant(redemptionId: id, appUserId: try row.decode("app_user_id"), entitlementId: c.entitlementId, provider: p,
                                    endTime: try row.decode("end_time"), status: .pending, attempts: 1, failureReason: nil, command: c,
                                    traceparent: traces[id] ?? nil))
            }
        }
        return leased
    }

    /// One command of a round: `grants.store_round_columns` reads each field as an array of its
    /// own (`columns`). Encoded, a JSON array of these is what the previous release's grants hands
    /// `grants.store_round(json)` (`json_to_recordset`, whose column list has these names and types).
    struct RoundItem: Encodable, Equatable {
        var id: UUID
        var account: UUID
        var app: String
        var ent: String
        var sandbox: Bool
        var provider: String
        /// The period, in the one unit the coupon's duration names.
        var years = 0, months = 0, weeks = 0, days = 0
        /// The command as the ledger keeps it (`ReceivedCommand.text`).
        var command: String
        /// Stored leased for this many seconds, its first attempt counted (`leaseAtBirth`); absent: stored due.
        var lease: TimeInterval?
        /// The app of the redemption's coupon; absent: the default app.
        var inApp: UUID?

        enum CodingKeys: String, CodingKey {
            case id, account, app, ent, sandbox, provider, years, months, weeks, days, command, lease
            case inApp = "in_app"
        }

        init(_ c: GrantCommand, provider: String, text: String, lease: TimeInterval?) {
            id = c.redemptionId
            account = c.accountId
            app = c.appUserId
            ent = c.entitlementId
            sandbox = c.sandbox
            self.provider = provider
            command = text
            self.lease = lease
            inApp = c.app.flatMap { $0 == DefaultApp.id ? nil : $0 }
            switch c.duration.unit {
            case "year": years = c.duration.count
            case "month": months = c.duration.count
            case "week": weeks = c.duration.count
            default: days = c.duration.count
            }
        }
    }

    /// Grants due for a provider call, leased for `lease` seconds so no other worker takes them
    /// meanwhile (a worker that dies mid-call leaves them to be retried after the lease).
    static func claimDue(_ c: PGConnection, limit: Int, lease: TimeInterval) throws -> [Grant] {
        try c.query("""
            UPDATE grants.grants SET attempts = attempts + 1, next_attempt_at = now() + make_interval(secs => $2)
            WHERE redemption_id IN (
                SELECT redemption_id FROM grants.grants WHERE status = 'pending' AND next_attempt_at <= now()
                ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED
            )
            RETURNING redemption_id, app_user_id, entitlement_id, provider, end_time, status, attempts, failure_reason, command
            """, [limit, lease]).rows.map(grant)
    }

    /// Settled grants whose outcome coupons has not confirmed yet. Settling leaves a grant 5 s
    /// for its worker to tell coupons before it counts as due here.
    static func claimUnnotified(_ c: PGConnection, limit: Int, lease: TimeInterval) throws -> [Grant] {
        try c.query("""
            UPDATE grants.grants SET next_attempt_at = now() + make_interval(secs => $2)
            WHERE redemption_id IN (
                SELECT redemption_id FROM grants.grants WHERE status <> 'pending' AND NOT coupons_notified AND next_attempt_at <= now()
                ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED
            )
            RETURNING redemption_id, app_user_id, entitlement_id, provider, end_time, status, attempts, failure_reason, command
            """, [limit, lease]).rows.map(grant)
    }

    static func grant(_ row: PGRow) throws -> Grant {
        let stored = try ReceivedCommand.decodeStored(try row.decode("command", as: String.self))
        return Grant(
            redemptionId: try row.decode("redemption_id"), appUserId: try row.decode("app_user_id"),
            entitlementId: try row.decode("entitlement_id"), provider: try row.decode("provider"),
            endTime: try row.decode("end_time"), status: try row.decode("status"), attempts: try row.decode("attempts"),
            failureReason: try row.decodeIfPresent("failure_reason"), command: stored.command,
            traceparent: stored.traceparent)
    }

    /// Records the final outcome; answers false if the grant was settled already.
    static func settle(_ tx: PGConnection, _ g: Grant, succeeded: Bool, reason: String?) throws -> Bool {
        try tx.query("""
            UPDATE grants.grants SET status = $2, failure_reason = $3, settled_at = now(), next_attempt_at = now() + interval '5 seconds'
            WHERE redemption_id = $1 AND status = 'pending' RETURNING redemption_id
            """, [g.redemptionId, succeeded ? GrantStatus.succeeded : .failed, reason]).first != nil
    }

    /// Settles many successful grants at once, none told to coupons yet (they are told after this
    /// commits); answers the ids this call settled.
    static func settleSucceeded(_ tx: PGConnection, _ ids: [UUID]) throws -> Set<UUID> {
        guard !ids.isEmpty else { return [] }
        let rows = try tx.prepared("settle_succeeded", "SELECT s AS redemption_id FROM grants.settle_succeeded($1, '{}') s",
                                   [PGBinaryArray.uuids(ids)]).rows
        return Set(try rows.map { try $0.decode("redemption_id", as: UUID.self) })
    }

    static func markNotified(_ c: PGConnection, _ ids: [UUID]) throws {
        guard !ids.isEmpty else { return }
        // Prepared, so planned once per connection (it was planned at every batch).
        _ = try c.prepared("mark_notified", """
            UPDATE grants.grants SET coupons_notified = true WHERE redemption_id = ANY($1::uuid[])
            """, [PGBinaryArray.uuids(ids)])
    }

    static func retryLater(_ c: PGConnection, _ g: Grant, after: TimeInterval, reason: String) throws {
        try c.query("UPDATE grants.grants SET next_attempt_at = now() + make_interval(secs => $2), failure_reason = $3 WHERE redemption_id = $1 AND status = 'pending'",
                    [g.redemptionId, after, reason])
    }


    /// Active entitlements of a holder: the latest expiry per entitlement and environment.
    static func entitlements(_ c: PGConnection, appUserId: String, app: UUID) throws -> [EntitlementView] {
        try c.query("""
            SELECT entitlement_id, sandbox, max(end_time) AS expires_at, min(provider) AS provider FROM grants.grants
            WHERE app_user_id = $1 AND app_id = $2 AND status = 'succeeded' GROUP BY entitlement_id, sandbox
            HAVING max(end_time) > now() ORDER BY entitlement_id, sandbox
            """, [appUserId, app]).rows.map {
            EntitlementView(entitlementId: try $0.decode("entitlement_id"), expiresAt: try $0.decode("expires_at"),
                            sandbox: try $0.decode("sandbox"), source: try $0.decode("provider"))
        }
    }
}

extension GrantLedger.RoundItem {
    /// The arguments of `grants.store_round_columns`, in its order: one array per field.
    static func columns(_ items: [Self]) -> [any PGBindable] {
        let ints = { (field: KeyPath<Self, Int>) in PGBinaryArray.int8s(items.map { Int64($0[keyPath: field]) }) }
        return [
            PGBinaryArray.uuids(items.map(\.id)), PGBinaryArray.uuids(items.map(\.account)),
            PGBinaryArray.texts(items.map(\.app)), PGBinaryArray.texts(items.map(\.ent)),
            PGBinaryArray.bools(items.map(\.sandbox)), PGBinaryArray.texts(items.map(\.provider)),
            ints(\.years), ints(\.months), ints(\.weeks), ints(\.days),
            PGBinaryArray.texts(items.map(\.command)), PGBinaryArray.float8s(items.map(\.lease)),
            PGBinaryArray.uuids(items.map(\.inApp)),
        ]
    }
}
