import Core
import Cryptography
import Foundation
import HTTP
import Synchronization

/// A real HTTP server speaking Stripe's API for tests, in Stripe's shapes: form-encoded bodies
/// (`a[b][]=c`), JSON answers, errors as `{"error": {"type", "code", "message", "param"}}`.
///
/// - `GET /v1/prices/{id}`: the prices a test registers (`addPrice`), each with its product.
/// - `POST /v1/coupons`: a coupon, checked as Stripe does (an `id` not taken, else 400
///   `resource_already_exists`; exactly one of `percent_off` or `amount_off` with `currency`;
///   `duration` `once`, `forever` or `repeating` with `duration_in_months`; products in
///   `applies_to[products][]` that exist).
/// - `GET /v1/promotion_codes?code=&coupon=`, `POST /v1/promotion_codes` (an existing coupon, a
///   code no other active promotion code has), `POST /v1/promotion_codes/{id}` with `active`.
/// - `POST /v1/customers`, `POST /v1/checkout/sessions`, `POST /v1/billing_portal/sessions`.
///   `POST /v1/customers` honours `Idempotency-Key` as Stripe does: the same key (per mode) answers
///   the object the first request made, and a key reused with other parameters is refused (400
///   `idempotency_error`).
/// - The hosted pages a browser is sent to, without a key: a Checkout Session's (`GET /c/pay/{id}`,
///   the session's `url`) whose Pay button "pays" (`POST /c/pay/{id}`): the session completes, the
///   signed `checkout.session.completed` event is posted to the webhook route of the Redeem named by
///   `sendEvents(to:secret:)`, and the browser is sent to `success_url` (303); its back link is
///   `cancel_url`, as on Stripe's page. A billing-portal session's page (`GET /p/session/{id}`).
///
/// Every request must carry one of the secret keys it was made with as its bearer (else 401);
/// each object records the key's mode (`livemode`). Calls are recorded, and the next ones can be
/// made to answer 429 or any status. `signature` signs a webhook event as Stripe does
/// (`Stripe-Signature: t=…,v1=…`, HMAC-SHA256 of `t.payload` with the endpoint's secret).
public final class FakeStripe: Sendable {
    public struct Call: Sendable {
        public let method: String
        public let path: String
        public let form: [(String, String)]
        public let status: Int
        /// The mode of the key the call carried, nil when it carried none of the fake's.
        public let mode: Mode?
        /// The call's `Idempotency-Key` header.
        public let idempotencyKey: String?
        /// The secret key the call carried, when it was one of the fake's: which Stripe account
        /// (an app's own, `addAccount`) the call was made in.
        public var key: String? = nil

        /// The first value of a form field.
        public func field(_ name: String) -> String? { form.first { $0.0 == name }?.1 }
        /// Every value of a form field (`applies_to[products][]`).
        public func fields(_ name: String) -> [String] { form.filter { $0.0 == name }.map(\.1) }
    }

    /// An object Stripe made: its id, the form it was made from, and the key's mode.
    public struct Object: Sendable {
        public let id: String
        public let form: [(String, String)]
        public let livemode: Bool
        public var active = true
        public func field(_ name: String) -> String? { form.first { $0.0 == name }?.1 }
        public func fields(_ name: String) -> [String] { form.filter { $0.0 == name }.map(\.1) }
    }

    struct State {
        /// price id → product id.
        var prices: [String: String] = [:]
        /// Other accounts' keys (`addAccount`), with their modes.
        var otherKeys: [String: Mode] = [:]
        var coupons: [String: Object] = [:]
        var promotionCodes: [String: Object] = [:]
        var customers: [String: Object] = [:]
        var sessions: [String: Object] = [:]
        var portals: [String: Object] = [:]
        /// Idempotency keys by mode and key: the form first sent with it, and the object it made.
        var idempotent: [String: (form: [(String, String)], id: String)] = [:]
        /// Checkout Sessions paid on the hosted page, and what each event delivery was answered.
        var paid: Set<String> = []
        var deliveries: [Int] = []
        /// Where paid sessions' events are posted, and the endpoint's signing secret.
        var webhook: (gateway: URL, secret: String)?
        var calls: [Call] = []
        var failing = 0
        var failStatus = 500
        /// Promotion codes made whose answer is lost (a 500 after the code exists).
        var losingPromotionCodes = 0
        /// Whether one was lost since: listing answers 503 until losing is switched off.
        var lostPromotionCode = false
        var next = 0
    }

