import Foundation
import Synchronization
import TestSupport
import Testing
@testable import GrantsService
import Outbound
@testable import Core
@testable import Telemetry
@testable import Database
@testable import HTTP
@testable import Runtime

/// Webhook delivery cannot be turned against the network: the deliverer against a real
/// PostgreSQL and real HTTP servers, all on this machine's loopback (no test registers, resolves
/// or sends anything beyond it; names other than `localhost` only meet a stub resolver).
@Suite struct WebhookDeliveryTests {
    /// A grants schema of its own.
    static func database() async throws -> PGPool {
        let pool = PGPool(url: try await TestPostgres.shared().freshDatabase(), maxConnections: 2)
        _ = try await GrantsService.migrator.apply(on: pool)
        return pool
    }

    /// An endpoint with `url`, written straight to the table (as a row stored before the rules
    /// changed, or whose name resolved elsewhere then), and one delivery of it, claimed.
    static func due(_ pool: PGPool, url: String) async throws -> Webhooks.Due {
        let endpoint = try await queued(pool, url: url).endpoint
        let claimed = try await pool.withConnection { try Webhooks.claimDue($0, limit: 10, lease: 60) }
        return try #require(claimed.first { $0.endpoint == endpoint })
    }

    /// The same, not claimed: the endpoint's id and the delivery's.
    static func queued(_ pool: PGPool, url: String) async throws -> (endpoint: UUID, delivery: UUID) {
        let (endpoint, delivery) = (UUID.random(), UUID.random())
        _ = try await pool.query("INSERT INTO grants.webhook_endpoints (id, url, events, secret, mode) VALUES ($1, $2, '{coupon.redeemed}', $3, 'live')",
                             [endpoint, url, Webhooks.newSecret()])
        _ = try await pool.query("""
            INSERT INTO grants.webhook_deliveries (id, endpoint_id, webhook_id, type, payload)
            VALUES ($1, $2, $3, 'coupon.redeemed', '{"type":"coupon.redeemed","data":{}}')
            """, [delivery, endpoint, "msg_" + UUID.random().lowercasedString])
        return (endpoint, delivery)
    }

    struct Logged {
        var status: WebhookDeliveryStatus
        var attempts: Int
        var code: Int?
        var error: String?
        var response: String?
    }

    static func logged(_ pool: PGPool, _ d: Webhooks.Due) async throws -> Logged {
        let row = try #require(try await pool.query("SELECT * FROM grants.webhook_deliveries WHERE id = $1", [d.id]).first)
        return Logged(status: try row.decode("status"), attempts: try row.decode("attempts"), code: try row.decodeIfPresent("last_status_code"),
                      error: try row.decodeIfPresent("last_error"), response: try row.decodeIfPresent("last_response"))
    }

    static func deliverer(
        _ pool: PGPool, allowPrivate: Bool, resolve: @escaping @Sendable (String) -> [String] = Webhooks.resolve,
        lease: TimeInterval = WebhookDeliverer.defaultLease
    ) -> WebhookDeliverer {
        WebhookDeliverer(
            pool: pool, logger: Logger(service: "grants", sink: LogSink(capturing: ())), schedule: [1, 1],
            allowPrivate: allowPrivate, keyring: .random(), resolve: resolve, lease: lease)
    }

    /// A delivery waiting for a slow endpoint keeps its lease: two instances poll one table with a
    /// 4 s lease, and the endpoint answers after 8 s. Without the renewal, the other instance
    /// claims it again once 4 s have passed and a second request arrives about 4 s after the first
    /// answer; here the endpoint hears once, and the log shows one attempt, delivered.
    @Test func aDeliveryWaitingForASlowEndpointIsNotSentAgainByAnotherInstance() async throws {
        let pool = try await Self.database()
        defer { pool.close() }
        let receiver = try WebhookReceiver()
        receiver.respond(after: .seconds(8))
        let (_, id) = try await Self.queued(pool, url: receiver.url.absoluteString)
        let instances = (0..<2).map { _ in Self.deliverer(pool, allowPrivate: true, lease: 4) }
        let running = Task {
            await withDiscardingTaskGroup { group in for i in instances { group.addTask { await i.run() } } }
        }
        let status = {
            try await pool.query("SELECT status, attempts FROM grants.webhook_deliveries WHERE id = $1", [id]).first
        }
        var delivered = false
        for _ in 0..<300 where !delivered {
            try await Task.sleep(for: .milliseconds(100))
            delivered = try await status()?.decode("status", as: WebhookDeliveryStatus.self) == .delivered
        }
        #expect(delivered)
        try await Task.sleep(for: .seconds(5))  // a second request would have been answered by now
        running.cancel()
        await running.value
        #expect(receiver.received.count == 1, "requests: \(receiver.received.count)")
        #expect(try await status()?.decode("attempts", as: Int.self) == 1)
        await receiver.stop()
    }

