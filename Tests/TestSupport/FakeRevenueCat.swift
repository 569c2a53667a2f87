import Core
import Foundation
import HTTP
import Runtime
import Synchronization
import Telemetry

/// A real HTTP server speaking RevenueCat's v1 promotional-entitlement contract, for tests:
/// records every request, treats a repeated `end_time_ms` for the same customer and entitlement
/// as a duplicate (as RevenueCat does), and fails on demand. `GET /v1/subscribers/{id}` answers
/// the customer in RevenueCat's shape (RevenueCat's REST API v1): its promotional grants and the store
/// purchases a test gave it (`addStorePurchase`), with `management_url`.
public final class FakeRevenueCat: Sendable {
    public struct Call: Sendable {
        public let appUserId: String
        public let entitlementId: String
        public let endTimeMs: Int64?
        public let authorization: String?
        public let path: String
        public let at: Date
        public let status: Int
        /// The W3C `traceparent` the caller sent, if any.
        public let traceparent: String?
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
    /// Store purchases by customer, and how reads are answered (`answerReads`).
    private let purchases = Mutex<[String: [StorePurchase]]>([:])
    private let readAnswer = Mutex<Answer>(.created)
    private let readCount = Mutex<[String]>([])
    /// Grants received and not answered yet (a `slow` answer's wait), by `Authorization` header.
    private let underWay = Mutex<[String: Int]>([:])

    /// A purchase at a store, as a customer's subscription.
    public struct StorePurchase: Sendable {
        public var productId: String
        /// `app_store`, `play_store`, `stripe`, …
        public var store: String
        public var entitlementId: String
        public var expires: Date?
        public var sandbox: Bool
        /// A Google Play subscription's base plan: RevenueCat keys the subscription by the Play
        /// product and names the base plan `product_plan_identifier`; the entitlement's
        /// `product_identifier` is `productId:basePlanId`.
        public var basePlanId: String?
        public init(productId: String, store: String, entitlementId: String, expires: Date?, sandbox: Bool = false, basePlanId: String? = nil) {
            self.productId = productId
            self.store = store
            self.entitlementId = entitlementId
            self.expires = expires
            self.sandbox = sandbox
            self.basePlanId = basePlanId
        }
    }
    private let server: HTTPServer
    public var url: URL { URL(string: "http://127.0.0.1:\(server.port)")! }