    let state = Mutex(State())
    /// The secret keys it accepts, by the mode they serve.
    public let keys: [Mode: String]
    private let server: HTTPServer
    public var url: URL { URL(string: "http://127.0.0.1:\(server.port)")! }

    public init(
        keys: [Mode: String] = [
            .test: "sk_test_fake4eC39HqLyjWDarjtT1zdp7dc", .live: "sk_live_fake4eC39HqLyjWDarjtT1zdp7dc"
        ]
    ) throws {
        self.keys = keys
        let box = Box()
        var router = Router()
        router.get("/v1/prices/{id}") { box.fake!.price($0) }
        router.post("/v1/coupons") { box.fake!.createCoupon($0) }
        router.get("/v1/promotion_codes") { box.fake!.listPromotionCodes($0) }
        router.post("/v1/promotion_codes") { box.fake!.createPromotionCode($0) }
        router.post("/v1/promotion_codes/{id}") { box.fake!.updatePromotionCode($0) }
        router.post("/v1/customers") { box.fake!.createCustomer($0) }
        router.post("/v1/checkout/sessions") { box.fake!.createSession($0) }
        router.post("/v1/billing_portal/sessions") { box.fake!.createPortal($0) }
        router.get("/c/pay/{id}") { box.fake!.checkoutPage($0) }
        router.post("/c/pay/{id}") { await box.fake!.pay($0) }
        router.get("/p/session/{id}") { box.fake!.portalPage($0) }
        let routes = router
        server = .fake("fake-stripe") { await box.fake!.answer($0, routes: routes) }
        box.fake = self
        try server.start()
    }

    private final class Box: @unchecked Sendable {
        // Set once, before the server starts taking requests.
        weak var fake: FakeStripe?
    }

    public func stop() async { await server.stop(drainSeconds: 0.2) }

    // MARK: What tests set up and look at

    /// A recurring price of `product`.
    public func addPrice(_ id: String, product: String) { state.withLock { $0.prices[id] = product } }

    /// Another Stripe account's secret keys, taken as well (an app's own Stripe settings): the
    /// calls record which key they carried (`Call.key`).
    public func addAccount(_ keys: [Mode: String]) {
        state.withLock { s in for (mode, key) in keys { s.otherKeys[key] = mode } }
    }

    /// The mode of a secret key the fake takes, nil for any other.
    func mode(ofKey key: String?) -> Mode? {
        guard let key else { return nil }
        return keys.first { $0.value == key }?.key ?? state.withLock { $0.otherKeys[key] }
    }

    public var received: [Call] { state.withLock { $0.calls } }
    public var coupons: [Object] { state.withLock { Array($0.coupons.values) } }
    public var promotionCodes: [Object] { state.withLock { Array($0.promotionCodes.values) } }
    public func coupon(_ id: String) -> Object? { state.withLock { $0.coupons[id] } }
    public func promotionCode(_ id: String) -> Object? { state.withLock { $0.promotionCodes[id] } }
    public var sessions: [Object] { state.withLock { Array($0.sessions.values) } }
    public var customers: [Object] { state.withLock { Array($0.customers.values) } }

    /// Posts the events of sessions paid on the hosted checkout page to `gateway`'s Stripe webhook
    /// route, signed with `secret`.
    public func sendEvents(to gateway: URL, secret: String) { state.withLock { $0.webhook = (gateway, secret) } }
    /// What Redeem answered each event the hosted page posted, in order.
    public var eventDeliveries: [Int] { state.withLock { $0.deliveries } }
    public func paid(_ sessionId: String) -> Bool { state.withLock { $0.paid.contains(sessionId) } }