    /// A renewal holds a delivery still on the attempt it was claimed for, and nothing else: not
    /// one claimed again since (by another instance), not one no longer pending, and not a retry
    /// recorded for later than the lease would run.
    @Test func aRenewalHoldsOnlyTheAttemptItWasClaimedFor() async throws {
        let pool = try await Self.database()
        defer { pool.close() }
        let d = try await Self.due(pool, url: "http://127.0.0.1:9/hooks")
        let leaseEnd = { () async throws -> Double in
            try #require(
                try await pool.query(
                    "SELECT extract(epoch FROM next_attempt_at - now())::float8 AS s FROM grants.webhook_deliveries WHERE id = $1",
                    [d.id]
                ).first
            ).decode("s")
        }
        let renew = { (attempts: Int) async throws in
            try await pool.withConnection { try Webhooks.renewLeases($0, [d.id: attempts], lease: 120) }
        }
        // Claimed with 60 s: renewed to 120.
        try await renew(1)
        #expect(try await leaseEnd() > 110)
        // A retry recorded for an hour from now keeps its hour.
        let update = { (set: String) async throws in
            _ = try await pool.query("UPDATE grants.webhook_deliveries SET \(set) WHERE id = $1", [d.id])
        }
        try await update("next_attempt_at = now() + interval '1 hour'")
        try await renew(1)
        #expect(try await leaseEnd() > 3500)
        // Another instance's claim (the second attempt) is not the first's to renew.
        try await update("next_attempt_at = now() + interval '1 second', attempts = 2")
        try await renew(1)
        #expect(try await leaseEnd() < 2)
        // Nor is a delivery that has arrived.
        try await update("status = 'delivered'")
        try await renew(2)
        #expect(try await leaseEnd() < 2)
    }

    /// Standard Webhooks: a 3xx is a failed delivery. The receiver redirects (every kind, to a
    /// loopback listener that records whatever reaches it), and nothing ever follows.
    @Test func aRedirectIsAFailedDeliveryAndItsTargetIsNeverReached() async throws {
        let pool = try await Self.database()
        defer { pool.close() }
        let target = try WebhookReceiver()
        let redirecting = try WebhookReceiver()
        let deliverer = Self.deliverer(pool, allowPrivate: true)
        for status in [301, 302, 303, 307, 308] {
            redirecting.respond(with: status, headers: [("Location", target.url.absoluteString)], body: Data("moved".utf8))
            let d = try await Self.due(pool, url: redirecting.url.absoluteString)
            await deliverer.deliver(d)
            let log = try await Self.logged(pool, d)
            #expect(log.status == .pending && log.attempts == 1, "\(status): retried on the schedule")
            #expect(log.code == status)
            #expect(log.error == "redirects are not followed")
            #expect(log.response == "moved")
        }
        #expect(redirecting.received.count == 5)
        #expect(target.received.isEmpty, "followed: \(target.received.map { "\($0.method) \($0.path)" })")
        await target.stop()
        await redirecting.stop()
    }

    /// The connection goes to the address the check approved. The stub resolver answers
    /// 127.0.0.2 for `localhost` once; the system's own answer would be 127.0.0.1, where another
    /// receiver listens on the same port. A client that resolves again (URLSession did) reaches
    /// that one.
    @Test func theConnectionGoesToTheAddressTheCheckApprovedWithoutResolvingAgain() async throws {
        let pool = try await Self.database()
        defer { pool.close() }
        let (approved, other) = try await Self.receiversOnOnePort("127.0.0.2", "127.0.0.1")
        let lookups = LockedCounter()
        let deliverer = Self.deliverer(pool, allowPrivate: true) { host in
            lookups.add()
            return host == "localhost" ? ["127.0.0.2"] : []
        }
        let d = try await Self.due(pool, url: "http://localhost:\(approved.port)/hooks")
        await deliverer.deliver(d)
        let log = try await Self.logged(pool, d)
        #expect(log.status == .delivered, "\(log)")
        #expect(approved.received.count == 1)
        #expect(other.received.isEmpty)
        #expect(lookups.value == 1, "one resolution per attempt")
        #expect(approved.received.first?.id == d.webhookId)
        await approved.stop()
        await other.stop()
    }

    /// Two receivers on the same port of two loopback addresses. The port is free on the first
    /// when it is picked, but may be taken on the second by any other listener of this machine
    /// (another suite's server): then both are tried again on another port.
    static func receiversOnOnePort(_ first: String, _ second: String) async throws -> (WebhookReceiver, WebhookReceiver) {
        var attempt = 0
        while true {
            attempt += 1
            let a = try WebhookReceiver(host: first)
            do {
                return (a, try WebhookReceiver(host: second, port: a.port))
            } catch where attempt < 20 {
                await a.stop()
            }
        }
    }

    /// A name that resolves to a private address is refused when the delivery is due, whatever
    /// it resolved to when the endpoint was registered: nothing is sent, and the log says why.
    @Test func aNameThatResolvesToAPrivateAddressIsRefusedAtDeliveryTime() async throws {
        let pool = try await Self.database()
        defer { pool.close() }
        let receiver = try WebhookReceiver()
        // The system resolver: localhost is loopback.
        let strict = Self.deliverer(pool, allowPrivate: false)
        let local = try await Self.due(pool, url: "https://localhost:\(receiver.port)/hooks")
        await strict.deliver(local)
        let log = try await Self.logged(pool, local)
        #expect(log.status == .pending && log.code == nil)
        #expect(log.error?.hasPrefix("url resolves to a private or loopback address") == true, "\(log)")
        // A registered public name that now answers with a private address (rebinding); and one
        // that answers with a public and a private address.
        let rebound = Self.deliverer(pool, allowPrivate: false) { host in
            host == "hooks.example" ? ["10.0.0.7"] : host == "mixed.example" ? ["93.184.215.14", "127.0.0.1"] : []
        }
        for url in ["https://hooks.example/h", "https://mixed.example/h"] {
            let d = try await Self.due(pool, url: url)
            await rebound.deliver(d)
            let log = try await Self.logged(pool, d)
            #expect(log.code == nil)
            #expect(log.error?.hasPrefix("url resolves to a private or loopback address") == true, "\(url): \(log)")
        }
        #expect(receiver.received.isEmpty)
        await receiver.stop()
    }

    /// At most 64 KiB of an answer is read; the log keeps its first 1 KiB.
    @Test func aLongAnswerIsCutAt64KiBAndTheLogKeeps1KiB() async throws {
        let pool = try await Self.database()
        defer { pool.close() }
        let receiver = try WebhookReceiver()
        receiver.respond(with: 200, body: Data(repeating: UInt8(ascii: "x"), count: 1 << 20))
        let deliverer = Self.deliverer(pool, allowPrivate: true)
        let d = try await Self.due(pool, url: receiver.url.absoluteString)
        await deliverer.deliver(d)
        let log = try await Self.logged(pool, d)
        #expect(log.status == .delivered && log.code == 200)
        #expect(log.response == String(repeating: "x", count: 1024))
        // A failure's answer is kept too.
        receiver.respond(with: 500, body: Data("upstream down".utf8))
        let failed = try await Self.due(pool, url: receiver.url.absoluteString)
        await deliverer.deliver(failed)
        #expect(try await Self.logged(pool, failed).response == "upstream down")
        await receiver.stop()
    }

    /// The client stops reading at the limit: an answer that never ends is cut within the limit.
    /// It is a successful, cut answer, where running into the timeout would have been an error;
    /// the timeout is long so a suite run on two busy cores cannot reach it first.
    @Test func theClientReadsAtMost64KiBOfAnyAnswer() async throws {
        let endless = try WebhookReceiver()
        var streamed = HTTPResponse.stream(200, contentType: "text/plain") { out in
            let piece = Data(repeating: UInt8(ascii: "y"), count: 8192)
            while await out.write(piece) {}
        }
        streamed.headers.append(("X-Test", "endless"))
        endless.respond(with: streamed)
        let client = try PinnedHTTPClient(limits: .init(readBytes: 64 * 1024, keepBytes: 1024, timeout: .seconds(300)))
        defer { client.close() }
        let answer = try await client.post(.init(url: endless.url.absoluteString, scheme: "http", address: "127.0.0.1", port: endless.port,
                                                 headers: [], body: Array("{}".utf8)))
        #expect(answer.status == 200 && answer.cut)
        #expect(answer.bytesRead <= 64 * 1024)
        #expect(answer.bodyPrefix == Array(repeating: UInt8(ascii: "y"), count: 1024))
        await endless.stop()
    }

    /// An endpoint deleted while an attempt is under way keeps the reason its queue ended with: the
    /// attempt's failure, recorded after, does not overwrite "endpoint deleted" (a full run once
    /// showed a deleted endpoint's delivery with curl's reason instead).
    @Test func anAttemptThatFailsAfterItsEndpointWasDeletedLeavesTheDeletionsReason() async throws {
        let pool = try await Self.database()
        defer { pool.close() }
        let port = try await offThePool { try Project.freePort() }
        let d = try await Self.due(pool, url: "http://127.0.0.1:\(port)/hooks")  // claimed: the attempt is under way
        #expect(
            try await pool.withConnection { try Webhooks.delete($0, id: d.endpoint, mode: .live, app: DefaultApp.id) })
        await Self.deliverer(pool, allowPrivate: true).deliver(d)
        let log = try await Self.logged(pool, d)
        #expect(log.status == .failed)
        #expect(log.error == "endpoint deleted")
    }

    /// A port where nothing listens is a failed attempt with curl's reason, retried on the
    /// schedule; and only the scheme that was checked is used.
    @Test func nothingListeningIsAFailedAttemptRetriedLater() async throws {
        let pool = try await Self.database()
        defer { pool.close() }
        let port = try await offThePool { try Project.freePort() }
        let deliverer = Self.deliverer(pool, allowPrivate: true)
        let d = try await Self.due(pool, url: "http://127.0.0.1:\(port)/hooks")
        await deliverer.deliver(d)
        let log = try await Self.logged(pool, d)
        #expect(log.status == .pending && log.code == nil)
        let error = try #require(log.error)
        #expect(error.hasPrefix("no answer: ") && error.hasSuffix("(curl 7)"), "\(error)")
        // Only the approved scheme: the URL says http, the check approved https.
        let live = try WebhookReceiver()
        let client = try PinnedHTTPClient()
        defer { client.close() }
        do {
            _ = try await client.post(.init(url: live.url.absoluteString, scheme: "https", address: "127.0.0.1", port: live.port, headers: [], body: []))
            Issue.record("a scheme other than the approved one was used")
        } catch {
            #expect(error.code == 1, "CURLE_UNSUPPORTED_PROTOCOL: \(error)")
        }
        #expect(live.received.isEmpty)
        await live.stop()
    }
}

