import Core
import Foundation
import HTTP
import Synchronization

/// A real HTTP server speaking the Google Play Developer API (androidpublisher v3) for tests, in
/// Google's shapes: a subscription and its base plans with their regional prices
/// (`GET …/subscriptions/{productId}`), subscription offers (get, create with `offerId` and
/// `regionsVersion.version`, `:activate`, `:deactivate`), subscription purchases
/// (`GET …/purchases/subscriptionsv2/tokens/{token}`) and their acknowledgement
/// (`POST …/purchases/subscriptions/{productId}/tokens/{token}:acknowledge`).
///
/// Every request must carry an access token `oauth` issued and not expired, else 401 in Google's
/// error shape. An offer is checked as Google documents it: an id of lower-case letters, digits
/// and `-` starting with a letter, unique in its base plan (409 `ALREADY_EXISTS`); one or two
/// phases, each with a recurrence count, an ISO 8601 duration and one config per region, each
/// region one of the base plan's and its config exactly one of `price`, `relativeDiscount` (in
/// (0, 1)), `absoluteDiscount` (in the region's currency) or `free`; tags of at most 20 lower-case
/// characters. Calls are recorded, and the next ones can be made to answer 429 or any status.
public final class FakePlayDeveloperAPI: Sendable {
    public struct Call: Sendable {
        public let method: String
        public let path: String
        public let query: [String: String]
        public let body: Data
        public let status: Int
        public let at: Date
    }

    public struct Offer: Sendable {
        public let productId: String
        public let basePlanId: String
        public let offerId: String
        /// The `SubscriptionOffer` as it was created.
        public let document: [String: any Sendable]
        public internal(set) var state: String

        /// The first phase's regional configs, by region code.
        public var regionalConfigs: [String: [String: any Sendable]] {
            let phases = document["phases"] as? [[String: Any]] ?? []
            let configs = phases.first?["regionalConfigs"] as? [[String: Any]] ?? []
            return Dictionary(configs.compactMap { c in (c["regionCode"] as? String).map { ($0, c.mapValues { $0 as! any Sendable }) } },
                              uniquingKeysWith: { a, _ in a })
        }
        public var tags: [String] { (document["offerTags"] as? [[String: Any]] ?? []).compactMap { $0["tag"] as? String } }
    }

    /// A purchase a test registers: what `subscriptionsv2` answers for its token.
    public struct Purchase: Sendable {
        public var productId: String
        public var basePlanId: String
        public var offerId: String?
        public var offerTags: [String]
        public var obfuscatedAccountId: String?
        public var testPurchase: Bool
        public var linkedPurchaseToken: String?
        public var recurringPrice: (units: String, nanos: Int, currency: String)
        public var regionCode: String
        public var startTime: Date
        /// `lineItems[].offerPhase`: `basePrice`, `freeTrial`, `introductoryPrice` or
        /// `prorationPeriod`. By default `introductoryPrice` for a purchase of an offer (`freeTrial`
        /// when the offer is free in the purchase's region), else `basePrice`.
        public var offerPhase: String?
        /// The package it was bought in; nil: the fake's own. Google knows a token only under its
        /// own package: asked under another, it answers that the token was not found.
        public var package: String?
        public internal(set) var acknowledged = false

        public init(productId: String, basePlanId: String, offerId: String?, offerTags: [String] = ["redeem-coupon"],
                    obfuscatedAccountId: String?, testPurchase: Bool = false, linkedPurchaseToken: String? = nil,
                    recurringPrice: (units: String, nanos: Int, currency: String) = ("9", 990_000_000, "USD"), regionCode: String = "US",
                    startTime: Date = Date(), offerPhase: String? = nil) {
            self.offerPhase = offerPhase
            self.productId = productId
            self.basePlanId = basePlanId
            self.offerId = offerId
            self.offerTags = offerTags
            self.obfuscatedAccountId = obfuscatedAccountId
            self.testPurchase = testPurchase
            self.linkedPurchaseToken = linkedPurchaseToken
            self.recurringPrice = recurringPrice
            self.regionCode = regionCode
            self.startTime = startTime
        }
    }