    /// The next `count` promotion codes are made but answered 500, as when Stripe's answer is lost
    /// on the way, and until then listing them answers 503: the caller must find the code once
    /// Stripe answers again, rather than make a second.
    public func losePromotionCodeAnswers(_ count: Int) {
        state.withLock {
            $0.losingPromotionCodes = count
            $0.lostPromotionCode = false
        }
    }

    public func failNext(_ count: Int, status: Int = 500) {
        state.withLock {
            $0.failing = count
            $0.failStatus = status
        }
    }

    /// The `Stripe-Signature` header Stripe sends with `payload` at `time`, signed with `secret`
    /// (and with `extra` secrets too: Stripe signs with each of an endpoint's secrets while one
    /// is rolled).
    public static func signature(_ payload: Data, secret: String, time: Date = Date(), extra: [String] = []) -> String {
        let t = Int(time.timeIntervalSince1970)
        let signed = Data("\(t).".utf8) + payload
        let v1 = ([secret] + extra).map { "v1=" + Crypto.hmacSHA256(key: Array($0.utf8), signed).hex }
        return (["t=\(t)"] + v1).joined(separator: ",")
    }

    /// A signed webhook event about Checkout Session `sessionId`, as Stripe sends it:
    /// `checkout.session.completed` (the session `complete`, paid: a new subscription and its
    /// `amount_total`) or `checkout.session.expired`. Answers the event's id, its body, and the
    /// `Stripe-Signature` header made with `secret` at `time`.
    public func checkoutEvent(
        _ type: String, sessionId: String, secret: String, amountTotal: Int = 0, currency: String = "usd",
        time: Date = Date()
    ) -> (id: String, payload: Data, signature: String)? {
        guard let session = state.withLock({ $0.sessions[sessionId] }) else { return nil }
        let completed = type == "checkout.session.completed"
        var object: [String: Any] = [
            "id": session.id, "object": "checkout.session", "mode": session.field("mode") ?? "subscription",
            "livemode": session.livemode, "status": completed ? "complete" : "expired",
            "payment_status": completed ? "paid" : "unpaid",
            "client_reference_id": session.field("client_reference_id").map { $0 as Any } ?? NSNull(),
            "customer": session.field("customer").map { $0 as Any } ?? NSNull(),
            "metadata": ["app_user_id": session.field("metadata[app_user_id]") ?? ""],
            "amount_total": completed ? amountTotal : 0, "currency": currency
        ]
        object["subscription"] = completed ? newId("sub_") as Any : NSNull()
        let id = newId("evt_")
        let event: [String: Any] = [
            "id": id, "object": "event", "type": type, "api_version": "2024-06-20", "livemode": session.livemode,
            "created": Int(time.timeIntervalSince1970), "data": ["object": object]
        ]
        let payload = (try? JSONSerialization.data(withJSONObject: event, options: [.sortedKeys])) ?? Data()
        return (id, payload, Self.signature(payload, secret: secret, time: time))
    }

    public func session(_ id: String) -> Object? { state.withLock { $0.sessions[id] } }
    public var portalSessions: [Object] { state.withLock { Array($0.portals.values) } }

    // MARK: Serving

    func answer(_ req: HTTPRequest, routes: Router) async -> HTTPResponse {
        let bearer = req.header("authorization").flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
        let mode = self.mode(ofKey: bearer)
        let form = Self.form(
            req.method == "GET" ? Data(req.query.map { "\($0.key)=\($0.value)" }.joined(separator: "&").utf8) : req.body
        )
        var response: HTTPResponse
        if req.path.hasPrefix("/c/pay/") || req.path.hasPrefix("/p/session/") {
            // The hosted pages: a browser's, with no key.
            response = await routes.handle(req)
        } else if mode == nil {
            response = Self.error(401, "invalid_request_error", nil, "Invalid API Key provided.", status401: true)
        } else if let injected = takeInjectedFailure() {
            response = injected
        } else {
            response = await routes.handle(req)
            if response.route == nil {
                response = Self.error(404, "invalid_request_error", "resource_missing", "Unrecognized request URL.")
            }
        }
        let call = Call(
            method: req.method, path: req.path, form: form, status: response.status, mode: mode,
            idempotencyKey: req.header("idempotency-key"), key: mode == nil ? nil : bearer)
        state.withLock { $0.calls.append(call) }
        return response
    }

