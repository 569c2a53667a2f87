import Core
import Foundation
import Synchronization

/// What a span is to the work around it (OpenTelemetry's `SpanKind`, by its OTLP number).
public enum SpanKind: Int, Sendable {
    case `internal` = 1, server = 2, client = 3, producer = 4, consumer = 5
}

/// A finished span, as exporters receive it.
public struct SpanRecord: Sendable, Equatable {
    public var traceId: String
    public var spanId: String
    public var parentSpanId: String?
    public var name: String
    public var kind: SpanKind
    /// Unix nanoseconds.
    public var start: UInt64
    public var end: UInt64
    public var attributes: [String: String]
    public var failed: Bool
}

/// Where finished spans go (`OTLPExporter` sends them to a collector).
public protocol SpanExporter: Sendable {
    func export(service: String, _ spans: [SpanRecord]) async
}

/// The process's tracer (W3C Trace Context; OpenTelemetry's model). Every span is the child of
/// `LogContext.trace` (or a new trace's root) and is the current one while its work runs, so what
/// that work sends (bus envelopes, outbound requests) carries it as `traceparent`. Ids are made and
/// carried whether or not spans are exported (logs name `trace.id`); a span is recorded only when an
/// exporter is set (`REDEEM_OTLP_ENDPOINT`) and its trace is sampled, then sent in batches off the
/// request path. At most `bufferLimit` spans wait: past that, new ones are dropped and counted.
///
/// It also counts calls to outside dependencies (`dependency`), with the metrics of the service
/// that runs in the process (`attach`).
public final class Tracer: Sendable {
    public static let shared = Tracer()

    private struct State {
        var service = "redeem"
        var exporter: (any SpanExporter)?
        var metrics: MetricsRegistry?
        var pending: [SpanRecord] = []
        var dropped = 0
    }

    private let state = Mutex(State())
    private let recording = Atomic<Bool>(false)
    public let bufferLimit = 4096
    /// How often waiting spans are sent.
    public let interval: Duration = .milliseconds(500)

    public init() {}

    /// Names the service spans come from and starts sending them to `exporter` (nil: none recorded).
    public func configure(service: String, exporter: (any SpanExporter)?) {
        state.withLock {
            $0.service = service
            $0.exporter = exporter
        }
        recording.store(exporter != nil, ordering: .releasing)
        guard exporter != nil else { return }
        Task.detached { [self] in
            while true {
                try? await Task.sleep(for: interval)
                await flush()
            }
        }
    }

    /// The registry dependency calls are counted in.
    public func attach(metrics: MetricsRegistry) { state.withLock { $0.metrics = metrics } }

    public var isRecording: Bool { recording.load(ordering: .acquiring) }

    /// Runs `body` as a span named `name`: the child of `parent` (the current position unless given;
    /// nil starts a new trace), and current while `body` runs. A thrown error marks it failed.
    /// `named`, when given, names the span by its result (an HTTP span by the route it matched).
    public func span<T>(
        _ name: String, kind: SpanKind, parent: TraceContext? = LogContext.trace, attributes: [String: String] = [:],
        named: ((T) -> String)? = nil, _ body: () async throws -> T
    ) async rethrows -> T {
        let above = parent
        let context = above.map { $0.child() } ?? .root()
        let start = isRecording ? Self.now() : 0
        do {
            let value = try await LogContext.$trace.withValue(context) { try await body() }
            if start != 0 {
                record(context, parent: above, named?(value) ?? name, kind, start, attributes, failed: false)
            }
            return value
        } catch {
            if start != 0 { record(context, parent: above, name, kind, start, attributes, failed: true) }
            throw error
        }
    }

    /// A call to an outside dependency (`revenuecat`, `app_store`, `smtp`, …): a client span,
    /// counted by outcome in `redeem_dependency_requests_total` (`error` when `body` throws, else
    /// what `outcome` makes of its result) and timed in `redeem_dependency_request_duration_seconds`.
    public func dependency<T>(
        _ dependency: String, _ operation: String, outcome: (T) -> String = { _ in "ok" },
        _ body: () async throws -> T
    ) async rethrows -> T {
        let started = ContinuousClock.now
        var result = "error"
        defer {
            if let metrics = state.withLock({ $0.metrics }) {
                metrics.increment(
                    "redeem_dependency_requests_total", help: "Calls to outside dependencies by outcome.",
                    labels: ["dependency": dependency, "outcome": result])
                metrics.observe(
                    "redeem_dependency_request_duration_seconds", help: "Latency of calls to outside dependencies.",
                    labels: ["dependency": dependency], (ContinuousClock.now - started).seconds)
            }
        }
        return try await span("\(dependency) \(operation)", kind: .client, attributes: ["peer.service": dependency]) {
            let value = try await body()
            result = outcome(value)
            return value
        }
    }

    /// The outcome of an HTTP answer: `ok` (1xx–3xx), `client_error` (4xx) or `server_error` (5xx).
    public static func httpOutcome(_ status: Int) -> String {
        status >= 500 ? "server_error" : status >= 400 ? "client_error" : "ok"
    }

    private func record(
        _ context: TraceContext, parent: TraceContext?, _ name: String, _ kind: SpanKind, _ start: UInt64,
        _ attributes: [String: String], failed: Bool
    ) {
        guard context.sampled else { return }
        let span = SpanRecord(
            traceId: context.traceId, spanId: context.spanId, parentSpanId: parent?.spanId, name: name,
            kind: kind, start: start, end: Self.now(), attributes: attributes, failed: failed)
        state.withLock { s in
            if s.pending.count < bufferLimit { s.pending.append(span) } else { s.dropped += 1 }
        }
    }

    /// Sends the spans that wait (the exporter's loop does every `interval`; a stopping service once more).
    public func flush() async {
        let (service, exporter, spans) = state.withLock { s -> (String, (any SpanExporter)?, [SpanRecord]) in
            defer { s.pending.removeAll(keepingCapacity: true) }
            return (s.service, s.exporter, s.pending)
        }
        guard let exporter, !spans.isEmpty else { return }
        await exporter.export(service: service, spans)
    }

    /// Spans dropped because the buffer was full.
    public var dropped: Int { state.withLock { $0.dropped } }

    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}