    /// One region of a base plan: its currency and price ("9.99").
    public struct RegionPrice: Sendable {
        public var region: String
        public var currency: String
        public var price: String
        public init(_ region: String, _ currency: String, _ price: String) {
            self.region = region
            self.currency = currency
            self.price = price
        }
    }

    struct State {
        /// productId → basePlanId → regions.
        var subscriptions: [String: [String: [RegionPrice]]] = [:]
        var offers: [Offer] = []
        var purchases: [String: Purchase] = [:]
        var calls: [Call] = []
        var throttled = 0
        var failing = 0
        var failStatus = 500
        var failingAcknowledgements = 0
        /// Packages served besides `packageName` (`addPackage`).
        var packages: Set<String> = []
    }

    let state = Mutex(State())
    public let oauth: FakeGoogleOAuth
    public let packageName: String
    private let server: HTTPServer
    public var url: URL { URL(string: "http://127.0.0.1:\(server.port)")! }

    public init(oauth: FakeGoogleOAuth, packageName: String = "com.example.redeem") throws {
        self.oauth = oauth
        self.packageName = packageName
        let box = Box()
        var router = Router()
        let app = "/androidpublisher/v3/applications/{package}"
        router.get("\(app)/subscriptions/{productId}") { box.fake!.subscription($0) }
        router.get("\(app)/subscriptions/{productId}/basePlans/{basePlanId}/offers/{offerId}") { box.fake!.readOffer($0) }
        router.post("\(app)/subscriptions/{productId}/basePlans/{basePlanId}/offers") { box.fake!.createOffer($0) }
        // `{offerId}:activate` and `:deactivate` are one path segment.
        router.post("\(app)/subscriptions/{productId}/basePlans/{basePlanId}/offers/{offerAction}") { box.fake!.offerAction($0) }
        router.get("\(app)/purchases/subscriptionsv2/tokens/{token}") { box.fake!.readPurchase($0) }
        router.post("\(app)/purchases/subscriptions/{productId}/tokens/{tokenAction}") { box.fake!.acknowledge($0) }
        let routes = router
        server = .fake("fake-play-developer-api") { await box.fake!.answer($0, routes: routes) }
        box.fake = self
        try server.start()
    }

    private final class Box: @unchecked Sendable {
        // Set once, before the server starts taking requests.
        weak var fake: FakePlayDeveloperAPI?
    }

    public func stop() async { await server.stop(drainSeconds: 0.2) }

    // MARK: What tests set up and look at

    /// Registers a subscription product's base plan and its price per region.
    public func addBasePlan(productId: String, basePlanId: String, _ regions: [RegionPrice]) {
        state.withLock { $0.subscriptions[productId, default: [:]][basePlanId] = regions }
    }

    /// Serves `package` too, with the same service account (several apps of one developer).
    public func addPackage(_ package: String) { state.withLock { _ = $0.packages.insert(package) } }

    /// Registers a purchase under its token, as Play would after the app bought it.
    public func addPurchase(token: String, _ purchase: Purchase) { state.withLock { $0.purchases[token] = purchase } }

    public var offers: [Offer] { state.withLock { $0.offers } }
    public func purchase(_ token: String) -> Purchase? { state.withLock { $0.purchases[token] } }
    public var received: [Call] { state.withLock { $0.calls } }

    /// The next `count` authenticated calls answer 429 (Google sends no `Retry-After`).
    public func throttleNext(_ count: Int) { state.withLock { $0.throttled = count } }

    /// The next `count` authenticated calls answer `status`, changing nothing.
    public func failNext(_ count: Int, status: Int = 500) {
        state.withLock {
            $0.failing = count
            $0.failStatus = status
        }
    }

    /// The next `count` acknowledgements answer 503, acknowledging nothing.
    public func failAcknowledgements(_ count: Int) { state.withLock { $0.failingAcknowledgements = count } }

    // MARK: Serving