    private func takeInjectedFailure() -> HTTPResponse? {
        state.withLock { s in
            guard s.failing > 0 else { return nil }
            s.failing -= 1
            return s.failStatus == 429
                ? Self.error(429, "rate_limit_error", "rate_limit", "Too many requests hit the API too quickly.")
                : Self.error(s.failStatus, "api_error", nil, "Injected by the test.")
        }
    }

    private func livemode(_ req: HTTPRequest) -> Bool {
        let bearer = req.header("authorization").map { String($0.dropFirst(7)) }
        return mode(ofKey: bearer) == .live
    }

    private func newId(_ prefix: String) -> String {
        state.withLock { s in
            s.next += 1
            let n = String(s.next)
            return prefix + String(repeating: "0", count: max(0, 14 - n.count)) + n
        }
    }

    func price(_ req: HTTPRequest) -> HTTPResponse {
        let id = req.pathParameters["id"] ?? ""
        guard let product = state.withLock({ $0.prices[id] }) else {
            return Self.error(404, "invalid_request_error", "resource_missing", "No such price: '\(id)'", param: "id")
        }
        return Self.json(
            200, ["id": id, "object": "price", "product": product, "type": "recurring", "livemode": livemode(req)])
    }

    func createCoupon(_ req: HTTPRequest) -> HTTPResponse {
        let form = Self.form(req.body)
        func value(_ k: String) -> String? { form.first { $0.0 == k }?.1 }
        let percent = value("percent_off").flatMap(Double.init), amount = value("amount_off").flatMap(Int.init)
        guard (percent == nil) != (amount == nil) else {
            return Self.error(
                400, "invalid_request_error", "parameter_missing",
                "You must pass exactly one of percent_off or amount_off.")
        }
        if let percent, !(percent > 0 && percent <= 100) {
            return Self.error(
                400, "invalid_request_error", "parameter_invalid_float", "percent_off must be in (0, 100].",
                param: "percent_off")
        }
        if amount != nil, value("currency")?.count != 3 {
            return Self.error(
                400, "invalid_request_error", "parameter_missing", "currency is required with amount_off.",
                param: "currency")
        }
        switch value("duration") ?? "once" {
        case "once", "forever": break
        case "repeating":
            guard let months = value("duration_in_months").flatMap(Int.init), months > 0 else {
                return Self.error(
                    400, "invalid_request_error", "parameter_missing",
                    "duration_in_months is required for a repeating coupon.",
                    param: "duration_in_months")
            }
        default:
            return Self.error(
                400, "invalid_request_error", "parameter_invalid_string", "Invalid duration.", param: "duration")
        }
        let products = Set(state.withLock { $0.prices.values })
        for product in form.filter({ $0.0 == "applies_to[products][]" }).map(\.1) where !products.contains(product) {
            return Self.error(
                400, "invalid_request_error", "resource_missing", "No such product: '\(product)'",
                param: "applies_to[products]")
        }
        let id = value("id") ?? newId("co_")
        let made = Object(id: id, form: form, livemode: livemode(req))
        let taken = state.withLock { s -> Bool in
            guard s.coupons[id] == nil else { return true }
            s.coupons[id] = made
            return false
        }
        if taken {
            return Self.error(
                400, "invalid_request_error", "resource_already_exists", "Coupon already exists.", param: "id")
        }
        return Self.json(200, Self.couponDocument(made))
    }

