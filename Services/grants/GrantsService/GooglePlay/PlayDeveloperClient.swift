import Core
import Foundation

/// The Google Play Developer API calls Redeem makes (docs/stores.md, "Grants and Google's API"):
/// a subscription's base plans, an offer read, made, activated and deactivated, a subscription
/// purchase read (`subscriptionsv2`) and acknowledged. Each call carries an access token of
/// `GoogleAccessTokens`, and is sent again as `AppleRetry` allows (429, 5xx, no answer; a make only
/// after a 429, so the caller reads before making again). A 401 drops the token and is sent once
/// more with a new one.
final class PlayDeveloperClient: Sendable {
    let http: AppleHTTP
    let tokens: GoogleAccessTokens
    let retry: AppleRetry
    let packageName: String
    let now: @Sendable () -> Date

    /// Every offer Redeem makes carries this tag; the app finds coupon offers by it.
    static let couponTag = "redeem-coupon"
    /// The regions version offers are written in (a required query parameter of create).
    static let regionsVersion = "2022/02"

    init(base: URL, packageName: String, tokens: GoogleAccessTokens, timeout: TimeInterval, retry: AppleRetry,
         now: @escaping @Sendable () -> Date = { Date() }) {
        http = AppleHTTP(base: base, timeout: timeout, dependency: "google_play")
        self.tokens = tokens
        var retry = retry
        retry.api = "Google Play"
        self.retry = retry
        self.packageName = packageName
        self.now = now
    }

    convenience init(settings: PlaySettings, timeout: TimeInterval, retry: AppleRetry) {
        self.init(base: settings.apiURL, packageName: settings.packageName,
                  tokens: GoogleAccessTokens(account: settings.account, tokenURL: settings.tokenURL, timeout: timeout, retry: retry),
                  timeout: timeout, retry: retry)
    }

    private var application: String { "/androidpublisher/v3/applications/\(AppleHTTP.encode(packageName))" }

    private func offersPath(_ productId: String, _ basePlanId: String) -> String {
        "\(application)/subscriptions/\(AppleHTTP.encode(productId))/basePlans/\(AppleHTTP.encode(basePlanId))/offers"
    }

    // MARK: Offers

    /// The base plans of a subscription product, with their regional prices.
    func basePlans(productId: String) async throws(AppleCallError) -> [PlayBasePlan] {
        struct Subscription: Decodable {
            struct BasePlan: Decodable {
                struct Regional: Decodable { var regionCode: String; var price: PlayMoney? }
                var basePlanId: String
                var state: String?
                var regionalConfigs: [Regional]?
            }
            var basePlans: [BasePlan]?
        }
        let body = try await call("GET", "\(application)/subscriptions/\(AppleHTTP.encode(productId))", idempotent: true)
        guard let subscription = try? JSONDecoder().decode(Subscription.self, from: body) else { throw unreadable }
        return (subscription.basePlans ?? []).map { plan in
            PlayBasePlan(basePlanId: plan.basePlanId, state: plan.state,
                         prices: Dictionary((plan.regionalConfigs ?? []).compactMap { r in r.price.map { (r.regionCode, $0) } }, uniquingKeysWith: { a, _ in a }))
        }
    }

    /// The offer, or nil when Google has none by that id.
    func offer(productId: String, basePlanId: String, offerId: String) async throws(AppleCallError) -> PlayOffer? {
        do {
            return try decode(try await call("GET", "\(offersPath(productId, basePlanId))/\(AppleHTTP.encode(offerId))", idempotent: true))
        } catch .refused(404, _) {
            return nil
        }
    }

    /// Makes the offer (state `DRAFT`); `document` is its `SubscriptionOffer`.
    func createOffer(productId: String, basePlanId: String, offerId: String, document: Data) async throws(AppleCallError) -> PlayOffer {
        try decode(try await call("POST", offersPath(productId, basePlanId), query: [("offerId", offerId), ("regionsVersion.version", Self.regionsVersion)],
                                  body: document, idempotent: false))
    }

    /// `:activate` or `:deactivate`: the same request twice leaves the offer as the first did.
    func setOffer(productId: String, basePlanId: String, offerId: String, active: Bool) async throws(AppleCallError) -> PlayOffer {
        let body: [String: String] = ["packageName": packageName, "productId": productId, "basePlanId": basePlanId, "offerId": offerId]
        let verb = active ? "activate" : "deactivate"
        return try decode(try await call("POST", "\(offersPath(productId, basePlanId))/\(AppleHTTP.encode(offerId)):\(verb)",
                                         body: try! JSONEncoder().encode(body), idempotent: true))
    }

    // MARK: Purchases

    /// A subscription purchase by its token (`purchases.subscriptionsv2.get`).
    func purchase(token: String) async throws(AppleCallError) -> PlaySubscriptionPurchase {
        try decode(try await call("GET", "\(application)/purchases/subscriptionsv2/tokens/\(AppleHTTP.encode(token))", idempotent: true))
    }

    /// Acknowledges a subscription purchase (`purchases.subscriptions.acknowledge`); Google refunds
    /// one left unacknowledged for three days.
    func acknowledge(productId: String, token: String) async throws(AppleCallError) {
        _ = try await call("POST", "\(application)/purchases/subscriptions/\(AppleHTTP.encode(productId))/tokens/\(AppleHTTP.encode(token)):acknowledge",
                           body: Data("{}".utf8), idempotent: true)
    }

    // MARK: Sending

    private var unreadable: AppleCallError { .retryLater(after: nil, reason: "Google Play answered what cannot be read") }

    private func decode<T: Decodable>(_ body: Data) throws(AppleCallError) -> T {
        guard let value = try? JSONDecoder().decode(T.self, from: body) else { throw unreadable }
        return value
    }

    private func call(_ method: String, _ path: String, query: [(String, String)] = [], body: Data? = nil, idempotent: Bool) async throws(AppleCallError) -> Data {
        for attempt in 1...2 {
            let token = try await tokens.token()
            let outcome = await retry.run(idempotent: idempotent, now: now) {
                await http.send(method, path, query: query, body: body, token: token)
            }
            switch outcome {
            case .success(let data): return data
            case .retry(let after, let reason): throw .retryLater(after: after, reason: reason)
            case .refused(401, _) where attempt == 1:
                await tokens.invalidate(token)
            case .refused(let status, let data):
                throw .refused(status: status, message: PlayError.message(data, status: status))
            }
        }
        throw .retryLater(after: nil, reason: "Google Play refused a new access token (401)")
    }
}
