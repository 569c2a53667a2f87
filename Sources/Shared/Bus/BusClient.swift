import Core
import Foundation
import Synchronization
import Telemetry

/// The asking side of request-reply: one DEALER for each instance of a service (every
/// address its endpoints name, looked up again as instances come and go), with many requests in
/// flight. Each request carries a correlation id and a deadline; a reply that arrives after its
/// deadline finds no waiter and is dropped. The correlation id travels twice: in the envelope,
/// and as a routing frame before it (`["", id, envelope]`), which the server echoes, so a reply
/// finds its waiter without its envelope being parsed twice.
///
/// Requests travel binary (`BusBinary`); replies are read in either format. A service of an earlier
/// version cannot read a binary request and answers it `malformedMessage` in JSON: the request is
/// then sent again as JSON, and so are later ones to that service for a minute before binary is
/// tried again, so the upgrade order doesn't matter.
///
/// An instance that refuses a request without handling it, because it is starting (its schema not
/// migrated yet) or stopping, does not decide the answer: the request is sent again, to another
/// instance if one is connected, and the refusal is the answer only once every instance the
/// request reached has refused it.
public final class BusClient: Sendable {
    /// A reply's frames (its envelope, then the frames it carries) and the instance that sent it.
    private struct Reply {
        let frames: ArraySlice<Data>
        let peer: String?
    }

    private struct Pending {
        let continuation: CheckedContinuation<Reply, any Error>
        let deadline: ContinuousClock.Instant
        /// The instance it was sent to.
        var peer: String?
        /// Instances that refused it (starting or stopping): others take it first.
        var avoid: Set<String> = []
    }

    /// The name of the service called (metrics label).
    public let service: String
    private let worker: SocketWorker
    /// Requests waiting for their reply, by correlation id, and those not sent yet because no
    /// instance was connected (retried every tick until their deadline).
    private final class PendingTable: Sendable {
        private struct Table {
            var waiting: [String: Pending] = [:]
            var unsent: [String: [Data]] = [:]
        }
        private let table = Mutex(Table())

        func add(_ id: String, _ p: Pending) { table.withLock { $0.waiting[id] = p } }
        func take(_ id: String) -> Pending? {
            table.withLock { t in
                t.unsent[id] = nil
                return t.waiting.removeValue(forKey: id)
            }
        }
        func sent(_ id: String, to peer: String) { table.withLock { $0.waiting.change(id) { $0?.peer = peer } } }
        func avoids(_ id: String, _ peer: String) -> Bool {
            table.withLock { $0.waiting[id]?.avoid.contains(peer) ?? false }
        }
        /// Whether a request sent to `peer` still waits for its answer.
        func awaits(_ peer: String) -> Bool { table.withLock { $0.waiting.values.contains { $0.peer == peer } } }
        func markUnsent(_ id: String, _ frames: [Data]) {
            table.withLock { t in if t.waiting[id] != nil { t.unsent[id] = frames } }
        }
        /// Unsent messages to try again (they leave the unsent list until they fail again).
        func takeUnsent() -> [[Data]] {
            table.withLock { t in defer { t.unsent.removeAll() }; return Array(t.unsent.values) }
        }
        /// Requests past their deadline, with whether they were ever sent.
        func takeExpired(_ now: ContinuousClock.Instant) -> [(Pending, sent: Bool)] {
            table.withLock { t in
                let ids = t.waiting.filter { $0.value.deadline <= now }.map(\.key)
                return ids.compactMap { id in
                    let unsent = t.unsent.removeValue(forKey: id) != nil
                    return t.waiting.removeValue(forKey: id).map { ($0, !unsent) }
                }
            }
        }
        func takeAll() -> [Pending] {
            table.withLock { t in defer { t.waiting.removeAll(); t.unsent.removeAll() }; return Array(t.waiting.values) }
        }
    }

    private let pending: PendingTable
    private let nextId = Atomic<Int>(0)
    private let idPrefix: String
    /// Batch types the service refused (see `requestBatch`).
    let batches = BatchSupport()
    /// Whether the service reads binary requests (an earlier version reads only JSON).
    let formats = BinarySupport()
    private let metrics: MetricsRegistry?
    public let defaultTimeout: Duration

    /// A socket to an instance that went away closes once no request sent to it waits, and at
    /// the latest after this (the longest bus timeout a caller may set).
    static let leaveWithin = Duration.seconds(60)