    func listPromotionCodes(_ req: HTTPRequest) -> HTTPResponse {
        if state.withLock({ $0.losingPromotionCodes > 0 && $0.lostPromotionCode }) {
            return Self.error(503, "api_error", nil, "Stripe is unreachable (injected by the test).")
        }
        let code = req.query["code"], coupon = req.query["coupon"], live = livemode(req)
        let found = state.withLock { s in
            s.promotionCodes.values.filter { p in
                p.livemode == live && (code == nil || p.field("code") == code)
                    && (coupon == nil || p.field("coupon") == coupon)
            }
        }
        return Self.json(
            200,
            [
                "object": "list", "has_more": false, "url": "/v1/promotion_codes",
                "data": found.sorted { $0.id < $1.id }.map(promotionDocument)
            ])
    }

    func createPromotionCode(_ req: HTTPRequest) -> HTTPResponse {
        let form = Self.form(req.body)
        func value(_ k: String) -> String? { form.first { $0.0 == k }?.1 }
        guard let coupon = value("coupon"), state.withLock({ $0.coupons[coupon] }) != nil else {
            return Self.error(
                400, "invalid_request_error", "resource_missing", "No such coupon: '\(value("coupon") ?? "")'",
                param: "coupon")
        }
        guard let code = value("code"), code.range(of: "^[A-Za-z0-9_-]{1,200}$", options: .regularExpression) != nil
        else {
            return Self.error(400, "invalid_request_error", "parameter_invalid_string", "Invalid code.", param: "code")
        }
        if let cap = value("max_redemptions"), (Int(cap) ?? 0) < 1 {
            return Self.error(
                400, "invalid_request_error", "parameter_invalid_integer", "max_redemptions must be positive.",
                param: "max_redemptions")
        }
        let made = Object(id: newId("promo_"), form: form, livemode: livemode(req))
        let taken = state.withLock { s -> Bool in
            guard
                !s.promotionCodes.values.contains(where: {
                    $0.active && $0.livemode == made.livemode && $0.field("code")?.uppercased() == code.uppercased()
                })
            else { return true }
            s.promotionCodes[made.id] = made
            return false
        }
        if taken {
            return Self.error(
                400, "invalid_request_error", "resource_already_exists",
                "An active promotion code with `code: \(code)` already exists.",
                param: "code")
        }
        let lost = state.withLock { s -> Bool in
            guard s.losingPromotionCodes > 0 else { return false }
            s.losingPromotionCodes -= 1
            s.lostPromotionCode = true
            return true
        }
        if lost { return Self.error(500, "api_error", nil, "The answer was lost (injected by the test).") }
        return Self.json(200, promotionDocument(made))
    }

    func updatePromotionCode(_ req: HTTPRequest) -> HTTPResponse {
        let id = req.pathParameters["id"] ?? ""
        let form = Self.form(req.body)
        let active = form.first { $0.0 == "active" }?.1
        let changed: Object? = state.withLock { s in
            guard s.promotionCodes[id] != nil else { return nil }
            if let active { s.promotionCodes[id]!.active = active == "true" }
            return s.promotionCodes[id]
        }
        guard let changed else {
            return Self.error(
                404, "invalid_request_error", "resource_missing", "No such promotion code: '\(id)'", param: "id")
        }
        return Self.json(200, promotionDocument(changed))
    }

    func createCustomer(_ req: HTTPRequest) -> HTTPResponse {
        let form = Self.form(req.body), live = livemode(req)
        let made = Object(id: newId("cus_"), form: form, livemode: live)
        // Stripe's keys are scoped to the account and mode; a repeat answers the first object.
        let key = req.header("idempotency-key").map { "\(live):\($0)" }
        let answer = state.withLock { s -> Result<String, Mismatch> in
            if let key, let first = s.idempotent[key] {
                let same = first.form.count == form.count && zip(first.form, form).allSatisfy { $0 == $1 }
                return same ? .success(first.id) : .failure(Mismatch())
            }
            s.customers[made.id] = made
            if let key { s.idempotent[key] = (form, made.id) }
            return .success(made.id)
        }
        switch answer {
        case .success(let id):
            return Self.json(200, ["id": id, "object": "customer", "livemode": live])
        case .failure:
            return Self.error(
                400, "idempotency_error", nil,
                "Keys for idempotent requests can only be used with the same parameters they were first used with.")
        }
    }

