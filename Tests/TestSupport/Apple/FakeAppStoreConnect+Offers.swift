import Core
import Cryptography
import Foundation
import HTTP

/// Offers (`subscriptionOfferCodes`) and their custom codes (`subscriptionOfferCodeCustomCodes`):
/// create, read, list, and switch off with `PATCH {active: false}`.
extension FakeAppStoreConnect {
    static let eligibilities: Set<String> = ["NEW", "EXISTING", "EXPIRED"]
    static let offerEligibilities: Set<String> = ["STACK_WITH_INTRO_OFFERS", "REPLACE_INTRO_OFFERS"]
    static let offerModes: Set<String> = ["PAY_AS_YOU_GO", "PAY_UP_FRONT", "FREE_TRIAL"]
    static let durations: Set<String> = ["THREE_DAYS", "ONE_WEEK", "TWO_WEEKS", "ONE_MONTH", "TWO_MONTHS", "THREE_MONTHS", "SIX_MONTHS", "ONE_YEAR"]

    /// `POST /v1/subscriptionOfferCodes`: the attributes Apple requires, a known subscription,
    /// one price per territory inlined in `included` (with a price point of that subscription
    /// and territory, or none for a free trial), and room under the active-offer limit.
    func createOffer(_ req: HTTPRequest) -> HTTPResponse {
        guard let doc = RequestDocument(req.body, type: "subscriptionOfferCodes") else { return AppleError.badDocument }
        let a = doc.attributes
        guard let name = a["name"] as? String, !name.isEmpty else { return attributeError("name") }
        guard let eligibilities = a["customerEligibilities"] as? [String], !eligibilities.isEmpty,
              Set(eligibilities).isSubset(of: Self.eligibilities) else { return attributeError("customerEligibilities") }
        var named: [String: String] = [:]
        for (field, allowed) in [("offerEligibility", Self.offerEligibilities), ("offerMode", Self.offerModes), ("duration", Self.durations)] {
            guard let value = a[field] as? String, allowed.contains(value) else { return attributeError(field) }
            named[field] = value
        }
        guard let periods = a["numberOfPeriods"] as? Int, periods >= 1 else { return attributeError("numberOfPeriods") }
        guard let subscriptionId = doc.linkage("subscription", type: "subscriptions"),
              let subscription = state.withLock({ $0.subscriptions[subscriptionId] }) else {
            return AppleError.entity("RELATIONSHIP.INVALID", "No such subscription.", pointer: "/data/relationships/subscription")
        }
        guard let prices = offerPrices(doc, subscription: subscription, freeTrial: named["offerMode"] == "FREE_TRIAL") else {
            return AppleError.entity("RELATIONSHIP.INVALID", "Each price needs a territory of the subscription, once, and a price point of it "
                                     + "in that territory (none for FREE_TRIAL).", pointer: "/data/relationships/prices")
        }
        let limit = limits.activeOffersPerSubscription
        let created = state.withLock { s -> Offer? in
            guard s.offers.filter({ $0.subscriptionId == subscriptionId && $0.active }).count < limit else { return nil }
            let offer = Offer(id: nextId(&s), subscriptionId: subscriptionId, name: name, attributes: named,
                              customerEligibilities: eligibilities, numberOfPeriods: periods, prices: prices, active: true)
            s.offers.append(offer)
            return offer
        }
        guard let created else {
            return AppleError.entity("ATTRIBUTE.INVALID", "A subscription can have at most \(limit) active offer codes.", pointer: "/data/relationships/subscription")
        }
        return AppleError.document(201, ["data": offerResource(created), "links": ["self": link(req.path)]])
    }

    /// The `included` prices the document's `prices` relationship names: territory → price point.
    private func offerPrices(_ doc: RequestDocument, subscription: Subscription, freeTrial: Bool) -> [String: String?]? {
        guard let ids = doc.toMany("prices", type: "subscriptionOfferCodePrices"), !ids.isEmpty else { return nil }
        var prices: [String: String?] = [:]
        for id in ids {
            guard let item = doc.included.first(where: { $0["type"] as? String == "subscriptionOfferCodePrices" && $0["id"] as? String == id }),
                  let territory = RequestDocument.linkage(item, "territory", type: "territories"),
                  subscription.territories.contains(where: { $0.territory == territory }), prices[territory] == nil else { return nil }
            let point = RequestDocument.linkage(item, "subscriptionPricePoint", type: "subscriptionPricePoints")
            if freeTrial ? point != nil : !subscription.points.contains(where: { $0.id == point && $0.territory == territory }) { return nil }
            prices[territory] = .some(point)
        }
        return prices
    }

