import Core
import Cryptography
import Foundation
import HTTP
import Runtime
import Synchronization

/// A real HTTP server speaking App Store Connect's subscription offer code endpoints in Apple's
/// JSON:API shapes, for tests: a subscription's prices and price points per territory, offers
/// (`subscriptionOfferCodes`) and their custom codes, and switching either off.
///
/// Every request must carry a bearer token that `key` accepts for the App Store Connect API;
/// otherwise 401 in Apple's error shape. Apple's limits are enforced: at most
/// `Limits.activeOffersPerSubscription` active offers per subscription, and a custom code
/// only once (any case, active or not). Offer names are not made unique (Apple's rule on them
/// is unconfirmed), so a test can count the offers made under one name. Every call is
/// recorded, and the next calls can be made to fail (429 with `Retry-After`, or any status).
public final class FakeAppStoreConnect: Sendable {
    public struct Call: Sendable {
        public let method: String
        public let path: String
        public let query: [String: String]
        public let body: Data
        public let status: Int
        public let at: Date
    }

    /// One territory of a subscription: the customer prices of its price points, as Apple
    /// writes them ("9.99"), and the current price, which must be one of them.
    public struct TerritoryPrices: Sendable {
        public var territory: String
        public var currency: String
        public var current: String
        public var points: [String]
        public init(territory: String, currency: String, current: String, points: [String]) {
            self.territory = territory
            self.currency = currency
            self.current = current
            self.points = points
        }
    }

    public struct Limits: Sendable {
        public var activeOffersPerSubscription = 10
        /// Whether `PATCH active: true` switches a deactivated offer back on. Apple titles the call
        /// "Deactivate" and does not say (docs/stores.md), so by default it is refused; custom
        /// codes, which Apple documents as (de)activated, always switch back on.
        public var offersSwitchBackOn = false
        public init() {}
    }

    public struct PricePoint: Sendable {
        public let id: String
        public let territory: String
        public let customerPrice: String
    }

    public struct Offer: Sendable {
        public let id: String
        public let subscriptionId: String
        public let name: String
        public let attributes: [String: String]
        public let customerEligibilities: [String]
        public let numberOfPeriods: Int
        /// Per territory, the price point chosen (nil for a free trial).
        public let prices: [String: String?]
        public internal(set) var active: Bool
    }

    public struct CustomCode: Sendable {
        public let id: String
        public let offerId: String
        public let customCode: String
        public let numberOfCodes: Int
        public let expirationDate: String?
        public let createdDate: Date
        public internal(set) var active: Bool
    }

    struct Subscription {
        var territories: [TerritoryPrices]
        var points: [PricePoint]
    }

    struct State {
        var subscriptions: [String: Subscription] = [:]
        var offers: [Offer] = []
        var codes: [CustomCode] = []
        var calls: [Call] = []
        var throttled = 0
        var retryAfter = 1
        var failing = 0
        var failStatus = 500
        var failingCodes = 0
        var lastId = 6_400_000_000
    }

    let state = Mutex(State())
    public let key: TestAppleAPIKey
    public let limits: Limits
    private let server: HTTPServer
    public var url: URL { URL(string: "http://127.0.0.1:\(server.port)")! }

    public init(key: TestAppleAPIKey, limits: Limits = Limits()) throws {
        self.key = key
        self.limits = limits
        let box = Box()
        var router = Router()
        router.get("/v1/subscriptions/{id}/prices") { box.fake!.prices($0) }
        router.get("/v1/subscriptions/{id}/pricePoints") { box.fake!.pricePoints($0) }
        router.get("/v1/subscriptions/{id}/offerCodes") { box.fake!.offersOfSubscription($0) }
        router.post("/v1/subscriptionOfferCodes") { box.fake!.createOffer($0) }
        router.get("/v1/subscriptionOfferCodes/{id}") { box.fake!.readOffer($0) }
        router.patch("/v1/subscriptionOfferCodes/{id}") { box.fake!.switchOffer($0) }
        router.get("/v1/subscriptionOfferCodes/{id}/customCodes") { box.fake!.codesOfOffer($0) }
        router.post("/v1/subscriptionOfferCodeCustomCodes") { box.fake!.createCode($0) }
        router.patch("/v1/subscriptionOfferCodeCustomCodes/{id}") { box.fake!.switchCode($0) }
        let routes = router
        server = .fake("fake-app-store-connect") { await box.fake!.answer($0, routes: routes) }
        box.fake = self
        try server.start()
    }

    private final class Box: @unchecked Sendable {
        // Set once, before the server starts taking requests.
        weak var fake: FakeAppStoreConnect?
    }

    public func stop() async { await server.stop(drainSeconds: 0.2) }

    // MARK: What tests set up and look at

