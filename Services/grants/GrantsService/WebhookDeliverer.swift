import Core
import Cryptography
import Database
import Foundation
import Outbound
import Runtime
import Synchronization
import Telemetry

/// Sends due webhook deliveries and records each attempt.
///
/// Pending deliveries wait in `grants.webhook_deliveries`, and are claimed a page at a time (at
/// most `maxInFlight` under way), so an endpoint that cannot be reached costs rows, not memory.
/// Each attempt checks the URL and resolves its host once (`Webhooks.destination`), then POSTs
/// to that address only (`PinnedHTTPClient`): redirects are failed deliveries, and at most 64 KiB
/// of an answer is read, of which the first 1 KiB is kept in the delivery log.
final class WebhookDeliverer: Sendable {
    let pool: PGPool
    let logger: Logger
    let schedule: [TimeInterval]
    let allowPrivate: Bool
    let resolve: @Sendable (String) -> [String]
    let limits: PinnedHTTPClient.Limits
    /// How long a claimed delivery is kept from other instances. A delivery still under way after a
    /// third of it has it renewed, every third of it (`renewLeases`), so an instance that dies holds
    /// what it had claimed for at most this long, and a slow endpoint never has its delivery sent
    /// twice at once.
    let lease: TimeInterval
    static let defaultLease: TimeInterval = 15
    /// The deliveries under way here: the attempt each was claimed for, and since when.
    private let underWay = Mutex<[UUID: (attempts: Int, since: ContinuousClock.Instant)]>([:])
    /// Made for the first delivery: libcurl's TLS set-up costs about 2 MB that a grants instance
    /// whose operators have no webhooks never needs.
    private let madeClient = Mutex<PinnedHTTPClient?>(nil)

    /// Opens the endpoints' stored secrets.
    let keyring: SecretKeyring

    init(pool: PGPool, logger: Logger, schedule: [TimeInterval], allowPrivate: Bool, keyring: SecretKeyring,
         resolve: @escaping @Sendable (String) -> [String] = Webhooks.resolve, limits: PinnedHTTPClient.Limits = .init(),
         lease: TimeInterval = defaultLease) {
        self.pool = pool
        self.lease = lease
        self.keyring = keyring
        self.logger = logger
        self.schedule = schedule
        self.allowPrivate = allowPrivate
        self.resolve = resolve
        self.limits = limits
    }

    func client() throws -> PinnedHTTPClient {
        try madeClient.withLock { made in
            if let made { return made }
            let client = try PinnedHTTPClient(limits: limits)
            made = client
            return client
        }
    }

    /// The gap before the next attempt after `attempts` failed ones (nil: give up), with up to
    /// 10% jitter.
    static func nextGap(schedule: [TimeInterval], attempts: Int, random: Double) -> TimeInterval? {
        guard attempts >= 1, attempts <= schedule.count else { return nil }
        return schedule[attempts - 1] * (1 + 0.1 * random)
    }

    /// Deliveries under way at most; each waits up to 10 s for its endpoint.
    static let maxInFlight = 50
    private let inFlight = Atomic<Int>(0)
    /// Rung when a delivery ends while all `maxInFlight` were under way: there is room again.
    private let roomAgain = Doorbell()

    /// Claims due deliveries and sends each on its own, four times a second while none is due, and
    /// as soon as a delivery ends while there was no room for more. A delivery is claimed with a
    /// `lease`, renewed while it is under way, so a slow endpoint holds up only its own deliveries,
    /// never the claiming of others.
    func run() async {
        await withDiscardingTaskGroup { group in
            group.addTask {
                await Periodic(every: .milliseconds(Int(self.lease * 1000 / 3))).run { await self.renewLeases() }
            }
            await Periodic(every: .milliseconds(250), doorbell: roomAgain).poll { () async -> Periodic.Next in
                let room = Self.maxInFlight - self.inFlight.load(ordering: .acquiring)
                let due = room > 0 ? await claim(limit: room) : []
                for d in due {
                    self.inFlight.wrappingAdd(1, ordering: .acquiringAndReleasing)
                    group.addTask {
                        await self.deliver(d)
                        if self.inFlight.wrappingSubtract(1, ordering: .acquiringAndReleasing).oldValue == Self.maxInFlight { self.roomAgain.ring() }
                    }
                }
                return due.isEmpty ? .pause : .again
            }
        }
        madeClient.withLock { $0?.close() }
    }