    struct Mismatch: Error {}

    func createSession(_ req: HTTPRequest) -> HTTPResponse {
        let form = Self.form(req.body)
        func value(_ k: String) -> String? { form.first { $0.0 == k }?.1 }
        guard value("mode") == "subscription" || value("mode") == "payment" else {
            return Self.error(
                400, "invalid_request_error", "parameter_missing", "Missing required param: mode.", param: "mode")
        }
        guard let price = value("line_items[0][price]"), state.withLock({ $0.prices[price] }) != nil else {
            return Self.error(
                400, "invalid_request_error", "resource_missing", "No such price", param: "line_items[0][price]")
        }
        guard value("success_url") != nil else {
            return Self.error(
                400, "invalid_request_error", "parameter_missing", "Missing required param: success_url.",
                param: "success_url")
        }
        let made = Object(id: newId("cs_test_"), form: form, livemode: livemode(req))
        state.withLock { $0.sessions[made.id] = made }
        var d: [String: Any] = [
            "id": made.id, "object": "checkout.session", "livemode": made.livemode, "mode": value("mode")!,
            "status": "open", "url": "\(url.absoluteString)/c/pay/\(made.id)"
        ]
        d["client_reference_id"] = value("client_reference_id").map { $0 as Any } ?? NSNull()
        d["customer"] = value("customer").map { $0 as Any } ?? NSNull()
        return Self.json(200, d)
    }

    func createPortal(_ req: HTTPRequest) -> HTTPResponse {
        let form = Self.form(req.body)
        guard let customer = form.first(where: { $0.0 == "customer" })?.1,
            state.withLock({ $0.customers[customer] }) != nil
        else {
            return Self.error(400, "invalid_request_error", "resource_missing", "No such customer", param: "customer")
        }
        let made = Object(id: newId("bps_"), form: form, livemode: livemode(req))
        state.withLock { $0.portals[made.id] = made }
        return Self.json(
            200,
            [
                "id": made.id, "object": "billing_portal.session", "customer": customer, "livemode": made.livemode,
                "url": "\(url.absoluteString)/p/session/\(made.id)"
            ])
    }

    // MARK: The hosted pages

    /// Checkout's page: the price, the promotion code, a Pay button, and the back link to
    /// `cancel_url`.
    func checkoutPage(_ req: HTTPRequest) -> HTTPResponse {
        let id = req.pathParameters["id"] ?? ""
        guard let session = state.withLock({ $0.sessions[id] }) else {
            return .text(404, "<!doctype html><title>Not found</title><p>No such Checkout Session.</p>",
                contentType: "text/html; charset=utf-8")
        }
        let e = FakeAppleID.escape
        let html = """
            <!doctype html><html><head><meta charset="utf-8"><title>Checkout (fake Stripe)</title></head>
            <body><h1>Fake Stripe Checkout</h1>
            <p id="price">\(e(session.field("line_items[0][price]") ?? ""))</p>
            <p id="promotion">\(e(session.field("discounts[0][promotion_code]") ?? ""))</p>
            <form id="pay" method="post" action="/c/pay/\(e(id))">
            <button type="submit" id="pay-button">Pay</button></form>
            <a id="back" href="\(e(session.field("cancel_url") ?? "/"))">Back</a>
            </body></html>
            """
        return .text(200, html, contentType: "text/html; charset=utf-8")
    }