    /// `POST /v1/subscriptionOfferCodeCustomCodes`: a code not used before (in any case), a
    /// number of codes, an optional expiry date not in the past, and an active offer.
    func createCode(_ req: HTTPRequest) -> HTTPResponse {
        guard let doc = RequestDocument(req.body, type: "subscriptionOfferCodeCustomCodes") else { return AppleError.badDocument }
        let a = doc.attributes
        guard let code = a["customCode"] as? String, !code.isEmpty else { return attributeError("customCode") }
        guard let count = a["numberOfCodes"] as? Int, count >= 1 else { return attributeError("numberOfCodes") }
        let expiry = a["expirationDate"] as? String
        if a["expirationDate"] != nil, !(a["expirationDate"] is NSNull) {
            let today = String(ISO8601DateFormatter.string(from: Date(), timeZone: TimeZone(identifier: "UTC")!, formatOptions: [.withFullDate]))
            guard let expiry, ISO8601DateFormatter.date(fullDate: expiry) != nil, expiry >= today else { return attributeError("expirationDate") }
        }
        guard let offerId = doc.linkage("offerCode", type: "subscriptionOfferCodes") else {
            return AppleError.entity("RELATIONSHIP.REQUIRED", "An offer code is required.", pointer: "/data/relationships/offerCode")
        }
        let outcome = state.withLock { s -> Result<CustomCode, HTTPError> in
            guard let offer = s.offers.first(where: { $0.id == offerId }), offer.active else {
                return .failure(HTTPError(409, "RELATIONSHIP.INVALID", "No such active offer code.", field: "/data/relationships/offerCode"))
            }
            guard !s.codes.contains(where: { $0.customCode.uppercased() == code.uppercased() }) else {
                return .failure(HTTPError(409, "ATTRIBUTE.INVALID", "This custom code is already in use.", field: "/data/attributes/customCode"))
            }
            let made = CustomCode(id: nextId(&s), offerId: offerId, customCode: code, numberOfCodes: count, expirationDate: expiry,
                                  createdDate: Date(), active: true)
            s.codes.append(made)
            return .success(made)
        }
        switch outcome {
        case .failure(let e): return AppleError.entity(e.code, e.message, pointer: e.field ?? "")
        case .success(let made): return AppleError.document(201, ["data": codeResource(made), "links": ["self": link(req.path)]])
        }
    }

    func readOffer(_ req: HTTPRequest) -> HTTPResponse {
        guard let offer = state.withLock({ s in s.offers.first { $0.id == req.pathParameters["id"] } }) else { return AppleError.notFound(req.path) }
        return AppleError.document(200, ["data": offerResource(offer), "links": ["self": link(req.path)]])
    }

    func offersOfSubscription(_ req: HTTPRequest) -> HTTPResponse {
        let id = req.pathParameters["id"] ?? ""
        guard let offers = state.withLock({ s in s.subscriptions[id].map { _ in s.offers.filter { $0.subscriptionId == id } } }) else {
            return AppleError.notFound(req.path)
        }
        return page(offers.map { (offerResource($0), []) }, req, maxLimit: 200)
    }

    func codesOfOffer(_ req: HTTPRequest) -> HTTPResponse {
        let id = req.pathParameters["id"] ?? ""
        guard let codes = state.withLock({ s in s.offers.contains { $0.id == id } ? s.codes.filter { $0.offerId == id } : nil }) else {
            return AppleError.notFound(req.path)
        }
        return page(codes.map { (codeResource($0), []) }, req, maxLimit: 200)
    }

    /// `PATCH /v1/subscriptionOfferCodes/{id}`.
    func switchOffer(_ req: HTTPRequest) -> HTTPResponse {
        setActive(req, type: "subscriptionOfferCodes", \.offers, switchesBackOn: limits.offersSwitchBackOn) { offerResource($0) }
    }

    /// `PATCH /v1/subscriptionOfferCodeCustomCodes/{id}`.
    func switchCode(_ req: HTTPRequest) -> HTTPResponse {
        setActive(req, type: "subscriptionOfferCodeCustomCodes", \.codes, switchesBackOn: true) { codeResource($0) }
    }

    /// `{data: {type, id, attributes: {active}}}` with the path's id. Switching is idempotent;
    /// switching back on is refused unless `switchesBackOn` (see `Limits.offersSwitchBackOn`).
    private func setActive<T: Switchable>(_ req: HTTPRequest, type: String, _ collection: WritableKeyPath<State, [T]>, switchesBackOn: Bool,
                                          render: (T) -> [String: Any]) -> HTTPResponse {
        let id = req.pathParameters["id"] ?? ""
        guard let doc = RequestDocument(req.body, type: type) else { return AppleError.badDocument }
        guard doc.data["id"] as? String == id else {
            return AppleError.entity("ID.INVALID", "The id in the request body does not match the id in the path.", pointer: "/data/id")
        }
        guard Set(doc.attributes.keys) == ["active"], let active = doc.attributes["active"] as? Bool else { return attributeError("active") }
        let outcome = state.withLock { s -> T?? in
            guard let i = s[keyPath: collection].firstIndex(where: { $0.id == id }) else { return .none }
            if active && !s[keyPath: collection][i].active && !switchesBackOn { return .some(.none) }
            s[keyPath: collection][i].active = active
            return s[keyPath: collection][i]
        }
        switch outcome {
        case .none: return AppleError.notFound(req.path)
        case .some(.none): return AppleError.entity("ATTRIBUTE.INVALID", "A deactivated resource cannot be activated again.", pointer: "/data/attributes/active")
        case .some(.some(let item)): return AppleError.document(200, ["data": render(item), "links": ["self": link(req.path)]])
        }
    }

