import Core
import Cryptography
import Foundation
import Synchronization

/// An offer code (`subscriptionOfferCodes`) as App Store Connect reports it.
struct AppStoreOffer: Sendable, Equatable {
    var id: String
    var name: String
    var active: Bool
}

/// A custom code of an offer (`subscriptionOfferCodeCustomCodes`).
struct AppStoreCustomCode: Sendable, Equatable {
    var id: String
    var customCode: String
    var active: Bool
    /// When Apple made it (the settle time counts from here).
    var createdDate: Date?
}

/// What `POST /v1/subscriptionOfferCodes` asks for.
struct AppStoreOfferRequest: Sendable, Equatable {
    enum Mode: String, Sendable {
        /// The customer pays a lower price for `numberOfPeriods` periods of `duration`.
        case payAsYouGo = "PAY_AS_YOU_GO"
        /// The customer pays nothing for the offer's time.
        case freeTrial = "FREE_TRIAL"
    }

    var subscriptionId: String
    var name: String
    var newCustomersOnly: Bool
    var mode: Mode
    var duration: AppStoreOfferDuration
    var numberOfPeriods: Int
    /// Territory → the price point of the offer's price there; nil for a free trial, whose
    /// prices name only their territory (Apple refuses a price point with `FREE_TRIAL`).
    var prices: [String: String?]

    /// `NEW` for new customers only, else also those who had the subscription.
    var customerEligibilities: [String] { newCustomersOnly ? ["NEW"] : ["NEW", "EXISTING", "EXPIRED"] }

    /// The JSON:API document, prices inlined in `included` with local ids (`${…}`), as Apple's
    /// create request takes them.
    func document() -> Data {
        let territories = prices.keys.sorted()
        let inline: [[String: Any]] = territories.map { territory in
            var relationships: [String: Any] = ["territory": ["data": ["type": "territories", "id": territory]]]
            if case .some(.some(let point)) = prices[territory] {
                relationships["subscriptionPricePoint"] = ["data": ["type": "subscriptionPricePoints", "id": point]]
            }
            return ["type": "subscriptionOfferCodePrices", "id": "${price-\(territory)}", "relationships": relationships]
        }
        let document: [String: Any] = [
            "data": [
                "type": "subscriptionOfferCodes",
                "attributes": [
                    "name": name, "customerEligibilities": customerEligibilities,
                    // The coupon's terms are what the customer gets: they replace an introductory offer.
                    "offerEligibility": "REPLACE_INTRO_OFFERS",
                    "offerMode": mode.rawValue, "duration": duration.rawValue, "numberOfPeriods": numberOfPeriods,
                ] as [String: Any],
                "relationships": [
                    "subscription": ["data": ["type": "subscriptions", "id": subscriptionId]],
                    "prices": ["data": inline.map { ["type": $0["type"]!, "id": $0["id"]!] }],
                ],
            ] as [String: Any],
            "included": inline,
        ]
        return try! JSONSerialization.data(withJSONObject: document, options: [.sortedKeys, .withoutEscapingSlashes])
    }
}

/// The App Store Connect API calls for subscription offer codes (docs/stores.md): the
/// subscription's offers, current prices and price points, making an offer and its custom code,
/// and switching either off. Each call carries a token of the cache (one reused until a minute
/// before it expires, as Apple advises), and is sent again as `AppleRetry` allows: reads after a
/// 429, a 5xx or no answer; makes only after a 429 (the caller looks before sending one again).
final class AppStoreConnectClient: Sendable {
    let http: AppleHTTP
    let retry: AppleRetry
    let now: @Sendable () -> Date
    private let tokens: Mutex<AppleAPITokenCache>

    init(base: URL, token: AppleAPIToken, timeout: TimeInterval, retry: AppleRetry, now: @escaping @Sendable () -> Date = { Date() }) {
        http = AppleHTTP(base: base, timeout: timeout, dependency: "app_store_connect")
        self.retry = retry
        self.now = now
        tokens = Mutex(AppleAPITokenCache(issuer: token))
    }

    convenience init(settings: AppStoreConnectSettings, timeout: TimeInterval, retry: AppleRetry) {
        self.init(base: settings.url, token: AppleAPIToken(api: .appStoreConnect, keyId: settings.keyId, issuerId: settings.issuerId,
                                                           key: settings.privateKey),
                  timeout: timeout, retry: retry)
    }

    // MARK: Reads

