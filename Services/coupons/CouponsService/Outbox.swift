import Bus
import Core
import Database
import Foundation
import Runtime
import Telemetry

/// The transactional outbox: messages for grants are written in the transaction that
/// makes them true, then pushed by `OutboxRelay` until grants acknowledges them, which removes them.
///
/// A message is keyed by a UUID and its type (the `redemption_id` column, named for the first
/// messages): a redemption's id for its grant command and its completion notice, and a key derived
/// from (command, coupon, store, plan) for a store command (`StoreIds.command`). Writing a message
/// whose key is already there changes nothing, and grants acknowledges each by its key
/// (`OutboxAck.redemptionIds`).
enum Outbox {
    static func add<M: BusRequest>(_ tx: PGConnection, key: UUID, _ message: M) throws {
        let payload = String(decoding: try JSONEncoder.bus.encode(Envelope(id: UUID.random().lowercasedString, type: M.type, body: message)), as: UTF8.self)
        try tx.query("INSERT INTO coupons.outbox (redemption_id, type, payload) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                     [key, M.type, payload])
    }

    /// Claims messages that are due (new, or sent without an acknowledgement for a while). Several
    /// relays (instances) share the work: SKIP LOCKED hands each row to one of them at a time.
    static func claim(_ c: PGConnection, limit: Int, resendAfter: TimeInterval) throws -> [String] {
        try c.query("""
            UPDATE coupons.outbox SET attempts = attempts + 1, next_attempt_at = now() + make_interval(secs => $2)
            WHERE (redemption_id, type) IN (
                SELECT redemption_id, type FROM coupons.outbox WHERE next_attempt_at <= now()
                ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED
            )
            RETURNING payload
            """, [limit, resendAfter]).rows.map { try $0.decode("payload") }
    }

    /// Grants has the messages: they leave the outbox (one dead row each, where marking them and
    /// pruning later cost two, and kept every unacknowledged-row scan wading through them).
    static func ack(_ c: PGConnection, redemptions: [UUID], type: String) throws {
        guard !redemptions.isEmpty else { return }
        try c.prepared("ack_outbox", "SELECT coupons.ack_outbox($1, $2)", [PGBinaryArray.uuids(redemptions), type])
    }

    /// How many messages wait for grants' acknowledgement, and how long the oldest has waited.
    struct Backlog: Sendable, Equatable {
        var depth: Int
        var oldestSeconds: Double
    }

    static func backlog(_ c: PGConnection) throws -> Backlog {
        let row = try c.query("""
            SELECT count(*) AS n, coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 AS age FROM coupons.outbox
            """).first!
        return Backlog(depth: try row.decode("n"), oldestSeconds: try row.decode("age"))
    }
}

/// A grant command as a transaction wrote it to the outbox (`json`, the row's payload), with its
/// envelope, encoded in binary (`BusBinary`) only when it is pushed: after the commit, not while
/// the transaction holds the coupon's lock.
struct OutboxMessage: Sendable {
    let json: String
    let envelope: Envelope<GrantCommand>

    /// The envelope in binary; nil if it cannot be encoded (the JSON alone is pushed then).
    var binary: Data? { try? BusCoding.encode(envelope) }
}

/// Pushes outbox messages to grants: a reservation batch's commands as soon as it commits
/// (`send`), other rows when their writer wakes it (`nudge`), and every `interval` whatever is due
/// again because grants has not acknowledged it.
final class OutboxRelay: Sendable {
    private let pool: PGPool
    private let pusher: Pusher
    private let logger: Logger
    private let bell = Doorbell()
    let interval: Duration
    let resendAfter: TimeInterval

    init(pool: PGPool, pusher: Pusher, logger: Logger, interval: Duration = .seconds(1), resendAfter: TimeInterval = 3) {
        self.pool = pool
        self.pusher = pusher
        self.logger = logger
        self.interval = interval
        self.resendAfter = resendAfter
    }

    /// Grant commands a reservation batch just committed (due for the sweep only after
    /// `resendAfter`): pushed now, without reading them back from the table, each with its binary
    /// form. Grants decodes that (decoding the JSON was 25 µs of grants' CPU per completed
    /// redemption, a fifth of it) and keeps the JSON.
    func send(_ messages: [OutboxMessage]) {
        for m in messages { pusher.pushRaw(Data(m.json.utf8), binary: m.binary) }
    }

    /// New rows were committed: send them now.
    func nudge() {
        bell.ring()
    }

    func run() async {
        await Periodic(every: interval, doorbell: bell).run {
            do {
                var batch: [String]
                repeat {
                    batch = try await pool.withConnection { [resendAfter] in try Outbox.claim($0, limit: 500, resendAfter: resendAfter) }
                    for payload in batch { pusher.pushRaw(Data(payload.utf8)) }
                } while batch.count == 500
            } catch {
                logger.warning("outbox relay pass failed", ["error": String(describing: error)])
            }
        }
    }
}
