import Foundation
import Synchronization

/// The asking side of request-reply (SPEC §3): one DEALER socket connected to every instance of a
/// service, with many requests in flight. Each request carries a correlation id and a deadline;
/// a reply that arrives after its deadline finds no waiter and is dropped.
public final class BusClient: Sendable {
    private struct Pending {
        let continuation: CheckedContinuation<Data, any Error>
        let deadline: ContinuousClock.Instant
    }

    private struct ReplyHeader: Decodable { let id: String }

    /// The name of the service called (metrics label).
    public let service: String
    private let worker: SocketWorker
    /// Requests waiting for their reply, by correlation id.
    private final class PendingTable: Sendable {
        let entries = Mutex<[String: Pending]>([:])
        func add(_ id: String, _ p: Pending) { entries.withLock { $0[id] = p } }
        func take(_ id: String) -> Pending? { entries.withLock { $0.removeValue(forKey: id) } }
        func takeExpired(_ now: ContinuousClock.Instant) -> [Pending] {
            entries.withLock { p in p.filter { $0.value.deadline <= now }.map(\.key).compactMap { p.removeValue(forKey: $0) } }
        }
        func takeAll() -> [Pending] { entries.withLock { p in defer { p.removeAll() }; return Array(p.values) } }
    }

    private let pending: PendingTable
    private let nextId = Atomic<Int>(0)
    private let idPrefix: String
    private let metrics: MetricsRegistry?
    public let defaultTimeout: Duration

    public init(context: ZMQContext, service: String, connect endpoints: [String], metrics: MetricsRegistry? = nil,
                defaultTimeout: Duration = .seconds(5)) throws {
        self.service = service
        self.metrics = metrics
        self.defaultTimeout = defaultTimeout
        self.idPrefix = String(UUID().uuidString.prefix(8)).lowercased()
        let pending = PendingTable()
        self.pending = pending
        worker = try SocketWorker(
            name: "bus-client-\(service)",
            context: context,
            kind: .dealer,
            setup: { socket in
                // Queue only to peers that are connected: with none, sending fails at once
                // ("unavailable") instead of waiting for a peer that may never come.
                try socket.setImmediate()
                for e in endpoints { try socket.connect(e) }
            },
            tickInterval: .milliseconds(20),
            onSendFailure: { frames, _ in
                guard frames.count == 2, let header = try? JSONDecoder().decode(ReplyHeader.self, from: frames[1]) else { return }
                pending.take(header.id)?.continuation.resume(throwing: ServiceError.unavailable)
            },
            onTick: {
                let now = ContinuousClock.now
                for e in pending.takeExpired(now) { e.continuation.resume(throwing: ServiceError.timeout) }
            },
            onMessage: { frames in
                // DEALER receives [“”, reply envelope].
                guard frames.count == 2, let header = try? JSONDecoder().decode(ReplyHeader.self, from: frames[1]) else { return }
                pending.take(header.id)?.continuation.resume(returning: frames[1])
            }
        )
    }

    /// Sends a request and waits for its answer. Throws `ServiceError`: the service's own error,
    /// `timeout` when no answer came before the deadline, `unavailable` when no instance is connected.
    public func request<R: BusRequest>(_ request: R, timeout: Duration? = nil) async throws -> R.Response {
        let started = ContinuousClock.now
        let limit = timeout ?? defaultTimeout
        let id = "\(idPrefix)-\(nextId.wrappingAdd(1, ordering: .relaxed).newValue)"
        let deadlineMs = Timestamp.milliseconds(Date().addingTimeInterval(limit.seconds))
        defer {
            metrics?.observe("redeem_bus_request_duration_seconds", help: "Bus request latency seen by the caller.",
                             labels: ["service": service, "type": R.type], (ContinuousClock.now - started).seconds)
        }
        let envelope = Envelope(id: id, type: R.type, deadlineMs: deadlineMs, body: request)
        let payload: Data
        do { payload = try JSONEncoder.wire().encode(envelope) } catch { throw ServiceError.malformed("cannot encode \(R.type)") }
        let data: Data = try await withCheckedThrowingContinuation { cont in
            pending.add(id, Pending(continuation: cont, deadline: started + limit))
            worker.enqueue([Data(), payload])
        }
        let reply: ReplyEnvelope<R.Response>
        do { reply = try JSONDecoder.wire().decode(ReplyEnvelope<R.Response>.self, from: data) } catch {
            throw ServiceError.malformed("undecodable reply to \(R.type)")
        }
        if let error = reply.error { throw error }
        guard let body = reply.body else { throw ServiceError.malformed("empty reply to \(R.type)") }
        return body
    }

    /// Sends raw bytes as a request frame and answers the raw reply (for tests of malformed input).
    public func requestRaw(_ payload: Data, id: String, timeout: Duration = .seconds(2)) async throws -> Data {
        try await withCheckedThrowingContinuation { cont in
            pending.add(id, Pending(continuation: cont, deadline: ContinuousClock.now + timeout))
            worker.enqueue([Data(), payload])
        }
    }

    public func stop() {
        worker.stop()
        for p in pending.takeAll() { p.continuation.resume(throwing: ServiceError.unavailable) }
    }
}

extension Duration {
    /// The duration in seconds as a Double.
    public var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
