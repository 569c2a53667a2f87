import Core
import Foundation

/// The Stripe API calls Redeem makes with one secret key (docs/stripe.md): a price read, a coupon
/// made, promotion codes looked for, made and switched on or off. Stripe's API takes
/// form-encoded bodies (`a[b][]=c`) and answers JSON; an error is `{"error": {"message"}}`.
/// Calls go through `AppleHTTP` and `AppleRetry` as the stores' do: 429, 5xx and no answer are
/// `retryLater`, anything else Stripe refuses is `refused` with its message. The key is sent as
/// the bearer and never logged.
final class StripeClient: Sendable {
    let http: AppleHTTP
    let retry: AppleRetry
    private let key: String
    let now: @Sendable () -> Date

    init(
        base: URL, key: String, timeout: TimeInterval, retry: AppleRetry,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        http = AppleHTTP(base: base, timeout: timeout, dependency: "stripe")
        self.key = key
        var retry = retry
        retry.api = "Stripe"
        self.retry = retry
        self.now = now
    }

    struct Price: Decodable, Sendable {
        var id: String
        var product: String
    }
    struct Coupon: Decodable, Sendable { var id: String }
    struct PromotionCode: Decodable, Sendable {
        var id: String
        var code: String
        var active: Bool
        var coupon: Coupon?
    }
    private struct List<T: Decodable>: Decodable { var data: [T] }

    /// A price, for its product (a coupon applies to products, a session sells prices).
    func price(_ id: String) async throws(AppleCallError) -> Price {
        try decode(try await call("GET", "/v1/prices/\(AppleHTTP.encode(id))", idempotent: true))
    }

    /// Makes a coupon; nil when Stripe has one by this id already (an earlier run made it and its
    /// answer was lost).
    func createCoupon(_ form: [(String, String)]) async throws(AppleCallError) -> Coupon? {
        do {
            return try decode(try await call("POST", "/v1/coupons", form: form, idempotent: false))
        } catch .refused(400, let message) where message.contains("already exists") {
            return nil
        }
    }

    /// The promotion codes of `coupon` with `code`, switched on or off.
    func promotionCodes(code: String, coupon: String) async throws(AppleCallError) -> [PromotionCode] {
        let list: List<PromotionCode> = try decode(
            try await call(
                "GET", "/v1/promotion_codes", query: [("code", code), ("coupon", coupon), ("limit", "10")],
                idempotent: true))
        return list.data
    }

    func createPromotionCode(_ form: [(String, String)]) async throws(AppleCallError) -> PromotionCode {
        try decode(try await call("POST", "/v1/promotion_codes", form: form, idempotent: false))
    }

    /// Switches a promotion code on or off: the same request twice leaves it as the first did.
    func setPromotionCode(_ id: String, active: Bool) async throws(AppleCallError) -> PromotionCode {
        try decode(
            try await call(
                "POST", "/v1/promotion_codes/\(AppleHTTP.encode(id))", form: [("active", active ? "true" : "false")],
                idempotent: true))
    }

    struct Customer: Decodable, Sendable { var id: String }
    struct Session: Decodable, Sendable {
        var id: String
        var url: String
    }

    /// Makes a customer (`metadata[app_user_id]`, `metadata[redeem_account_id]`) under Stripe's
    /// `Idempotency-Key`: the same key within Stripe's 24 hours answers the customer the first
    /// request made, so the call is safe to repeat.
    func createCustomer(_ form: [(String, String)], idempotencyKey: String) async throws(AppleCallError) -> Customer {
        try decode(
            try await call(
                "POST", "/v1/customers", form: form, headers: [("Idempotency-Key", idempotencyKey)], idempotent: true))
    }

    /// Makes a Checkout Session; its `url` is where the customer pays.
    func createCheckoutSession(_ form: [(String, String)]) async throws(AppleCallError) -> Session {
        try decode(try await call("POST", "/v1/checkout/sessions", form: form, idempotent: false))
    }

    /// Makes a billing-portal session for a customer.
    func createPortalSession(customer: String, returnURL: String) async throws(AppleCallError) -> Session {
        try decode(
            try await call(
                "POST", "/v1/billing_portal/sessions", form: [("customer", customer), ("return_url", returnURL)],
                idempotent: false))
    }

    // MARK: Sending

    /// A form body, Stripe's way: `key=value` pairs, percent-encoded, joined by `&`.
    static func formBody(_ form: [(String, String)]) -> Data {
        Data(form.map { "\(AppleHTTP.encode($0.0))=\(AppleHTTP.encode($0.1))" }.joined(separator: "&").utf8)
    }

    /// Stripe's error message (`error.message`), or the status.
    static func message(_ body: Data, status: Int) -> String {
        struct Failure: Decodable {
            struct Detail: Decodable { var message: String? }
            var error: Detail?
        }
        let text = (try? JSONDecoder().decode(Failure.self, from: body))?.error?.message
        return "Stripe refused (\(status)): " + (text.map { String($0.prefix(500)) } ?? "no message")
    }

    private var unreadable: AppleCallError { .retryLater(after: nil, reason: "Stripe answered what cannot be read") }

    private func decode<T: Decodable>(_ body: Data) throws(AppleCallError) -> T {
        guard let value = try? JSONDecoder().decode(T.self, from: body) else { throw unreadable }
        return value
    }

    private func call(
        _ method: String, _ path: String, query: [(String, String)] = [], form: [(String, String)]? = nil,
        headers: [(String, String)] = [], idempotent: Bool
    ) async throws(AppleCallError) -> Data {
        let body = form.map(Self.formBody)
        let key = self.key
        let outcome = await retry.run(idempotent: idempotent, now: now) {
            await http.send(
                method, path, query: query, body: body, contentType: "application/x-www-form-urlencoded", token: key,
                headers: headers)
        }
        switch outcome {
        case .success(let data): return data
        case .retry(let after, let reason): throw .retryLater(after: after, reason: reason)
        case .refused(let status, let data): throw .refused(status: status, message: Self.message(data, status: status))
        }
    }
}
