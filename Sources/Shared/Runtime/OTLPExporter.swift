import Bus
import Core
import Foundation
import Outbound
import Telemetry

/// Sends spans to an OpenTelemetry collector with OTLP/HTTP, JSON encoding (`POST <endpoint>/v1/traces`,
/// as `OTEL_EXPORTER_OTLP_ENDPOINT` is read). The collector's name is looked up at each export, and
/// the request goes through the same libcurl client as webhooks. An export that fails is logged at
/// most once a minute and its spans dropped: tracing never holds up or fails the work it traces.
public struct OTLPExporter: SpanExporter {
    public let url: URL
    private let client: PinnedHTTPClient
    private let resolver: any HostResolver
    private let logger: Logger
    private let failures = RefusalLog()

    /// `REDEEM_OTLP_ENDPOINT` (an http or https URL), or nil when it is not set.
    public static func fromEnvironment(_ env: Environment, logger: Logger) throws -> OTLPExporter? {
        guard let text = env.raw("REDEEM_OTLP_ENDPOINT") else { return nil }
        guard let base = URL(string: text), let scheme = base.scheme, ["http", "https"].contains(scheme),
            base.host != nil
        else {
            throw ConfigError(
                variable: "REDEEM_OTLP_ENDPOINT", problem: "expected an http(s) URL such as http://collector:4318")
        }
        let url = base.path.hasSuffix("/v1/traces") ? base : base.appendingPathComponent("v1/traces")
        return try OTLPExporter(url: url, logger: logger)
    }

    public init(url: URL, resolver: any HostResolver = SystemResolver(), logger: Logger) throws {
        self.url = url
        self.resolver = resolver
        self.logger = logger
        client = try PinnedHTTPClient(limits: .init(readBytes: 16 * 1024, keepBytes: 256, timeout: .seconds(5)))
    }

    public func export(service: String, _ spans: [SpanRecord]) async {
        guard let host = url.host, let scheme = url.scheme else { return }
        do {
            guard let address = try resolver.addresses(of: host).first else {
                throw LookupError(host: host, code: 0, reason: "no address")
            }
            let body = try JSONEncoder().encode(Self.request(service: service, spans))
            let answer = try await client.post(
                PinnedHTTPClient.Request(
                    url: url.absoluteString, scheme: scheme, address: address,
                    port: url.port ?? (scheme == "https" ? 443 : 80),
                    headers: ["Content-Type: application/json"], body: Array(body)))
            guard (200..<300).contains(answer.status) else {
                throw PinnedHTTPClient.Failure(code: answer.status, message: "HTTP \(answer.status)")
            }
        } catch {
            if failures.shouldLog("export", now: .now) {
                logger.warning("spans not exported", ["spans": spans.count, "error": String(describing: error)])
            }
        }
    }

    /// An `ExportTraceServiceRequest` in OTLP's JSON mapping: ids in hex, times as decimal strings.
    static func request(service: String, _ spans: [SpanRecord]) -> OTLP.Request {
        let resource = OTLP.Resource(attributes: [
            .init("service.name", service), .init("service.version", Build.version),
            .init("service.instance.id", "\(service)-\(ProcessInfo.processInfo.processIdentifier)")
        ])
        let converted = spans.map { s in
            OTLP.Span(
                traceId: s.traceId, spanId: s.spanId, parentSpanId: s.parentSpanId, name: s.name, kind: s.kind.rawValue,
                startTimeUnixNano: String(s.start), endTimeUnixNano: String(s.end),
                attributes: s.attributes.sorted { $0.key < $1.key }.map { .init($0.key, $0.value) },
                status: .init(code: s.failed ? 2 : 0))
        }
        return OTLP.Request(resourceSpans: [
            .init(
                resource: resource,
                scopeSpans: [.init(scope: .init(name: "redeem", version: Build.version), spans: converted)])
        ])
    }
}

/// The parts of OTLP's trace request that Redeem sends (opentelemetry-proto, JSON mapping).
public enum OTLP {
    public struct Request: Codable, Sendable { public var resourceSpans: [ResourceSpans] }
    public struct ResourceSpans: Codable, Sendable {
        public var resource: Resource
        public var scopeSpans: [ScopeSpans]
    }
    public struct Resource: Codable, Sendable { public var attributes: [KeyValue] }
    public struct ScopeSpans: Codable, Sendable {
        public var scope: Scope
        public var spans: [Span]
    }
    public struct Scope: Codable, Sendable {
        public var name: String
        public var version: String
    }
    public struct Span: Codable, Sendable {
        public var traceId: String
        public var spanId: String
        public var parentSpanId: String?
        public var name: String
        public var kind: Int
        public var startTimeUnixNano: String
        public var endTimeUnixNano: String
        public var attributes: [KeyValue]
        public var status: Status
    }
    public struct Status: Codable, Sendable { public var code: Int }
    public struct KeyValue: Codable, Sendable {
        public var key: String
        public var value: AnyValue
        init(_ key: String, _ value: String) {
            self.key = key
            self.value = AnyValue(stringValue: value)
        }
        /// The attribute's text (Redeem sends only strings).
        public var text: String? { value.stringValue }
    }
    public struct AnyValue: Codable, Sendable { public var stringValue: String? }
}