/// A count several threads add to.
final class LockedCounter: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }

    /// A rotated-out secret signs beside the new one until its end, not at it, and never after;
    /// the header holds one `v1,` signature per secret, the new one's first.
    @Test func aRotatedSecretSignsBesideTheNewOneUntilItsWindowEnds() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let old = Webhooks.newSecret(), new = Webhooks.newSecret()
        let end = now.addingTimeInterval(Webhooks.secretOverlap)
        #expect(Webhooks.secretOverlap == 24 * 3600)
        #expect(Webhooks.signingSecrets(current: new, previous: (old, end), now: now) == [new, old])
        let justBefore = end.addingTimeInterval(-1)
        #expect(Webhooks.signingSecrets(current: new, previous: (old, end), now: justBefore) == [new, old])
        #expect(Webhooks.signingSecrets(current: new, previous: (old, end), now: end) == [new])
        #expect(Webhooks.signingSecrets(current: new, previous: (old, end), now: end.addingTimeInterval(3600)) == [new])
        #expect(Webhooks.signingSecrets(current: new, previous: nil, now: now) == [new])
        let body = Data(#"{"type":"webhook.test"}"#.utf8)
        let header = Webhooks.signatureHeader(secrets: [new, old], id: "msg_1", timestamp: 1_800_000_000, body: body)
        let parts = header.split(separator: " ").map(String.init)
        #expect(parts == [
            Webhooks.signature(secret: new, id: "msg_1", timestamp: 1_800_000_000, body: body),
            Webhooks.signature(secret: old, id: "msg_1", timestamp: 1_800_000_000, body: body),
        ])
        #expect(parts.allSatisfy { $0.hasPrefix("v1,") } && parts[0] != parts[1])
    }

    /// One rule for an endpoint's events, at creation and in a change: known, subscribable, not
    /// empty; repeats collapse.
    @Test func anEndpointsEventsAreCheckedByOneRule() throws {
        let events = try Webhooks.checkEvents(["coupon.exhausted", "coupon.redeemed", "coupon.exhausted"])
        #expect(events == [.couponExhausted, .couponRedeemed])
        for bad in [[], ["coupon.stolen"], ["webhook.test"], ["coupon.redeemed", ""]] {
            #expect(throws: ServiceError.self) { try Webhooks.checkEvents(bad) }
        }
        #expect(Set(WebhookEventType.subscribable) == Set(WebhookEventType.allCases).subtracting([.webhookTest]))
    }
}