    /// Listens on `host` and `port` (0: any free one); the compose suite's fakes container listens on
    /// every interface of its network (`0.0.0.0`) on a port of its own.
    public init(host: String = "127.0.0.1", port: Int = 0) throws {
        var router = Router()
        let box = Box()
        router.post("/v1/subscribers/{appUserId}/entitlements/{entitlementId}/promotional") { req in
            await box.fake!.handle(req)
        }
        router.get("/v1/subscribers/{appUserId}") { req in
            await box.fake!.subscriber(req)
        }
        router.post("/v1/receipts") { req in box.fake!.receipt(req) }
        let routes = router
        var options = HTTPServer.Options()
        options.host = host
        options.port = port
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

    /// A receipt posted to `POST /v1/receipts` (RevenueCat's receipts API; for Stripe,
    /// `X-Platform: stripe` with the Stripe app's public key and the subscription as `fetch_token`).
    public struct Receipt: Sendable {
        public let platform: String?
        public let authorization: String?
        public let appUserId: String?
        public let fetchToken: String?
        /// What the fake answered: 200 taken, else the status `failReceipts` set.
        public let status: Int
    }
    private let receiptCalls = Mutex<[Receipt]>([])
    private let receiptStatus = Mutex<Int>(200)
    public var receipts: [Receipt] { receiptCalls.withLock { $0 } }
    /// The receipts taken (answered 200).
    public var takenReceipts: [Receipt] { receipts.filter { $0.status == 200 } }
    /// How receipts are answered from now on: 200 takes them, another status refuses them.
    public func answerReceipts(_ status: Int) { receiptStatus.withLock { $0 = status } }

    func receipt(_ req: HTTPRequest) -> HTTPResponse {
        let body = (try? JSONSerialization.jsonObject(with: req.body)) as? [String: Any]
        var status = receiptStatus.withLock { $0 }
        let app = body?["app_user_id"] as? String, token = body?["fetch_token"] as? String
        if status == 200, app == nil || token == nil || req.header("authorization")?.hasPrefix("Bearer ") != true {
            status = 400
        }
        receiptCalls.withLock {
            $0.append(
                Receipt(
                    platform: req.header("x-platform"), authorization: req.header("authorization"), appUserId: app,
                    fetchToken: token, status: status))
        }
        guard status == 200 else { return .json(status, ["message": "receipt refused (the test's answer)"]) }
        let subscriber: [String: Any] = ["original_app_user_id": app ?? "", "subscriptions": [String: Any]()]
        return FakeGoogleOAuth.json(200, ["subscriber": subscriber])
    }

    public func answerNext(_ answers: [Answer]) { script.withLock { $0 += answers } }
    /// Scripted answers not yet taken: a request takes its answer when it arrives (a hang too).
    public var scriptedLeft: Int { script.withLock { $0.count } }
    public func answerAlways(_ answer: Answer) { fallbackAnswer.withLock { $0 = answer } }
    public var received: [Call] { calls.withLock { $0 } }
    /// How many grants sent with `authorization` are held right now, received and not yet answered
    /// (each `slow` one for its seconds): a caller killed now has sent them and never learns the answer.
    public func grantsUnderWay(authorization: String) -> Int { underWay.withLock { $0[authorization] ?? 0 } }
    public var distinctGrants: Int { grants.withLock { $0.count } }
    /// The distinct grants (`end_time_ms`) a customer holds of an entitlement.
    public func grantEnds(_ appUserId: String, _ entitlementId: String) -> Set<Int64> {
        grants.withLock { g in
            Set(g.compactMap { key -> Int64? in
                let parts = key.split(separator: "|", omittingEmptySubsequences: false)
                guard parts.count == 3, parts[0] == appUserId, parts[1] == entitlementId else { return nil }
                return Int64(parts[2])
            })
        }
    }
    public func addStorePurchase(_ appUserId: String, _ purchase: StorePurchase) { purchases.withLock { $0[appUserId, default: []].append(purchase) } }
    /// How `GET /v1/subscribers/{id}` answers: `.created` is the customer, the others fail.
    public func answerReads(_ answer: Answer) { readAnswer.withLock { $0 = answer } }
    /// The customers read so far, in order.
    public var reads: [String] { readCount.withLock { $0 } }
    public func reset() {
        calls.withLock { $0.removeAll() }
        script.withLock { $0.removeAll() }
        fallbackAnswer.withLock { $0 = .created }
        readAnswer.withLock { $0 = .created }
        readCount.withLock { $0.removeAll() }
    }

    static let iso: @Sendable (Date) -> String = { Timestamp.iso8601($0) }

    /// The customer, or creates it (RevenueCat answers 201 for a customer it has not seen).
    func subscriber(_ req: HTTPRequest) async -> HTTPResponse {
        let app = req.pathParameters["appUserId"]?.removingPercentEncoding ?? ""
        readCount.withLock { $0.append(app) }
        guard req.header("authorization")?.hasPrefix("Bearer ") == true else { return .json(401, ["message": "Missing authorization"]) }
        switch readAnswer.withLock({ $0 }) {
        case .status(let s, let text): return .json(s, ["message": text])
        case .tooMany(let after): return .json(429, ["message": "Too many requests"], headers: [("Retry-After", String(after))])
        case .hang(let seconds):
            try? await Task.sleep(for: .seconds(seconds))
            return .json(504, ["message": "hung"])
        case .slow(let seconds): try? await Task.sleep(for: .seconds(seconds))
        case .created: break
        }
        var entitlements: [String: Any] = [:]
        var subscriptions: [String: Any] = [:]
        // Promotional grants: RevenueCat keeps the latest end per entitlement, as an `rc_promo` product.
        var promo: [String: Int64] = [:]
        for key in grants.withLock({ $0 }) {
            let p = key.split(separator: "|", omittingEmptySubsequences: false)
            guard p.count == 3, p[0] == app, let end = Int64(p[2]) else { continue }
            promo[String(p[1])] = max(promo[String(p[1])] ?? 0, end)
        }
        for (ent, end) in promo {
            let expires = Self.iso(Date(timeIntervalSince1970: Double(end) / 1000))
            let product = "rc_promo_\(ent)_custom"
            entitlements[ent] = ["expires_date": expires, "grace_period_expires_date": NSNull(), "product_identifier": product, "purchase_date": Self.iso(Date())]
            subscriptions[product] = ["store": "promotional", "is_sandbox": false, "expires_date": expires, "period_type": "normal",
                                      "purchase_date": Self.iso(Date()), "ownership_type": "PURCHASED"]
        }
        let bought = purchases.withLock { $0[app] ?? [] }
        for p in bought {
            let expires: Any = p.expires.map(Self.iso) ?? NSNull()
            entitlements[p.entitlementId] = ["expires_date": expires, "grace_period_expires_date": NSNull(),
                                             "product_identifier": p.basePlanId.map { "\(p.productId):\($0)" } ?? p.productId,
                                             "purchase_date": Self.iso(Date())]
            subscriptions[p.productId] = ["store": p.store, "is_sandbox": p.sandbox, "expires_date": expires, "period_type": "normal",
                                          "purchase_date": Self.iso(Date()), "ownership_type": "PURCHASED", "refunded_at": NSNull(),
                                          "grace_period_expires_date": NSNull(), "product_plan_identifier": p.basePlanId ?? NSNull()]
        }
        let management: Any = bought.first.map { p -> Any in
            switch p.store {
            case "app_store": return "https://apps.apple.com/account/subscriptions"
            case "play_store": return "https://play.google.com/store/account/subscriptions"
            default: return "https://billing.example.com/portal"
            }
        } ?? NSNull()
        let now = Date()
        let document: [String: Any] = [
            "request_date": Self.iso(now), "request_date_ms": Int64(now.timeIntervalSince1970 * 1000),
            "subscriber": [
                "original_app_user_id": app, "first_seen": Self.iso(now), "last_seen": Self.iso(now), "management_url": management,
                "entitlements": entitlements, "subscriptions": subscriptions, "non_subscriptions": [String: Any](), "other_purchases": [String: Any](),
                "original_purchase_date": NSNull(), "subscriber_attributes": [String: Any](),
            ] as [String: Any],
        ]
        let body = (try? JSONSerialization.data(withJSONObject: document)) ?? Data()
        return HTTPResponse(status: bought.isEmpty && promo.isEmpty ? 201 : 200, headers: [("Content-Type", "application/json")], body: body)
    }

    func handle(_ req: HTTPRequest) async -> HTTPResponse {
        let app = req.pathParameters["appUserId"]?.removingPercentEncoding ?? ""
        let ent = req.pathParameters["entitlementId"]?.removingPercentEncoding ?? ""
        let body = (try? JSONSerialization.jsonObject(with: req.body)) as? [String: Any]
        let end = (body?["end_time_ms"] as? NSNumber)?.int64Value
        let answer = script.withLock { $0.isEmpty ? nil : $0.removeFirst() } ?? fallbackAnswer.withLock { $0 }
        var status = 201
        var response: HTTPResponse
        if case .slow(let seconds) = answer {
            let caller = req.header("authorization") ?? ""
            underWay.withLock { $0[caller, default: 0] += 1 }
            try? await Task.sleep(for: .seconds(seconds))
            underWay.withLock { $0[caller, default: 0] -= 1 }
        }
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
                                        path: req.path, at: Date(), status: status, traceparent: req.header("traceparent"))) }
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
        /// The W3C `traceparent` the sender gave, if any.
        public var traceparent: String? = nil
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
                               signature: req.header("webhook-signature") ?? "", body: req.body, method: req.method, path: req.path,
                               traceparent: req.header("traceparent")))
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