    /// Pay: the session completes, its signed event goes to Redeem's webhook route (when
    /// `sendEvents` named one), and the browser goes to `success_url`. Paying twice posts no
    /// second event.
    func pay(_ req: HTTPRequest) async -> HTTPResponse {
        let id = req.pathParameters["id"] ?? ""
        guard let session = state.withLock({ $0.sessions[id] }), let success = session.field("success_url") else {
            return .text(404, "No such Checkout Session.")
        }
        let first = state.withLock { $0.paid.insert(id).inserted }
        if first, let webhook = state.withLock({ $0.webhook }),
            let event = checkoutEvent(
                "checkout.session.completed", sessionId: id, secret: webhook.secret, amountTotal: 799)
        {
            let client = HTTPClient(base: webhook.gateway)
            let status =
                (try? await client.send(
                    "POST", "/v1/stores/stripe/webhooks", body: event.payload,
                    headers: ["Content-Type": "application/json", "Stripe-Signature": event.signature]))?.status ?? 0
            state.withLock { $0.deliveries.append(status) }
        }
        let location = success.replacingOccurrences(of: "{CHECKOUT_SESSION_ID}", with: id)
        return HTTPResponse(status: 303, headers: [("Location", location)])
    }

    /// The billing portal's page, back to the session's `return_url`.
    func portalPage(_ req: HTTPRequest) -> HTTPResponse {
        let id = req.pathParameters["id"] ?? ""
        guard let portal = state.withLock({ $0.portals[id] }) else { return .text(404, "No such portal session.") }
        let e = FakeAppleID.escape
        let html = """
            <!doctype html><html><head><meta charset="utf-8"><title>Billing (fake Stripe)</title></head>
            <body><h1>Fake Stripe billing portal</h1><p id="customer">\(e(portal.field("customer") ?? ""))</p>
            <a id="return" href="\(e(portal.field("return_url") ?? "/"))">Return</a></body></html>
            """
        return .text(200, html, contentType: "text/html; charset=utf-8")
    }

    // MARK: Stripe's shapes

    static func couponDocument(_ c: Object) -> [String: Any] {
        var d: [String: Any] = [
            "id": c.id, "object": "coupon", "livemode": c.livemode, "valid": true,
            "duration": c.field("duration") ?? "once"
        ]
        if let p = c.field("percent_off").flatMap(Double.init) { d["percent_off"] = p }
        if let a = c.field("amount_off").flatMap(Int.init) { d["amount_off"] = a }
        if let m = c.field("duration_in_months").flatMap(Int.init) { d["duration_in_months"] = m }
        if let cur = c.field("currency") { d["currency"] = cur }
        d["applies_to"] = ["products": c.fields("applies_to[products][]")]
        return d
    }

    func promotionDocument(_ p: Object) -> [String: Any] {
        let coupon = p.field("coupon").flatMap { id in state.withLock { $0.coupons[id] } }
        var d: [String: Any] = [
            "id": p.id, "object": "promotion_code", "code": p.field("code") ?? "", "active": p.active,
            "livemode": p.livemode,
            "coupon": coupon.map { Self.couponDocument($0) as Any } ?? NSNull()
        ]
        d["max_redemptions"] = p.field("max_redemptions").flatMap(Int.init).map { $0 as Any } ?? NSNull()
        d["expires_at"] = p.field("expires_at").flatMap(Int.init).map { $0 as Any } ?? NSNull()
        return d
    }

    /// A form body's pairs, in order (`+` is a space, the rest percent-decoded).
    static func form(_ body: Data) -> [(String, String)] {
        String(decoding: body, as: UTF8.self).split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ s: Substring) -> String {
                (s.replacingOccurrences(of: "+", with: " ").removingPercentEncoding) ?? String(s)
            }
            return (decode(parts[0]), parts.count > 1 ? decode(parts[1]) : "")
        }
    }

    static func error(
        _ status: Int, _ type: String, _ code: String?, _ message: String, param: String? = nil, status401: Bool = false
    ) -> HTTPResponse {
        var e: [String: Any] = ["type": type, "message": message]
        if let code { e["code"] = code }
        if let param { e["param"] = param }
        return json(status, ["error": e])
    }

    static func json(_ status: Int, _ object: [String: Any]) -> HTTPResponse { FakeGoogleOAuth.json(status, object) }
}