    func answer(_ req: HTTPRequest, routes: Router) async -> HTTPResponse {
        var response: HTTPResponse
        if !oauth.accepts(req.header("authorization")) {
            response = Self.error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token.")
        } else if let injected = takeInjectedFailure() {
            response = injected
        } else if let package = Self.package(of: req.path), package != packageName,
            !state.withLock({ $0.packages.contains(package) })
        {
            response = Self.error(404, "NOT_FOUND", "Package not found: \(package).")
        } else {
            response = await routes.handle(req)
            if response.route == nil { response = Self.error(404, "NOT_FOUND", "Requested entity was not found.") }
        }
        let call = Call(method: req.method, path: req.path, query: req.query, body: req.body, status: response.status, at: Date())
        state.withLock { $0.calls.append(call) }
        return response
    }

    private static func package(of path: String) -> String? {
        let parts = path.split(separator: "/")
        guard parts.count > 3, parts[2] == "applications" else { return nil }
        return String(parts[3])
    }

    private func takeInjectedFailure() -> HTTPResponse? {
        state.withLock { s in
            if s.throttled > 0 {
                s.throttled -= 1
                return Self.error(429, "RESOURCE_EXHAUSTED", "Quota exceeded for quota metric 'Queries' of service 'androidpublisher.googleapis.com'.")
            }
            if s.failing > 0 {
                s.failing -= 1
                return Self.error(s.failStatus, s.failStatus >= 500 ? "INTERNAL" : "FAILED_PRECONDITION", "Injected by the test.")
            }
            return nil
        }
    }

    func subscription(_ req: HTTPRequest) -> HTTPResponse {
        let product = req.pathParameters["productId"] ?? ""
        guard let plans = state.withLock({ $0.subscriptions[product] }) else { return Self.error(404, "NOT_FOUND", "Subscription not found.") }
        let basePlans: [[String: Any]] = plans.keys.sorted().map { id in
            ["basePlanId": id, "state": "ACTIVE", "autoRenewingBasePlanType": ["billingPeriodDuration": "P1M"],
             "regionalConfigs": plans[id]!.map { r in
                 ["regionCode": r.region, "newSubscriberAvailability": true, "price": Self.money(r.price, r.currency)] as [String: Any]
             }]
        }
        return Self.json(200, ["packageName": packageName, "productId": product, "basePlans": basePlans])
    }

    func readOffer(_ req: HTTPRequest) -> HTTPResponse {
        let p = req.pathParameters
        guard let offer = state.withLock({ s in s.offers.first { $0.productId == p["productId"] && $0.basePlanId == p["basePlanId"] && $0.offerId == p["offerId"] } }) else {
            return Self.error(404, "NOT_FOUND", "Requested entity was not found.")
        }
        return Self.json(200, Self.offerDocument(offer))
    }

    func createOffer(_ req: HTTPRequest) -> HTTPResponse {
        let product = req.pathParameters["productId"] ?? "", basePlan = req.pathParameters["basePlanId"] ?? ""
        guard let offerId = req.query["offerId"], req.query["regionsVersion.version"] != nil else {
            return Self.error(400, "INVALID_ARGUMENT", "offerId and regionsVersion.version are required.")
        }
        guard offerId.range(of: "^[a-z][a-z0-9-]{0,62}$", options: .regularExpression) != nil else {
            return Self.error(400, "INVALID_ARGUMENT", "Offer ID must start with a lower-case letter and contain only lower-case letters, numbers and hyphens.")
        }
        guard let regions = state.withLock({ $0.subscriptions[product]?[basePlan] }) else {
            return Self.error(404, "NOT_FOUND", "Base plan not found.")
        }
        guard let body = try? JSONSerialization.jsonObject(with: req.body) as? [String: Any] else {
            return Self.error(400, "INVALID_ARGUMENT", "Invalid JSON payload received.")
        }
        if let problem = Self.problem(offer: body, regions: regions) { return Self.error(400, "INVALID_ARGUMENT", problem) }
        var document = body
        document["packageName"] = packageName
        document["productId"] = product
        document["basePlanId"] = basePlan
        document["offerId"] = offerId
        let made = Offer(productId: product, basePlanId: basePlan, offerId: offerId, document: document.mapValues { Self.sendable($0) }, state: "DRAFT")
        let created: Bool = state.withLock { s in
            guard !s.offers.contains(where: { $0.productId == product && $0.basePlanId == basePlan && $0.offerId == offerId }) else { return false }
            s.offers.append(made)
            return true
        }
        guard created else { return Self.error(409, "ALREADY_EXISTS", "Offer with ID \(offerId) already exists.") }
        return Self.json(200, Self.offerDocument(made))
    }