    private func claim(limit: Int) async -> [Webhooks.Due] {
        do {
            let due = try await pool.withConnection { try Webhooks.claimDue($0, limit: limit, lease: self.lease) }
            let now = ContinuousClock.now
            underWay.withLock { for d in due { $0[d.id] = (d.attempts, now) } }
            return due
        } catch {
            logger.warning("webhook claim failed", ["error": String(describing: error)])
            return []
        }
    }

    /// Renews the lease of every delivery under way here for longer than a third of it. One that
    /// another instance has claimed since, or whose outcome is recorded, is left as it is
    /// (`Webhooks.renewLeases`).
    func renewLeases() async {
        let since = ContinuousClock.now - .milliseconds(Int(lease * 1000 / 3))
        let slow = underWay.withLock { $0.filter { $0.value.since <= since }.mapValues(\.attempts) }
        guard !slow.isEmpty else { return }
        do { try await pool.withConnection { try Webhooks.renewLeases($0, slow, lease: self.lease) } } catch {
            logger.warning("webhook lease renewal failed", ["error": String(describing: error)])
        }
    }

    /// What one attempt came to.
    struct Attempt: Sendable, Equatable {
        /// The answer's status; nil when there was none.
        var status: Int?
        var error: String?
        /// The start of the answer's body (`logExcerpt`).
        var response: String?
    }

    func deliver(_ d: Webhooks.Due) async {
        let outcome = await attempt(d)
        underWay.withLock { _ = $0.removeValue(forKey: d.id) }
        await record(d, outcome)
    }

    /// Checks the destination and resolves its host (off the cooperative pool: a slow DNS server
    /// would hold up every task), then POSTs the signed event to the address the check approved.
    func attempt(_ d: Webhooks.Due) async -> Attempt {
        let allowPrivate = self.allowPrivate
        let resolve = self.resolve
        let checked = await Self.offThePool { Result { try Webhooks.destination(d.url, allowPrivate: allowPrivate, resolve: resolve) } }
        let target: Webhooks.Destination
        switch checked {
        case .success(let t): target = t
        case .failure(let e as ServiceError): return Attempt(error: e.message)
        case .failure(let e): return Attempt(error: String(describing: e))
        }
        let secrets: [String]
        let now = Date()
        do {
            let keyring = self.keyring, endpoint = d.endpoint
            let current = try Webhooks.openSecret(d.secret, keyId: d.secretKeyId, endpoint: endpoint, keyring: keyring)
            let previous = try d.previousSecret.map {
                let text = try Webhooks.openSecret($0.text, keyId: $0.keyId, endpoint: endpoint, keyring: keyring)
                return (secret: text, expiresAt: $0.expiresAt)
            }
            secrets = Webhooks.signingSecrets(current: current, previous: previous, now: now)
        } catch {
            return Attempt(error: String(describing: error))
        }
        let body = Array(d.payload.utf8)
        let ts = Int(now.timeIntervalSince1970)
        let request = PinnedHTTPClient.Request(
            url: target.url.absoluteString, scheme: target.scheme, address: target.address, port: target.port,
            headers: ["Content-Type: application/json", "User-Agent: Redeem-Webhooks/1", "webhook-id: \(d.webhookId)", "webhook-timestamp: \(ts)",
                      "webhook-signature: \(Webhooks.signatureHeader(secrets: secrets, id: d.webhookId, timestamp: ts, body: Data(body)))"],
            body: body)
        do {
            let answer = try await Tracer.shared.dependency(
                "webhook", "POST", outcome: { Tracer.httpOutcome($0.status) }
            ) {
                // The delivery's span, for an endpoint that traces what it receives (W3C Trace Context).
                var traced = request
                if let trace = LogContext.trace { traced.headers.append("traceparent: \(trace.traceparent)") }
                return try await client().post(traced)
            }
            // Standard Webhooks: a redirect is a failed delivery; it is never followed.
            let redirect = (300..<400).contains(answer.status) ? "redirects are not followed" : nil
            return Attempt(status: answer.status, error: redirect, response: Self.logExcerpt(answer.bodyPrefix, limit: limits.keepBytes))
        } catch {
            return Attempt(error: "no answer: \(error)")
        }
    }