    /// Every offer code of a subscription, active or not.
    func offers(subscriptionId: String) async throws(AppleCallError) -> [AppStoreOffer] {
        let page: (data: [JSONAPI.Resource<JSONAPI.OfferAttributes>], included: [JSONAPI.Resource<JSONAPI.IncludedAttributes>]) =
            try await pages("/v1/subscriptions/\(AppleHTTP.encode(subscriptionId))/offerCodes", query: [("limit", "200")])
        return page.data.map { AppStoreOffer(id: $0.id, name: $0.attributes?.name ?? "", active: $0.attributes?.active ?? false) }
    }

    /// The custom codes of an offer.
    func customCodes(offerId: String) async throws(AppleCallError) -> [AppStoreCustomCode] {
        let page: (data: [JSONAPI.Resource<JSONAPI.CustomCodeAttributes>], included: [JSONAPI.Resource<JSONAPI.IncludedAttributes>]) =
            try await pages("/v1/subscriptionOfferCodes/\(AppleHTTP.encode(offerId))/customCodes", query: [("limit", "200")])
        return page.data.map(Self.customCode)
    }

    /// The price new customers pay now in each territory of the subscription
    /// (`GET /v1/subscriptions/{id}/prices`): per territory, the latest price not preserved for
    /// existing subscribers whose start date has come.
    func currentPrices(subscriptionId: String) async throws(AppleCallError) -> [OfferPricing.Current] {
        let page: (data: [JSONAPI.Resource<JSONAPI.PriceAttributes>], included: [JSONAPI.Resource<JSONAPI.IncludedAttributes>]) =
            try await pages("/v1/subscriptions/\(AppleHTTP.encode(subscriptionId))/prices",
                            query: [("include", "subscriptionPricePoint,territory"), ("limit", "200")])
        let points = Dictionary(page.included.filter { $0.type == "subscriptionPricePoints" }.map { ($0.id, $0.attributes?.customerPrice) }) { a, _ in a }
        let currencies = Dictionary(page.included.filter { $0.type == "territories" }.map { ($0.id, $0.attributes?.currency) }) { a, _ in a }
        let today = Self.day(now())
        var latest: [String: (start: String, price: Decimal)] = [:]
        for price in page.data where price.attributes?.preserved != true {
            let start = price.attributes?.startDate ?? ""
            guard start <= today, let territory = price.linked("territory"), let point = price.linked("subscriptionPricePoint"),
                  let text = points[point] ?? nil, let value = OfferPricing.decimal(text) else { continue }
            if let seen = latest[territory], seen.start > start { continue }
            latest[territory] = (start, value)
        }
        return latest.keys.sorted().map { OfferPricing.Current(territory: $0, currency: (currencies[$0] ?? nil) ?? "", price: latest[$0]!.price) }
    }

    /// The price points of a subscription in `territories` (`GET /v1/subscriptions/{id}/pricePoints`).
    func pricePoints(subscriptionId: String, territories: [String]) async throws(AppleCallError) -> [OfferPricing.Point] {
        guard !territories.isEmpty else { return [] }
        let page: (data: [JSONAPI.Resource<JSONAPI.PricePointAttributes>], included: [JSONAPI.Resource<JSONAPI.IncludedAttributes>]) =
            try await pages("/v1/subscriptions/\(AppleHTTP.encode(subscriptionId))/pricePoints",
                            query: [("filter[territory]", territories.joined(separator: ",")), ("include", "territory"), ("limit", "8000")])
        return page.data.compactMap { point in
            guard let territory = point.linked("territory"), let price = point.attributes?.customerPrice.flatMap(OfferPricing.decimal) else { return nil }
            return OfferPricing.Point(id: point.id, territory: territory, price: price)
        }
    }

    // MARK: Makes and switches off

    func createOffer(_ request: AppStoreOfferRequest) async throws(AppleCallError) -> AppStoreOffer {
        let body = try await call("POST", "/v1/subscriptionOfferCodes", body: request.document(), idempotent: false)
        guard let offer = try? JSONDecoder().decode(JSONAPI.Single<JSONAPI.OfferAttributes>.self, from: body).data else {
            throw .retryLater(after: nil, reason: "App Store Connect's answer to the new offer could not be read")
        }
        return AppStoreOffer(id: offer.id, name: offer.attributes?.name ?? request.name, active: offer.attributes?.active ?? true)
    }

