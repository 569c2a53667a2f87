import Foundation
import HTTP
import Synchronization

/// A real HTTP server that takes OTLP/HTTP trace exports in the JSON encoding (`POST /v1/traces`,
/// `application/json`), as an OpenTelemetry collector does, and keeps the spans. It reads the
/// request by OTLP's JSON mapping itself (not with Redeem's encoder): a field Redeem misnamed
/// would be missing here. Anything else is answered 404 or 400, as a collector would.
public final class FakeOTLPCollector: Sendable {
    public struct Span: Sendable, Equatable {
        public let service: String
        public let traceId: String
        public let spanId: String
        public let parentSpanId: String?
        public let name: String
        public let kind: Int
        public let start: UInt64
        public let end: UInt64
        public let attributes: [String: String]
    }

    private let spans = Mutex<[Span]>([])
    private let requests = Mutex(0)
    private let server: HTTPServer
    public var url: URL { URL(string: "http://127.0.0.1:\(server.port)")! }

    public init() throws {
        let box = Box()
        server = HTTPServer.fake("otlp-collector") { req in box.collector!.take(req) }
        box.collector = self
        try server.start()
    }

    private final class Box: @unchecked Sendable {
        // Set once, before the server starts taking requests.
        weak var collector: FakeOTLPCollector?
    }

    func take(_ req: HTTPRequest) -> HTTPResponse {
        guard req.method == "POST", req.path == "/v1/traces" else { return HTTPResponse(status: 404) }
        guard req.header("content-type")?.hasPrefix("application/json") == true,
            let got = try? Self.read(req.body)
        else { return HTTPResponse(status: 400) }
        spans.withLock { $0 += got }
        requests.withLock { $0 += 1 }
        return .json(200, [String: String]())
    }

    /// `ExportTraceServiceRequest`: resourceSpans[].resource.attributes (service.name) and
    /// scopeSpans[].spans[], ids as hex, times as decimal strings.
    static func read(_ body: Data) throws -> [Span] {
        struct Bad: Error {}
        guard let root = try JSONSerialization.jsonObject(with: body) as? [String: Any],
            let resources = root["resourceSpans"] as? [[String: Any]]
        else { throw Bad() }
        var out: [Span] = []
        for r in resources {
            let resource = attributes((r["resource"] as? [String: Any])?["attributes"])
            guard let service = resource["service.name"], let scopes = r["scopeSpans"] as? [[String: Any]] else {
                throw Bad()
            }
            for scope in scopes {
                for s in scope["spans"] as? [[String: Any]] ?? [] {
                    guard let trace = s["traceId"] as? String, trace.count == 32, let span = s["spanId"] as? String,
                        span.count == 16,
                        let name = s["name"] as? String, let kind = s["kind"] as? Int,
                        let start = (s["startTimeUnixNano"] as? String).flatMap(UInt64.init),
                        let end = (s["endTimeUnixNano"] as? String).flatMap(UInt64.init)
                    else { throw Bad() }
                    let parent = (s["parentSpanId"] as? String).flatMap { $0.isEmpty ? nil : $0 }
                    out.append(
                        Span(
                            service: service, traceId: trace, spanId: span, parentSpanId: parent, name: name,
                            kind: kind,
                            start: start, end: end, attributes: attributes(s["attributes"])))
                }
            }
        }
        return out
    }

    private static func attributes(_ value: Any?) -> [String: String] {
        var out: [String: String] = [:]
        for kv in value as? [[String: Any]] ?? [] {
            if let key = kv["key"] as? String, let text = (kv["value"] as? [String: Any])?["stringValue"] as? String {
                out[key] = text
            }
        }
        return out
    }

    public var received: [Span] { spans.withLock { $0 } }
    /// Export requests taken.
    public var exports: Int { requests.withLock { $0 } }
    public func spans(ofTrace traceId: String) -> [Span] { received.filter { $0.traceId == traceId } }
    public func stop() async { await server.stop(drainSeconds: 0.2) }
}