    func offerAction(_ req: HTTPRequest) -> HTTPResponse {
        let p = req.pathParameters
        let parts = (p["offerAction"] ?? "").split(separator: ":")
        guard parts.count == 2, let next = ["activate": "ACTIVE", "deactivate": "INACTIVE"][String(parts[1])] else {
            return Self.error(404, "NOT_FOUND", "Requested entity was not found.")
        }
        let offerId = String(parts[0])
        let changed: Offer? = state.withLock { s in
            guard let i = s.offers.firstIndex(where: { $0.productId == p["productId"] && $0.basePlanId == p["basePlanId"] && $0.offerId == offerId }) else { return nil }
            s.offers[i].state = next
            return s.offers[i]
        }
        guard let changed else { return Self.error(404, "NOT_FOUND", "Requested entity was not found.") }
        return Self.json(200, Self.offerDocument(changed))
    }

    func readPurchase(_ req: HTTPRequest) -> HTTPResponse {
        guard let token = req.pathParameters["token"], let p = purchase(token),
            (p.package ?? packageName) == req.pathParameters["package"]
        else {
            return Self.error(400, "INVALID_ARGUMENT", "The purchase token was not found.")
        }
        var offerDetails: [String: Any] = ["basePlanId": p.basePlanId, "offerTags": p.offerTags]
        if let offerId = p.offerId { offerDetails["offerId"] = offerId }
        let offer = state.withLock { s in s.offers.first { $0.productId == p.productId && $0.basePlanId == p.basePlanId && $0.offerId == p.offerId } }
        let phase = p.offerPhase ?? (p.offerId == nil ? "basePrice" : offer?.regionalConfigs[p.regionCode]?["free"] != nil ? "freeTrial" : "introductoryPrice")
        let item: [String: Any] = [
            "productId": p.productId, "expiryTime": Timestamp.iso8601(p.startTime.addingTimeInterval(30 * 86_400)),
            "offerDetails": offerDetails, "offerPhase": [phase: [String: Any]()],
            "autoRenewingPlan": ["autoRenewEnabled": true, "recurringPrice": ["currencyCode": p.recurringPrice.currency, "units": p.recurringPrice.units,
                                                                             "nanos": p.recurringPrice.nanos]],
        ]
        var document: [String: Any] = [
            "kind": "androidpublisher#subscriptionPurchaseV2", "regionCode": p.regionCode, "startTime": Timestamp.iso8601(p.startTime),
            "subscriptionState": "SUBSCRIPTION_STATE_ACTIVE", "latestOrderId": "GPA.0000-0000-0000-00000",
            "acknowledgementState": p.acknowledged ? "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED" : "ACKNOWLEDGEMENT_STATE_PENDING",
            "lineItems": [item],
        ]
        if p.testPurchase { document["testPurchase"] = [String: Any]() }
        if let linked = p.linkedPurchaseToken { document["linkedPurchaseToken"] = linked }
        if let account = p.obfuscatedAccountId { document["externalAccountIdentifiers"] = ["obfuscatedExternalAccountId": account] }
        return Self.json(200, document)
    }