    /// `POST /v1/subscriptionOfferCodeCustomCodes`: `code` for `numberOfCodes` redemptions until
    /// `expirationDate` (`YYYY-MM-DD`).
    func createCustomCode(offerId: String, code: String, numberOfCodes: Int, expirationDate: String) async throws(AppleCallError) -> AppStoreCustomCode {
        let document: [String: Any] = ["data": [
            "type": "subscriptionOfferCodeCustomCodes",
            "attributes": ["customCode": code, "numberOfCodes": numberOfCodes, "expirationDate": expirationDate] as [String: Any],
            "relationships": ["offerCode": ["data": ["type": "subscriptionOfferCodes", "id": offerId]]],
        ] as [String: Any]]
        let body = try await call("POST", "/v1/subscriptionOfferCodeCustomCodes",
                                  body: try! JSONSerialization.data(withJSONObject: document, options: [.sortedKeys]), idempotent: false)
        guard let made = try? JSONDecoder().decode(JSONAPI.Single<JSONAPI.CustomCodeAttributes>.self, from: body).data else {
            throw .retryLater(after: nil, reason: "App Store Connect's answer to the new custom code could not be read")
        }
        return Self.customCode(made)
    }

    /// `PATCH /v1/subscriptionOfferCodes/{id}` with `active`. Switching twice is harmless; whether
    /// Apple switches an offer back on is unconfirmed (it titles the call "Deactivate"): if not, its
    /// refusal is the answer.
    func setActive(_ active: Bool, offerId id: String) async throws(AppleCallError) {
        try await setActive(active, type: "subscriptionOfferCodes", id: id)
    }

    /// `PATCH /v1/subscriptionOfferCodeCustomCodes/{id}` with `active` (Apple documents both ways).
    func setActive(_ active: Bool, customCodeId id: String) async throws(AppleCallError) {
        try await setActive(active, type: "subscriptionOfferCodeCustomCodes", id: id)
    }

    private func setActive(_ active: Bool, type: String, id: String) async throws(AppleCallError) {
        let document: [String: Any] = ["data": ["type": type, "id": id, "attributes": ["active": active]] as [String: Any]]
        _ = try await call("PATCH", "/v1/\(type)/\(AppleHTTP.encode(id))", body: try! JSONSerialization.data(withJSONObject: document, options: [.sortedKeys]),
                           idempotent: true)
    }

    // MARK: Sending

    /// One call, sent again as `retry` allows; the answer's body, or why there is none.
    func call(_ method: String, _ path: String, query: [(String, String)] = [], body: Data? = nil, idempotent: Bool) async throws(AppleCallError) -> Data {
        let outcome = await retry.run(idempotent: idempotent, now: now) {
            guard let token = try? tokens.withLock({ try $0.token(now: now()) }) else { return .unreachable }
            return await http.send(method, path, query: query, body: body, token: token)
        }
        switch outcome {
        case .success(let data): return data
        case .retry(let after, let reason): throw .retryLater(after: after, reason: reason)
        case .refused(let status, let body): throw .refused(status: status, message: JSONAPI.message(body) ?? "App Store Connect refused the request (\(status))")
        }
    }

    /// Every page of a list, following `links.next` on this host (at most 100 pages).
    private func pages<A: Decodable>(_ path: String, query: [(String, String)]) async throws(AppleCallError)
        -> (data: [JSONAPI.Resource<A>], included: [JSONAPI.Resource<JSONAPI.IncludedAttributes>]) {
        var data: [JSONAPI.Resource<A>] = [], included: [JSONAPI.Resource<JSONAPI.IncludedAttributes>] = []
        var next: (path: String, query: [(String, String)])? = (path, query)
        var count = 0
        while let (path, query) = next {
            count += 1
            let body = try await call("GET", path, query: query, idempotent: true)
            guard let page = try? JSONDecoder().decode(JSONAPI.Page<A>.self, from: body) else {
                throw .retryLater(after: nil, reason: "a page from App Store Connect could not be read (\(path))")
            }
            data += page.data
            included += page.included ?? []
            next = nil
            if let link = page.links?.next, count < 100 {
                guard let relative = http.pathAndQuery(link) else { throw .retryLater(after: nil, reason: "App Store Connect's next page is on another host") }
                next = (relative, [])
            }
        }
        return (data, included)
    }

    static func customCode(_ r: JSONAPI.Resource<JSONAPI.CustomCodeAttributes>) -> AppStoreCustomCode {
        AppStoreCustomCode(id: r.id, customCode: r.attributes?.customCode ?? "", active: r.attributes?.active ?? false,
                           createdDate: JSONAPI.date(r.attributes?.createdDate))
    }

    /// `YYYY-MM-DD` of `date` in UTC, as Apple writes dates.
    static func day(_ date: Date) -> String {
        ISO8601DateFormatter.string(from: date, timeZone: TimeZone(identifier: "UTC")!, formatOptions: [.withFullDate])
    }
}