    public init(bus: BusNode, service: String, connect endpoints: [String], metrics: MetricsRegistry? = nil,
                defaultTimeout: Duration = .seconds(5)) throws {
        self.service = service
        self.metrics = metrics
        self.defaultTimeout = defaultTimeout
        self.idPrefix = String(UUID.random().lowercasedString.prefix(8))
        let pending = PendingTable()
        self.pending = pending
        let outbox = SocketOutbox()
        worker = try SocketWorker(
            name: "bus-client-\(service)",
            outbox: outbox,
            tickInterval: .milliseconds(20),
            onSendFailure: { frames, error in
                guard frames.count == 3 else { return }
                let id = String(decoding: frames[1], as: UTF8.self)
                if error.isAgain {
                    pending.markUnsent(id, frames)
                } else {
                    pending.take(id)?.continuation.resume(throwing: ServiceError.unavailable)
                }
            },
            onTick: {
                for (p, sent) in pending.takeExpired(.now) {
                    p.continuation.resume(throwing: sent ? ServiceError.timeout : ServiceError.unavailable)
                }
                for frames in pending.takeUnsent() { outbox.enqueue(frames) }
            },
            onMessage: { frames, _ in
                // DEALER receives ["", correlation id, reply envelope, frames it carries…].
                guard frames.count >= 3 else { return }
                guard let p = pending.take(String(decoding: frames[1], as: UTF8.self)) else { return }
                p.continuation.resume(returning: Reply(frames: frames[2...], peer: p.peer))
            },
            open: {
                // Queue only to connected peers, so a dead instance gets no requests. With none
                // connected (yet), a request is retried each tick and is `unavailable` at its deadline.
                try PeerSockets(addresses: bus.peers(endpoints), leaveWithin: Self.leaveWithin,
                                open: { endpoint in
                                    let socket = try bus.connecting(.dealer, to: service)
                                    try socket.setImmediate()
                                    try socket.connect(endpoint)
                                    return socket
                                },
                                sent: { frames, peer in pending.sent(String(decoding: frames[1], as: UTF8.self), to: peer) },
                                awaited: { pending.awaits($0) },
                                avoids: { frames, peer in pending.avoids(String(decoding: frames[1], as: UTF8.self), peer) })
            }
        )
    }

    /// Sends a request and waits for its answer. Throws `ServiceError`: the service's own error,
    /// `timeout` when no answer came before the deadline, `unavailable` when no instance is connected.
    public func request<R: BusRequest>(_ request: R, timeout: Duration? = nil) async throws -> R.Response {
        let binary = formats.sendsBinary
        do {
            return try await self.request(request, timeout: timeout, binary: binary)
        } catch BinarySupport.Refused.binary {
            formats.refused()
            return try await self.request(request, timeout: timeout, binary: false)
        }
    }

    private func request<R: BusRequest>(_ request: R, timeout: Duration?, binary: Bool) async throws -> R.Response {
        let started = ContinuousClock.now
        let limit = timeout ?? defaultTimeout
        let deadlineMs = Timestamp.milliseconds(Date().addingTimeInterval(limit.seconds))
        defer {
            metrics?.observe("redeem_bus_request_duration_seconds", help: "Bus request latency seen by the caller.",
                             labels: ["service": service, "type": R.type], (ContinuousClock.now - started).seconds)
        }
        var refusedBy: Set<String> = []
        while true {
            let id = "\(idPrefix)-\(nextId.wrappingAdd(1, ordering: .relaxed).newValue)"
            // A client span, whose id the envelope carries: the handler's span is its child.
            let answer = try await Tracer.shared.span(R.type, kind: .client, attributes: ["peer.service": service]) {
                let envelope = Envelope(id: id, type: R.type, deadlineMs: deadlineMs, frames: true, body: request)
                let payload: Data
                do { payload = binary ? try BusBinary.encode(envelope) : try JSONEncoder.bus.encode(envelope) } catch {
                    throw ServiceError.malformed("cannot encode \(R.type)")
                }
                return try await withCheckedThrowingContinuation { cont in
                    pending.add(id, Pending(continuation: cont, deadline: started + limit, avoid: refusedBy))
                    worker.enqueue([Data(), Data(id.utf8), payload])
                }
            }
            let frames = answer.frames
            let reply: ReplyEnvelope<R.Response>
            do { reply = try BusCoding.decodeFrames(ReplyEnvelope<R.Response>.self, from: frames) } catch {
                throw ServiceError.malformed("undecodable reply to \(R.type)")
            }
            if binary, reply.id.isEmpty, reply.error?.code == .malformedMessage, let envelope = frames.first,
               !BusBinary.isBinary(envelope) {
                throw BinarySupport.Refused.binary  // an earlier version, which did not read the request
            }
            if let error = reply.error {
                // Refused unhandled by an instance not refused before: another may take it.
                if error.refusesUnhandled, let peer = answer.peer, refusedBy.insert(peer).inserted,
                   ContinuousClock.now < started + limit {
                    metrics?.increment(
                        "redeem_bus_requests_sent_again_total",
                        help: "Bus requests sent again after an instance refused them unhandled.",
                        labels: ["service": service])
                    continue
                }
                throw error
            }
            guard let body = reply.body else { throw ServiceError.malformed("empty reply to \(R.type)") }
            return body
        }
    }

    /// Sends raw bytes as a request frame and answers the raw reply envelope (for tests of malformed input).
    public func requestRaw(_ payload: Data, id: String, timeout: Duration = .seconds(2)) async throws -> Data {
        let reply = try await withCheckedThrowingContinuation { cont in
            pending.add(id, Pending(continuation: cont, deadline: ContinuousClock.now + timeout))
            worker.enqueue([Data(), Data(id.utf8), payload])
        }
        return reply.frames.first ?? Data()
    }

    public func stop() {
        worker.stop()
        for p in pending.takeAll() { p.continuation.resume(throwing: ServiceError.unavailable) }
    }
}

/// Whether a service reads binary requests: until one answers that it cannot (an earlier version),
/// and again a minute after that.
final class BinarySupport: Sendable {
    enum Refused: Error { case binary }

    private let refusedUntil = Mutex<ContinuousClock.Instant?>(nil)
    static let retryAfter = Duration.seconds(60)

    var sendsBinary: Bool { refusedUntil.withLock { $0.map { ContinuousClock.now >= $0 } ?? true } }

    func refused() { refusedUntil.withLock { $0 = ContinuousClock.now + Self.retryAfter } }
}