    func acknowledge(_ req: HTTPRequest) -> HTTPResponse {
        let parts = (req.pathParameters["tokenAction"] ?? "").split(separator: ":")
        guard parts.count == 2, parts[1] == "acknowledge" else { return Self.error(404, "NOT_FOUND", "Requested entity was not found.") }
        let token = String(parts[0])
        let refused = state.withLock { s in
            guard s.failingAcknowledgements > 0 else { return false }
            s.failingAcknowledgements -= 1
            return true
        }
        if refused { return Self.error(503, "UNAVAILABLE", "The service is currently unavailable (injected by the test).") }
        let known: Bool = state.withLock { s in
            guard let p = s.purchases[token], (p.package ?? packageName) == req.pathParameters["package"] else { return false }
            s.purchases[token]!.acknowledged = true
            return true
        }
        guard known else { return Self.error(400, "INVALID_ARGUMENT", "The purchase token was not found.") }
        return HTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: Data())
    }

    // MARK: Google's rules and shapes

    /// What Google would refuse in a `SubscriptionOffer`, or nil.
    static func problem(offer: [String: Any], regions: [RegionPrice]) -> String? {
        guard let phases = offer["phases"] as? [[String: Any]], (1...2).contains(phases.count) else {
            return "An offer must have at least one and at most two phases."
        }
        let currencies = Dictionary(regions.map { ($0.region, $0.currency) }, uniquingKeysWith: { a, _ in a })
        for phase in phases {
            guard let count = phase["recurrenceCount"] as? Int, count >= 1 else { return "Phase recurrence count must be positive." }
            guard let duration = phase["duration"] as? String, duration.range(of: "^P[0-9]+[DWMY]$", options: .regularExpression) != nil else {
                return "Phase duration must be an ISO 8601 duration."
            }
            guard let configs = phase["regionalConfigs"] as? [[String: Any]], !configs.isEmpty else { return "Phase regional configs are required." }
            for config in configs {
                guard let region = config["regionCode"] as? String, let currency = currencies[region] else {
                    return "Region \(config["regionCode"] ?? "") is not available in the base plan."
                }
                let kinds = ["price", "relativeDiscount", "absoluteDiscount", "free"].filter { config[$0] != nil }
                guard kinds.count == 1 else { return "Exactly one of price, relativeDiscount, absoluteDiscount or free is required for \(region)." }
                if let relative = config["relativeDiscount"] as? Double, !(relative > 0 && relative < 1) {
                    return "Relative discount must be strictly between 0 and 1."
                }
                if let money = config["absoluteDiscount"] as? [String: Any], money["currencyCode"] as? String != currency {
                    return "Absolute discount for \(region) must be in \(currency)."
                }
            }
        }
        guard let regional = offer["regionalConfigs"] as? [[String: Any]], !regional.isEmpty else { return "Offer regional configs are required." }
        let tags = (offer["offerTags"] as? [[String: Any]] ?? []).compactMap { $0["tag"] as? String }
        if tags.count > 20 || tags.contains(where: { $0.range(of: "^[a-z0-9][a-z0-9-]{0,19}$", options: .regularExpression) == nil }) {
            return "Offer tags must be at most 20 lower-case letters, numbers and hyphens."
        }
        return nil
    }

    static func offerDocument(_ offer: Offer) -> [String: Any] {
        var document = offer.document.mapValues { $0 as Any }
        document["state"] = offer.state
        return document
    }

    static func money(_ price: String, _ currency: String) -> [String: Any] {
        let parts = price.split(separator: ".")
        let nanos = parts.count > 1 ? Int(String(parts[1]).padding(toLength: 9, withPad: "0", startingAt: 0)) ?? 0 : 0
        return ["currencyCode": currency, "units": String(parts[0]), "nanos": nanos]
    }

    /// JSON values as `Sendable` for keeping (they are immutable once parsed).
    static func sendable(_ value: Any) -> any Sendable {
        switch value {
        case let s as String: s
        case let n as NSNumber: n.doubleValue == Double(n.intValue) ? n.intValue as any Sendable : n.doubleValue
        case let a as [Any]: a.map(sendable)
        case let d as [String: Any]: d.mapValues(sendable)
        default: String(describing: value)
        }
    }

    static func error(_ status: Int, _ code: String, _ message: String) -> HTTPResponse {
        FakeGoogleOAuth.json(status, ["error": ["code": status, "message": message, "status": code]])
    }

    static func json(_ status: Int, _ object: [String: Any]) -> HTTPResponse { FakeGoogleOAuth.json(status, object) }
}