    /// What an attempt comes to, by Standard Webhooks' rules and the retry schedule.
    enum Outcome: Equatable, Sendable {
        /// A 2xx: done.
        case delivered(status: Int)
        /// 410 Gone: the receiver asks us to stop; the endpoint is disabled and its queue dropped.
        case gone
        /// Anything else (another status, a redirect, no answer, a refused destination), while the
        /// schedule has a gap left: tried again after it.
        case retry(after: TimeInterval)
        /// The same after the schedule's last gap.
        case failed
    }

    /// The one statement of the delivery rules: pure, with the jitter's random number an input.
    static func outcome(of a: Attempt, attempts: Int, schedule: [TimeInterval], random: Double) -> Outcome {
        if let s = a.status, (200..<300).contains(s) { return .delivered(status: s) }
        if a.status == 410 { return .gone }
        if let gap = nextGap(schedule: schedule, attempts: attempts, random: random) { return .retry(after: gap) }
        return .failed
    }

    private func record(_ d: Webhooks.Due, _ a: Attempt) async {
        let outcome = Self.outcome(of: a, attempts: d.attempts, schedule: schedule, random: Double.random(in: 0..<1))
        do {
            try await pool.transaction { tx in
                switch outcome {
                case .delivered(let s):
                    try tx.query("""
                        UPDATE grants.webhook_deliveries SET status = 'delivered', delivered_at = now(), last_status_code = $2, last_error = NULL,
                            last_response = $3 WHERE id = $1
                        """, [d.id, s, a.response])
                case .gone:
                    try tx.query("UPDATE grants.webhook_endpoints SET active = false, disabled_at = now(), disabled_reason = '410 Gone' WHERE id = $1", [d.endpoint])
                    try tx.query("UPDATE grants.webhook_deliveries SET status = 'failed', last_status_code = 410, last_error = 'endpoint disabled (410 Gone)' WHERE endpoint_id = $1 AND status = 'pending'", [d.endpoint])
                // A failed attempt is recorded only on a delivery still pending: while it was under
                // way its endpoint may have been deleted (or gone), which ended the queue with its
                // own reason. A delivery that arrived is recorded whatever happened meanwhile.
                case .retry(let gap):
                    try tx.query("""
                        UPDATE grants.webhook_deliveries SET next_attempt_at = now() + make_interval(secs => $2), last_status_code = $3, last_error = $4,
                            last_response = $5 WHERE id = $1 AND status = 'pending'
                        """, [d.id, gap, a.status, a.error, a.response])
                case .failed:
                    try tx.query("""
                        UPDATE grants.webhook_deliveries SET status = 'failed', last_status_code = $2, last_error = $3, last_response = $4
                        WHERE id = $1 AND status = 'pending'
                        """, [d.id, a.status, a.error ?? "gave up after the last retry", a.response])
                }
            }
        } catch {
            logger.warning("webhook outcome not recorded", ["error": String(describing: error)])
        }
    }

    /// The start of an answer's body as text for the delivery log, at most `limit` bytes of UTF-8:
    /// invalid UTF-8 and NUL (which PostgreSQL's text cannot hold) become U+FFFD, and the text is
    /// cut between characters. Nil for an empty body.
    static func logExcerpt(_ bytes: [UInt8], limit: Int = 1024) -> String? {
        guard !bytes.isEmpty else { return nil }
        var out = ""
        var used = 0
        for c in String(decoding: bytes.prefix(limit), as: UTF8.self) {
            let clean: Character = c == "\0" ? "\u{FFFD}" : c
            used += clean.utf8.count
            guard used <= limit else { break }
            out.append(clean)
        }
        return out
    }

    /// Runs blocking work (a name lookup) on Dispatch's threads, which are kept between uses and
    /// grow when work blocks, and awaits it: not a new thread per attempt.
    static func offThePool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { done in DispatchQueue.global().async { done.resume(returning: work()) } }
    }
}
