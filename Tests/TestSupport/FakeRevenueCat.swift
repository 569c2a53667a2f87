import Core
import Foundation
import HTTP
import Runtime
import Synchronization
import Telemetry

/// A real HTTP server speaking RevenueCat's v1 promotional-entitlement contract, for tests:
/// records every request, treats a repeated `end_time_ms` for the same customer and entitlement
/// as a duplicate (as RevenueCat does), and fails on demand.
public final class FakeRevenueCat: Sendable {
    public struct Call: Sendable {
        public let appUserId: String
        public let entitlementId: String
        public let endTimeMs: Int64?
        public let authorization: String?
        public let path: String
        public let at: Date
        public let status: Int
    }

    /// What to answer next: scripted answers are used first, then `fallback`.
    public enum Answer: Sendable {
        case created
        case status(Int, body: String)
        case tooMany(retryAfter: Int)
        case hang(seconds: Double)
        /// Granted, after `seconds` (a caller killed meanwhile never learns it was).
        case slow(seconds: Double)
    }

    private let calls = Mutex<[Call]>([])
    private let script = Mutex<[Answer]>([])
    private let fallbackAnswer = Mutex<Answer>(.created)
    /// Distinct grants: (customer, entitlement, end_time_ms).
    private let grants = Mutex<Set<String>>([])
    private let server: HTTPServer
    public var url: URL { URL(string: "http://127.0.0.1:\(server.port)")! }

    public init() throws {
        var router = Router()
        let box = Box()
        router.post("/v1/subscribers/{appUserId}/entitlements/{entitlementId}/promotional") { req in
            await box.fake!.handle(req)
        }
        let routes = router
        var options = HTTPServer.Options()
        options.port = 0
        options.threads = 2
        server = HTTPServer(options: options, logger: Logger(service: "fake-revenuecat", sink: LogSink(capturing: ())), accessLog: false) {
            await routes.handle($0)
        }
        box.fake = self
        try server.start()
    }

    private final class Box: @unchecked Sendable {
        // Set once, before the server starts taking requests.
        weak var fake: FakeRevenueCat?
    }

    public func answerNext(_ answers: [Answer]) { script.withLock { $0 += answers } }
    public func answerAlways(_ answer: Answer) { fallbackAnswer.withLock { $0 = answer } }
    public var received: [Call] { calls.withLock { $0 } }
    public var distinctGrants: Int { grants.withLock { $0.count } }
    public func reset() {
        calls.withLock { $0.removeAll() }
        script.withLock { $0.removeAll() }
        fallbackAnswer.withLock { $0 = .created }
    }

    func handle(_ req: HTTPRequest) async -> HTTPResponse {
        let app = req.pathParameters["appUserId"]?.removingPercentEncoding ?? ""
        let ent = req.pathParameters["entitlementId"]?.removingPercentEncoding ?? ""
        let body = (try? JSONSerialization.jsonObject(with: req.body)) as? [String: Any]
        let end = (body?["end_time_ms"] as? NSNumber)?.int64Value
        let answer = script.withLock { $0.isEmpty ? nil : $0.removeFirst() } ?? fallbackAnswer.withLock { $0 }
        var status = 201
        var response: HTTPResponse
        if case .slow(let seconds) = answer { try? await Task.sleep(for: .seconds(seconds)) }
        switch answer {
        case .created, .slow:
            if let end { grants.withLock { _ = $0.insert("\(app)|\(ent)|\(end)") } }
            response = .json(201, ["request_date_ms": Int64(Date().timeIntervalSince1970 * 1000)])
        case .status(let s, let text):
            status = s
            response = .json(s, ["message": text])
        case .tooMany(let after):
            status = 429
            response = .json(429, ["message": "Too many requests"], headers: [("Retry-After", String(after))])
        case .hang(let seconds):
            try? await Task.sleep(for: .seconds(seconds))
            status = 504
            response = .json(504, ["message": "hung"])
        }
        calls.withLock { $0.append(Call(appUserId: app, entitlementId: ent, endTimeMs: end, authorization: req.header("authorization"),
                                        path: req.path, at: Date(), status: status)) }
        return response
    }

    public func stop() async { await server.stop(drainSeconds: 0.2) }
}

/// A real HTTP server that receives webhooks and records them (headers and raw body): every
/// request, whatever its method and path, so a request that should never come (a followed
/// redirect) is seen too.
public final class WebhookReceiver: Sendable {
    public struct Delivery: Sendable {
        public let id: String
        public let timestamp: String
        public let signature: String
        public let body: Data
        public let method: String
        public let path: String
    }

    private let deliveries = Mutex<[Delivery]>([])
    private let answer = Mutex<HTTPResponse>(HTTPResponse(status: 200))
    /// How long to wait before answering (an endpoint that hangs).
    private let delay = Mutex<Duration>(.zero)
    private let server: HTTPServer
    public let host: String
    public var port: Int { server.port }
    public var url: URL { URL(string: "http://\(host):\(server.port)/hooks")! }

    /// Listens on `host` (any loopback address: 127.0.0.1, 127.0.0.2, …) and `port` (0: any free one).
    public init(host: String = "127.0.0.1", port: Int = 0) throws {
        let box = Box()
        var options = HTTPServer.Options()
        options.host = host
        options.port = port
        self.host = host
        server = HTTPServer(options: options, logger: Logger(service: "webhook-receiver", sink: LogSink(capturing: ())), accessLog: false) { req in
            let receiver = box.receiver!
            let wait = receiver.delay.withLock { $0 }
            if wait > .zero { try? await Task.sleep(for: wait) }
            return receiver.record(req)
        }
        box.receiver = self
        try server.start()
    }

    private final class Box: @unchecked Sendable {
        // Set once, before the server starts taking requests.
        weak var receiver: WebhookReceiver?
    }

    func record(_ req: HTTPRequest) -> HTTPResponse {
        deliveries.withLock {
            $0.append(Delivery(id: req.header("webhook-id") ?? "", timestamp: req.header("webhook-timestamp") ?? "",
                               signature: req.header("webhook-signature") ?? "", body: req.body, method: req.method, path: req.path))
        }
        return answer.withLock { $0 }
    }

    public func respond(with status: Int) { answer.withLock { $0 = HTTPResponse(status: status) } }
    /// Answers every request with this status, headers and body.
    public func respond(with status: Int, headers: [(String, String)] = [], body: Data) {
        answer.withLock { $0 = HTTPResponse(status: status, headers: headers, body: body) }
    }
    public func respond(with response: HTTPResponse) { answer.withLock { $0 = response } }
    public func respond(after wait: Duration) { delay.withLock { $0 = wait } }
    public var received: [Delivery] { deliveries.withLock { $0 } }
    public func stop() async { await server.stop(drainSeconds: 0.2) }
}