    /// Registers a subscription (Apple's numeric id) and its prices per territory.
    public func addSubscription(_ id: String, _ territories: [TerritoryPrices]) {
        let points = territories.flatMap { t in
            t.points.enumerated().map { i, price in
                PricePoint(id: Self.opaqueId(["s": id, "t": t.territory, "p": String(10_001 + i)]), territory: t.territory, customerPrice: price)
            }
        }
        precondition(territories.allSatisfy { $0.points.contains($0.current) }, "a current price must be one of the price points")
        state.withLock { $0.subscriptions[id] = Subscription(territories: territories, points: points) }
    }

    /// The price points of a subscription, in the order registered.
    public func pricePoints(of subscriptionId: String) -> [PricePoint] { state.withLock { $0.subscriptions[subscriptionId]?.points ?? [] } }
    public var offers: [Offer] { state.withLock { $0.offers } }
    public var customCodes: [CustomCode] { state.withLock { $0.codes } }
    public var received: [Call] { state.withLock { $0.calls } }

    /// The next `count` authenticated calls get 429 with `Retry-After: retryAfter`.
    public func throttleNext(_ count: Int, retryAfter: Int = 1) {
        state.withLock {
            $0.throttled = count
            $0.retryAfter = retryAfter
        }
    }

    /// The next `count` authenticated calls fail with `status`, changing nothing.
    public func failNext(_ count: Int, status: Int = 500) {
        state.withLock {
            $0.failing = count
            $0.failStatus = status
        }
    }

    /// The next `count` custom code creations (`POST /v1/subscriptionOfferCodeCustomCodes`) fail
    /// with 500, making nothing: a run stops between its offer and its code.
    public func failCodeCreations(_ count: Int) {
        state.withLock { $0.failingCodes = count }
    }

    // MARK: Serving

    func answer(_ req: HTTPRequest, routes: Router) async -> HTTPResponse {
        var response: HTTPResponse
        if !key.accepts(req.header("authorization"), for: .appStoreConnect) {
            response = AppleError.response(401, "NOT_AUTHORIZED", "Authentication credentials are missing or invalid.",
                                           "Provide a properly configured and signed bearer token, and make sure that it has not expired.")
        } else if let injected = takeInjectedFailure(req) {
            response = injected
        } else {
            response = await routes.handle(req)
            if response.route == nil {
                response = response.status == 405
                    ? AppleError.response(405, "METHOD_NOT_ALLOWED", "The request method is not valid for the resource path.", "\(req.method) \(req.path)")
                    : AppleError.notFound(req.path)
            }
        }
        let call = Call(method: req.method, path: req.path, query: req.query, body: req.body, status: response.status, at: Date())
        state.withLock { $0.calls.append(call) }
        return response
    }

    private func takeInjectedFailure(_ req: HTTPRequest) -> HTTPResponse? {
        state.withLock { s in
            if s.failingCodes > 0, req.method == "POST", req.path == "/v1/subscriptionOfferCodeCustomCodes" {
                s.failingCodes -= 1
                return AppleError.response(500, "UNEXPECTED_ERROR", "An unexpected error occurred.", "Injected by the test (custom code).")
            }
            if s.throttled > 0 {
                s.throttled -= 1
                return AppleError.response(429, "RATE_LIMIT_EXCEEDED", "The request rate limit has been reached.",
                                           "We've received too many requests for this API. Please wait and try again or slow down your request rate.",
                                           headers: [("Retry-After", String(s.retryAfter))])
            }
            if s.failing > 0 {
                s.failing -= 1
                return AppleError.response(s.failStatus, "UNEXPECTED_ERROR", "An unexpected error occurred.", "Injected by the test.")
            }
            return nil
        }
    }

    /// Apple's resource ids for prices and price points are base64 JSON; these are alike.
    static func opaqueId(_ fields: [String: String]) -> String {
        Base64URL.encode(try! JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]))
    }

    func nextId(_ s: inout State) -> String {
        s.lastId += 1
        return String(s.lastId)
    }
}

/// Apple's error document, `{"errors": [{id, status, code, title, detail, source?}]}`, and
/// JSON:API documents.
enum AppleError {
    static func response(_ status: Int, _ code: String, _ title: String, _ detail: String, pointer: String? = nil,
                         headers: [(String, String)] = []) -> HTTPResponse {
        var error: [String: Any] = ["id": UUID().uuidString, "status": String(status), "code": code, "title": title, "detail": detail]
        if let pointer { error["source"] = ["pointer": pointer] }
        return document(status, ["errors": [error]], headers: headers)
    }

    static func notFound(_ path: String) -> HTTPResponse {
        response(404, "NOT_FOUND", "The specified resource does not exist", "The path provided does not match a defined resource type: \(path)")
    }

    /// 409, what Apple answers for a request entity it refuses.
    static func entity(_ code: String, _ detail: String, pointer: String) -> HTTPResponse {
        response(409, "ENTITY_ERROR.\(code)", "The provided entity is invalid", detail, pointer: pointer)
    }

    static func document(_ status: Int, _ object: [String: Any], headers: [(String, String)] = []) -> HTTPResponse {
        let body = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        return HTTPResponse(status: status, headers: [("Content-Type", "application/json")] + headers, body: body)
    }
}