    private func attributeError(_ name: String) -> HTTPResponse {
        AppleError.entity("ATTRIBUTE.INVALID", "'\(name)' is missing or not valid.", pointer: "/data/attributes/\(name)")
    }

    func offerResource(_ offer: Offer) -> [String: Any] {
        let codes = state.withLock { s in s.codes.filter { $0.offerId == offer.id }.reduce(0) { $0 + $1.numberOfCodes } }
        var attributes: [String: Any] = offer.attributes
        attributes["name"] = offer.name
        attributes["customerEligibilities"] = offer.customerEligibilities
        attributes["numberOfPeriods"] = offer.numberOfPeriods
        attributes["totalNumberOfCodes"] = codes
        attributes["active"] = offer.active
        let related = "/v1/subscriptionOfferCodes/\(offer.id)"
        return resource("subscriptionOfferCodes", offer.id, attributes: attributes, relationships: [
            "subscription": toOne("subscriptions", offer.subscriptionId, false, related: "\(related)/subscription"),
            "customCodes": ["links": ["related": link("\(related)/customCodes")]],
            "oneTimeUseCodes": ["links": ["related": link("\(related)/oneTimeUseCodes")]],
            "prices": ["links": ["related": link("\(related)/prices")]],
        ])
    }

    func codeResource(_ code: CustomCode) -> [String: Any] {
        let created = ISO8601DateFormatter.string(from: code.createdDate, timeZone: TimeZone(identifier: "UTC")!,
                                                  formatOptions: [.withInternetDateTime, .withFractionalSeconds])
        return resource("subscriptionOfferCodeCustomCodes", code.id, attributes: [
            "customCode": code.customCode, "numberOfCodes": code.numberOfCodes, "createdDate": created,
            "expirationDate": code.expirationDate ?? NSNull(), "active": code.active,
        ], relationships: ["offerCode": toOne("subscriptionOfferCodes", code.offerId, false,
                                              related: "/v1/subscriptionOfferCodeCustomCodes/\(code.id)/offerCode")])
    }
}

/// What `PATCH {active}` changes: offers and custom codes.
protocol Switchable: Sendable {
    var id: String { get }
    var active: Bool { get set }
}

extension FakeAppStoreConnect.Offer: Switchable {}
extension FakeAppStoreConnect.CustomCode: Switchable {}

/// A JSON:API request document: `data` of the expected `type`, and `included`.
struct RequestDocument {
    let data: [String: Any]
    let included: [[String: Any]]

    init?(_ body: Data, type: String) {
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
              let data = object["data"] as? [String: Any], data["type"] as? String == type else { return nil }
        self.data = data
        included = object["included"] as? [[String: Any]] ?? []
    }

    var attributes: [String: Any] { data["attributes"] as? [String: Any] ?? [:] }

    func linkage(_ name: String, type: String) -> String? { Self.linkage(data, name, type: type) }

    /// The ids of a to-many relationship's linkage, when all are of `type`.
    func toMany(_ name: String, type: String) -> [String]? {
        guard let items = ((data["relationships"] as? [String: Any])?[name] as? [String: Any])?["data"] as? [[String: Any]] else { return nil }
        let ids = items.compactMap { $0["type"] as? String == type ? $0["id"] as? String : nil }
        return ids.count == items.count ? ids : nil
    }

    /// The id of `resource`'s to-one relationship `name`, when it links a `type`.
    static func linkage(_ resource: [String: Any], _ name: String, type: String) -> String? {
        guard let linked = ((resource["relationships"] as? [String: Any])?[name] as? [String: Any])?["data"] as? [String: Any],
              linked["type"] as? String == type else { return nil }
        return linked["id"] as? String
    }
}

extension AppleError {
    /// A body that is not JSON, or whose `data` is not of the endpoint's type.
    static var badDocument: HTTPResponse {
        response(409, "ENTITY_ERROR.INCLUDED.INVALID", "The provided entity is invalid", "The request body is not a document of this resource type.")
    }
}

extension ISO8601DateFormatter {
    /// A `YYYY-MM-DD` date (UTC), or nil.
    static func date(fullDate: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withFullDate]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return fullDate.count == 10 ? formatter.date(from: fullDate) : nil
    }
}
