import Core
import Database
import Foundation
import TestSupport
import XCTest

/// Stripe through the whole stack (docs/stripe.md): a coupon covering the web becomes one Stripe
/// coupon and one promotion code at the fake Stripe, made by grants with the key of the coupon's
/// mode, and its promotion code is switched off with the coupon (deactivation, a full cap) and
/// back on. The tests share one stack and the fake; each makes its own prices, plans and coupons.
final class StripeTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var minter: TokenMinter!
    nonisolated(unsafe) static var stripe: FakeStripe!
    nonisolated(unsafe) static var testKey: String?
    nonisolated(unsafe) static var revenueCat: FakeRevenueCat!
    /// The Stripe webhook endpoint's signing secret, and RevenueCat's Stripe app public key.
    static let webhookSecret = "whsec_" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
    static let revenueCatStripeKey = "strp_" + UUID().uuidString.prefix(12)

    override class func startSuite() throws {
        let stripe = try FakeStripe()
        Self.stripe = stripe
        revenueCat = try FakeRevenueCat()
        stack = try Stack(environment: [
            "REDEEM_STRIPE_SECRET_KEY": "\(stripe.keys[.test]!),\(stripe.keys[.live]!)",
            "REDEEM_STRIPE_API_URL": stripe.url.absoluteString,
            "REDEEM_STRIPE_WEBHOOK_SECRET": webhookSecret,
            "REDEEM_REVENUECAT_URL": revenueCat.url.absoluteString,
            "REDEEM_REVENUECAT_STRIPE_PUBLIC_KEY": revenueCatStripeKey,
            "REDEEM_WEBHOOK_ALLOW_PRIVATE": "1", "REDEEM_WEBHOOK_RETRY_SCHEDULE": "1,1,1",
            "REDEEM_GRANT_MAX_RETRY_SECONDS": "2", "REDEEM_PROVIDER_TIMEOUT_SECONDS": "2",
            "REDEEM_RESERVATION_SWEEP_MS": "500"
        ])
        minter = try stack.minter()
        // The hosted checkout page's Pay button posts the completed event here, as Stripe does.
        stripe.sendEvents(to: stack.gateway, secret: webhookSecret)
    }

    override class func stopSuite() {
        stack?.stop()
        let done = DispatchSemaphore(value: 0)
        Task {
            await stripe?.stop()
            await revenueCat?.stop()
            done.signal()
        }
        done.wait()
    }

    var client: HTTPClient { Self.stack.client }
    var admin: String { Self.stack.adminKey }

    // MARK: - Helpers

    /// A test admin key, made once by the live admin.
    func testAdmin() async throws -> String {
        if let key = Self.testKey { return key }
        let r = try await client.json(
            "POST", "/v1/api-keys", ["name": "stripe test admin", "role": "admin", "mode": "test"], token: admin)
        XCTAssertEqual(r.status, 201, r.text)
        let key = try XCTUnwrap(try r.json()["key"] as? String)
        Self.testKey = key
        return key
    }

    /// A plan sold through Stripe: its price at the fake, of a product of its own.
    func plan(token: String) async throws -> (plan: String, price: String, product: String) {
        let suffix = UUID().uuidString.prefix(8).lowercased().replacingOccurrences(of: "-", with: "")
        let plan = "web.\(suffix)", price = "price_\(suffix)", product = "prod_\(suffix)"
        Self.stripe.addPrice(price, product: product)
        let p = try await client.json(
            "POST", "/v1/plans", ["productId": plan, "name": "Pro", "stripe": ["priceId": price]], token: token)
        XCTAssertEqual(p.status, 201, p.text)
        XCTAssertEqual(try p.json()["stripe"] as? [String: String], ["priceId": price])
        return (plan, price, product)
    }

    func coupon(_ code: String, token: String) async throws -> CouponBody {
        try await client.get("/v1/coupons/\(code)", token: token).decode(CouponBody.self)
    }

    /// Waits until the coupon's Stripe offer is `ready`, and answers it.
    func ready(_ code: String, token: String, seconds: Double = 20) async throws -> StoreOfferBody {
        let ok = try await Self.stack.eventually(seconds) {
            try await self.coupon(code, token: token).storeOffers?.first?.state == "ready"
        }
        XCTAssertTrue(ok, Self.stack.logs())
        let body = try await coupon(code, token: token)
        return try XCTUnwrap(body.storeOffers?.first)
    }

    func promotionCode(of offer: StoreOfferBody) -> FakeStripe.Object? {
        Self.stripe.promotionCodes.first { $0.field("coupon") == offer.offerId }
    }

    func newCode(_ prefix: String) -> String {
        prefix + UUID().uuidString.prefix(8).uppercased().replacingOccurrences(of: "-", with: "")
    }

    func sql(_ text: String, _ params: [any PGBindable] = []) async throws -> PGResult {
        let database = try Self.stack.adminDatabaseURL()
        return try await offThePool { try PGConnection(url: database).query(text, params) }
    }

    /// A live web coupon of `percent` off `plan`, with its Stripe promotion code made.
    func webCoupon(_ prefix: String, plan: String, percent: Int = 20, cap: Int? = nil) async throws -> (
        code: String, offer: StoreOfferBody
    ) {
        let code = newCode(prefix)
        var input: [String: Any] = [
            "code": code, "kind": "percentOff", "percentOff": percent, "duration": ["unit": "month", "count": 1],
            "periodCount": 1, "productIds": [plan], "platforms": ["web"]
        ]
        if let cap { input["maxRedemptions"] = cap }
        let c = try await client.json("POST", "/v1/coupons", input, token: admin)
        XCTAssertEqual(c.status, 201, c.text)
        return (code, try await ready(code, token: admin))
    }

    /// A checkout: the user's web redemption of `code`, answered with its Checkout Session.
    struct Checkout {
        let redemptionId: String
        let session: FakeStripe.Object
    }

    func checkout(_ code: String, plan: String, user: TokenMinter.User) async throws -> Checkout {
        let r = try await client.json(
            "POST", "/v1/redemptions", ["code": code, "platform": "web", "productId": plan], token: user.token)
        XCTAssertEqual(r.status, 201, r.text)
        let body = try r.json()
        XCTAssertEqual(body["status"] as? String, "reserved")
        let id = try XCTUnwrap(body["redemptionId"] as? String)
        let url = try XCTUnwrap((body["stripe"] as? [String: Any])?["checkoutUrl"] as? String, r.text)
        let sessionId = try XCTUnwrap(URL(string: url)?.lastPathComponent)
        return Checkout(redemptionId: id, session: try XCTUnwrap(Self.stripe.session(sessionId)))
    }

    /// Posts a Stripe event to the webhook route as Stripe does.
    func deliver(_ payload: Data, signature: String?) async throws -> HTTPClient.Response {
        var headers = ["Content-Type": "application/json"]
        if let signature { headers["Stripe-Signature"] = signature }
        return try await client.send("POST", "/v1/stores/stripe/webhooks", body: payload, headers: headers)
    }

    func event(_ type: String, _ checkout: Checkout, amountTotal: Int = 0, time: Date = Date()) throws -> (
        id: String, payload: Data, signature: String
    ) {
        try XCTUnwrap(
            Self.stripe.checkoutEvent(
                type, sessionId: checkout.session.id, secret: Self.webhookSecret, amountTotal: amountTotal, time: time))
    }

    func redemption(_ id: String, user: TokenMinter.User) async throws -> [String: Any] {
        try await client.get("/v1/redemptions/\(id)", token: user.token).json()
    }

    func subscription(of payload: Data) throws -> String {
        let event = try XCTUnwrap(try JSONSerialization.jsonObject(with: payload) as? [String: Any])
        let object = (event["data"] as? [String: Any])?["object"] as? [String: Any]
        return try XCTUnwrap(object?["subscription"] as? String)
    }

    func receipts(_ subscription: String) -> [FakeRevenueCat.Receipt] {
        Self.revenueCat.takenReceipts.filter { $0.fetchToken == subscription }
    }

    /// Whether process `pid` has exited: gone, or a zombie (whose files are closed) not yet reaped.
    static func exited(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return true }
        let state = stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).first
        return state == "Z" || state == "X"
    }

    /// A signed-up account (GET /v1/me needs one): its access token, id and appUserId.
    func signUp(_ email: String, password: String) async throws -> (token: String, id: String, appUserId: String) {
        let r = try await client.json("POST", "/v1/accounts", ["email": email, "password": password])
        XCTAssertEqual(r.status, 201, r.text)
        let body = try r.decode(AccountSessionBody.self)
        return (body.session.accessToken, body.account.id, try XCTUnwrap(body.account.appUserId))
    }

    func signIn(_ email: String, password: String) async throws -> String {
        let r = try await client.json("POST", "/v1/sessions", ["email": email, "password": password])
        XCTAssertEqual(r.status, 200, r.text)
        return try r.decode(AccountSessionBody.self).session.accessToken
    }

    func managementUrl(token: String) async throws -> String? {
        let me = try await client.get("/v1/me", token: token)
        XCTAssertEqual(me.status, 200, me.text)
        let body = try me.json()
        XCTAssertTrue(body.keys.contains("managementUrl"), "managementUrl is always sent: \(me.text)")
        return body["managementUrl"] as? String
    }

    /// What `Tests/Browser/stripe_checkout_flow.py` prints.
    struct BrowserFlow: Decodable {
        let ok: Bool
        let error: StringOrBool?
        let checkoutUrl: String?
        let returnUrl: String?
        let returnStatus: String?
        let status: String?
        let result: String?
        let againUrl: String?
        enum StringOrBool: Decodable {
            case text(String), flag(Bool)
            init(from decoder: any Decoder) throws {
                let c = try decoder.singleValueContainer()
                if let b = try? c.decode(Bool.self) { self = .flag(b) } else { self = .text(try c.decode(String.self)) }
            }
        }
        var shownAsError: Bool? { if case .flag(let b) = error { b } else { nil } }
    }

    /// The redeem page in headless Chromium through checkout at the fake Stripe (`success` pays,
    /// `cancel` goes back), with a new account of `email`.
    func browse(_ code: String, _ path: String, email: String, password: String) throws -> BrowserFlow {
        let dir = Project.root.appendingPathComponent("test-output")
        try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let shot = dir.appendingPathComponent("redeem-stripe-\(path).png")
        let out = try Subprocess.run(
            "/usr/bin/python3",
            [
                Project.root.appendingPathComponent("Tests/Browser/stripe_checkout_flow.py").path,
                Self.stack.gateway.absoluteString, code, path, shot.path, email, password
            ])
        let flow: BrowserFlow
        do {
            flow = try JSONDecoder().decode(
                BrowserFlow.self, from: out.split(separator: "\n").last.map { Data($0.utf8) } ?? Data())
        } catch { throw TestFailure("\(error): \(out)") }
        XCTAssertTrue(flow.ok, out)
        XCTAssertTrue(FileManager.default.fileExists(atPath: shot.path), "screenshot written")
        return flow
    }

    // MARK: - Tests

    /// The redeem page sends a signed-in user to Stripe Checkout and shows the result on the way
    /// back: the fake Stripe's page pays (its completed event reaches the webhook route), Stripe
    /// sends the browser to `success_url`, and once the user signs in again (the session lived in
    /// the page's memory) the page shows the confirmed purchase. The account's `GET /v1/me` then
    /// names its billing portal.
    func testTheRedeemPagePaysThroughCheckoutAndShowsTheSuccess() async throws {
        let (plan, price, _) = try await self.plan(token: admin)
        let (code, _) = try await webCoupon("WEBPAGE", plan: plan)
        let email = "stripe-page-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let password = "a long browser passphrase"
        let deliveriesBefore = Self.stripe.eventDeliveries.count
        let r = try browse(code, "success", email: email, password: password)
        let checkoutUrl = try XCTUnwrap(r.checkoutUrl)
        XCTAssertTrue(checkoutUrl.hasPrefix(Self.stripe.url.absoluteString + "/c/pay/cs_"), checkoutUrl)
        let session = try XCTUnwrap(Self.stripe.session(URL(string: checkoutUrl)!.lastPathComponent))
        XCTAssertEqual(session.field("line_items[0][price]"), price)
        XCTAssertTrue(Self.stripe.paid(session.id))
        XCTAssertEqual(Self.stripe.eventDeliveries.dropFirst(deliveriesBefore), [200], "the event was taken")
        let back = try XCTUnwrap(r.returnUrl.flatMap(URLComponents.init(string:)))
        XCTAssertEqual(back.path, "/redeem")
        let query = Dictionary(uniqueKeysWithValues: (back.queryItems ?? []).map { ($0.name, $0.value ?? "") })
        XCTAssertEqual(query["checkout"], "success")
        XCTAssertEqual(query["code"], code)
        let redemptionId = try XCTUnwrap(query["redemption"])
        XCTAssertEqual(session.field("client_reference_id"), redemptionId.lowercased())
        XCTAssertEqual(r.returnStatus, "Payment received. Sign in to see your subscription.")
        XCTAssertEqual(r.status, "Done! Your purchase is confirmed.")
        XCTAssertEqual(r.result, "Your purchase is confirmed.")
        XCTAssertEqual(r.shownAsError, false)

        let token = try await signIn(email, password: password)
        let redemption = try await client.get("/v1/redemptions/\(redemptionId)", token: token).json()
        XCTAssertEqual(redemption["status"] as? String, "completed")
        let managed = try await managementUrl(token: token)
        let url = try XCTUnwrap(managed)
        XCTAssertTrue(url.hasPrefix(Self.stack.gateway.absoluteString + "/v1/billing-portal/"), url)
    }

    /// Back from checkout without paying (Stripe's back link, `cancel_url`): the page says nothing
    /// was charged, and the use stays reserved (only Stripe's `checkout.session.expired` releases
    /// it); once signed in again, Redeem takes the user back to checkout for the same redemption.
    func testTheRedeemPageShowsACancelledCheckoutAndOffersItAgain() async throws {
        let (plan, _, _) = try await self.plan(token: admin)
        let (code, _) = try await webCoupon("WEBBACK", plan: plan, cap: 1)
        let email = "stripe-back-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let password = "a long browser passphrase"
        let r = try browse(code, "cancel", email: email, password: password)
        let first = try XCTUnwrap(r.checkoutUrl.flatMap { URL(string: $0) }?.lastPathComponent)
        XCTAssertFalse(Self.stripe.paid(first))
        let back = try XCTUnwrap(r.returnUrl.flatMap(URLComponents.init(string:)))
        let query = Dictionary(uniqueKeysWithValues: (back.queryItems ?? []).map { ($0.name, $0.value ?? "") })
        XCTAssertEqual(query["checkout"], "cancel")
        let redemptionId = try XCTUnwrap(query["redemption"])
        XCTAssertEqual(r.returnStatus, "Checkout was cancelled. Nothing was charged.")
        XCTAssertEqual(r.status, "Checkout was cancelled. Nothing was charged. Press Redeem to go back to checkout.")
        XCTAssertEqual(r.shownAsError, true)

        let token = try await signIn(email, password: password)
        let redemption = try await client.get("/v1/redemptions/\(redemptionId)", token: token).json()
        XCTAssertEqual(redemption["status"] as? String, "reserved", "the use is held until the session expires")
        let full = try await client.json(
            "POST", "/v1/redemptions", ["code": code, "platform": "web", "productId": plan],
            token: try Self.minter.user().token)
        XCTAssertEqual(full.status, 422, "the coupon's only use is still taken: \(full.text)")
        let again = try XCTUnwrap(r.againUrl.flatMap { URL(string: $0) }?.lastPathComponent)
        XCTAssertNotEqual(again, first, "a new Checkout Session")
        XCTAssertEqual(Self.stripe.session(again)?.field("client_reference_id"), redemptionId.lowercased())
    }

    /// `GET /v1/me`'s `managementUrl` for a Stripe subscription: null before any checkout; after
    /// one, a link of Redeem's that makes the billing-portal session only when followed (Stripe's
    /// portal sessions are short-lived) and answers 303 to it. A tampered link is 404.
    func testManagementUrlLeadsToTheBillingPortal() async throws {
        let (plan, _, _) = try await self.plan(token: admin)
        let (code, _) = try await webCoupon("WEBMANAGE", plan: plan)
        let account = try await signUp(
            "stripe-manage-\(UUID().uuidString.prefix(8).lowercased())@example.com", password: "correct horse battery")
        let none = try await managementUrl(token: account.token)
        XCTAssertNil(none, "no Stripe customer yet")

        let r = try await client.json(
            "POST", "/v1/redemptions", ["code": code, "platform": "web", "productId": plan], token: account.token)
        XCTAssertEqual(r.status, 201, r.text)
        let sessionId = try XCTUnwrap(
            ((try r.json()["stripe"] as? [String: Any])?["checkoutUrl"] as? String).flatMap(URL.init(string:))?
                .lastPathComponent)
        let customer = try XCTUnwrap(Self.stripe.session(sessionId)?.field("customer"))

        let portalsBefore = Self.stripe.portalSessions.count
        let managed = try await managementUrl(token: account.token)
        let url = try XCTUnwrap(managed)
        let prefix = Self.stack.gateway.absoluteString + "/v1/billing-portal/"
        XCTAssertTrue(url.hasPrefix(prefix), url)
        XCTAssertEqual(Self.stripe.portalSessions.count, portalsBefore, "no portal session made by reading GET /v1/me")

        let browser = HTTPClient(base: Self.stack.gateway, followRedirects: false)
        let path = String(url.dropFirst(Self.stack.gateway.absoluteString.count))
        let followed = try await browser.send("GET", path)
        XCTAssertEqual(followed.status, 303, followed.text)
        let location = try XCTUnwrap(followed.headers.first { $0.key.lowercased() == "location" }?.value)
        let portal = try XCTUnwrap(
            Self.stripe.portalSessions.first { location.hasSuffix("/p/session/" + $0.id) }, location)
        XCTAssertEqual(portal.field("customer"), customer)
        XCTAssertEqual(portal.field("return_url"), Self.stack.gateway.absoluteString + "/redeem")
        // Each visit makes a session of its own, as Stripe's portal sessions are for one visit.
        let twice = try await browser.send("GET", path)
        XCTAssertEqual(twice.status, 303, twice.text)
        XCTAssertEqual(Self.stripe.portalSessions.count, portalsBefore + 2)

        // A link altered by one character, or one never made, opens nothing.
        var tampered = Array(path)
        tampered[tampered.count - 3] = tampered[tampered.count - 3] == "A" ? "B" : "A"
        let altered = try await browser.send("GET", String(tampered))
        XCTAssertEqual(altered.status, 404, altered.text)
        let made = try await browser.send("GET", "/v1/billing-portal/k000000000000.AAAA")
        XCTAssertEqual(made.status, 404, made.text)
        XCTAssertEqual(Self.stripe.portalSessions.count, portalsBefore + 2)
    }

    /// 16 first checkouts of one account at once make exactly one Stripe customer: the making is
    /// claimed in grants' database first, and Stripe's Idempotency-Key (honoured by the fake as by
    /// Stripe) names the account and mode. Every session names that customer.
    func testConcurrentFirstCheckoutsMakeOneCustomer() async throws {
        let (plan, _, _) = try await self.plan(token: admin)
        let (code, _) = try await webCoupon("WEBRACE", plan: plan)
        let u = try Self.minter.user()
        let client = self.client
        let answers = try await withThrowingTaskGroup(of: HTTPClient.Response.self) { group in
            for _ in 0..<16 {
                group.addTask {
                    try await client.json(
                        "POST", "/v1/redemptions", ["code": code, "platform": "web", "productId": plan], token: u.token)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        var sessions: [FakeStripe.Object] = []
        for a in answers {
            XCTAssertTrue([200, 201].contains(a.status), a.text)
            let url = try XCTUnwrap((try a.json()["stripe"] as? [String: Any])?["checkoutUrl"] as? String, a.text)
            sessions.append(try XCTUnwrap(Self.stripe.session(URL(string: url)!.lastPathComponent)))
        }
        XCTAssertEqual(sessions.count, 16)
        let account = u.accountId.lowercasedString
        let made = Self.stripe.customers.filter { $0.field("metadata[redeem_account_id]") == account }
        XCTAssertEqual(made.count, 1, "one Stripe customer for the account")
        let customer = try XCTUnwrap(made.first?.id)
        XCTAssertEqual(Set(sessions.compactMap { $0.field("customer") }), [customer], "every session names it")
        let calls = Self.stripe.received.filter {
            $0.path == "/v1/customers" && $0.field("metadata[redeem_account_id]") == u.accountId.lowercasedString
        }
        // The claim lets one of the 16 ask Stripe (a second only after a 4 s lease ran out).
        XCTAssertEqual(calls.count, 1, "one POST /v1/customers: the others waited for the claim's customer")
        XCTAssertTrue(calls.allSatisfy { $0.idempotencyKey?.hasPrefix("redeem-customer-\(account)-live-") == true })
        let rows = try await sql(
            "SELECT customer_id FROM grants.stripe_customers WHERE account_id = $1", [u.accountId])
        XCTAssertEqual(rows.rows.count, 1)
        XCTAssertEqual(try rows.rows.first?.decode("customer_id", as: String.self), customer)

        // The fake answers a repeated Idempotency-Key as Stripe does: the first object, and a
        // refusal for the same key with other parameters.
        let key = try XCTUnwrap(calls.first?.idempotencyKey)
        let stripeAPI = HTTPClient(base: Self.stripe.url)
        let form = Data(
            "metadata%5Bapp_user_id%5D=\(u.appUserId)&metadata%5Bredeem_account_id%5D=\(account)".utf8)
        let headers = [
            "Authorization": "Bearer \(Self.stripe.keys[.live]!)", "Idempotency-Key": key,
            "Content-Type": "application/x-www-form-urlencoded"
        ]
        let repeated = try await stripeAPI.send("POST", "/v1/customers", body: form, headers: headers)
        XCTAssertEqual(try repeated.json()["id"] as? String, customer, repeated.text)
        let other = try await stripeAPI.send(
            "POST", "/v1/customers", body: Data("metadata%5Bapp_user_id%5D=someone".utf8), headers: headers)
        XCTAssertEqual(other.status, 400, other.text)
        XCTAssertEqual(
            Self.stripe.customers.filter { $0.field("metadata[redeem_account_id]") == u.accountId.lowercasedString }
                .count, 1)
    }

    /// Checkout, then Stripe's completed event: the reservation completes with what Stripe
    /// charged and the subscription as its transaction, one `coupon.redeemed` goes out, and one
    /// receipt reaches RevenueCat (`X-Platform: stripe`, the Stripe app's key). A replay of the
    /// event changes nothing. The billing portal then opens for the account's customer.
    func testCheckoutThenTheCompletedEventRedeemsOnceAndTellsRevenueCat() async throws {
        let (plan, price, _) = try await self.plan(token: admin)
        let (code, offer) = try await webCoupon("WEBPAY", plan: plan, percent: 20, cap: 10)
        let receiver = try WebhookReceiver()
        addTeardownBlock { await receiver.stop() }
        let hook = try await client.json(
            "POST", "/v1/webhooks", ["url": receiver.url.absoluteString, "events": ["coupon.redeemed"]], token: admin)
        XCTAssertEqual(hook.status, 201, hook.text)
        let hookId = try XCTUnwrap(try hook.json()["id"] as? String)
        let stack = Self.stack!
        addTeardownBlock {
            _ = try await stack.client.send(
                "DELETE", "/v1/webhooks/\(hookId)", headers: ["Authorization": "Bearer \(stack.adminKey)"])
        }

        let u = try Self.minter.user()
        let c = try await checkout(code, plan: plan, user: u)
        let promotion = try XCTUnwrap(promotionCode(of: offer))
        XCTAssertEqual(c.session.field("mode"), "subscription")
        XCTAssertEqual(c.session.field("line_items[0][price]"), price)
        XCTAssertEqual(c.session.field("discounts[0][promotion_code]"), promotion.id)
        XCTAssertEqual(c.session.field("client_reference_id")?.uppercased(), c.redemptionId.uppercased())
        XCTAssertEqual(c.session.field("metadata[app_user_id]"), u.appUserId)
        XCTAssertTrue(c.session.livemode, "a live coupon's checkout is made with the live key")
        XCTAssertTrue(c.session.field("success_url")?.contains("/redeem?") == true)
        XCTAssertTrue(c.session.field("cancel_url")?.contains("/redeem?") == true)
        let customer = try XCTUnwrap(c.session.field("customer"))
        XCTAssertTrue(Self.stripe.customers.contains { $0.id == customer })

        let completed = try event("checkout.session.completed", c, amountTotal: 399)
        let subscription = try subscription(of: completed.payload)
        let r = try await deliver(completed.payload, signature: completed.signature)
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(try r.json()["recorded"] as? Bool, true)
        let done = try await redemption(c.redemptionId, user: u)
        XCTAssertEqual(done["status"] as? String, "completed")
        XCTAssertEqual(done["pricePaid"] as? [String: String], ["amount": "3.99", "currency": "USD"])

        let told = try await Self.stack.eventually(20) { self.receipts(subscription).count == 1 }
        XCTAssertTrue(told, Self.stack.logs())
        let receipt = try XCTUnwrap(receipts(subscription).first)
        XCTAssertEqual(receipt.platform, "stripe")
        XCTAssertEqual(receipt.authorization, "Bearer \(Self.revenueCatStripeKey)")
        XCTAssertEqual(receipt.appUserId, u.appUserId)
        let delivered = try await Self.stack.eventually(20) {
            !receiver.received.filter { String(decoding: $0.body, as: UTF8.self).contains(c.redemptionId) }.isEmpty
        }
        XCTAssertTrue(delivered, Self.stack.logs())

        // Stripe sends the same event again (a retry, or a replay inside the window): nothing more.
        let again = try await deliver(
            completed.payload, signature: FakeStripe.signature(completed.payload, secret: Self.webhookSecret))
        XCTAssertEqual(again.status, 200, again.text)
        XCTAssertEqual(try again.json()["duplicate"] as? Bool, true)
        XCTAssertEqual(try again.json()["recorded"] as? Bool, false)
        let stored = try await sql(
            "SELECT count(*)::int AS n, min(status) AS status FROM grants.stripe_receipts WHERE subscription_id = $1",
            [subscription]
        ).first!
        XCTAssertEqual(try stored.decode("n", as: Int.self), 1)
        let sent = try await Self.stack.eventually(10) {
            try await self.sql(
                "SELECT status FROM grants.stripe_receipts WHERE subscription_id = $1", [subscription]
            ).first?.decode("status", as: String.self) == "sent"
        }
        XCTAssertTrue(sent)
        XCTAssertEqual(receipts(subscription).count, 1)
        let events = Set(
            receiver.received.filter { String(decoding: $0.body, as: UTF8.self).contains(c.redemptionId) }.map(\.id))
        XCTAssertEqual(events.count, 1, "one coupon.redeemed for the subscription")

        // The account's web subscription is managed in Stripe's billing portal.
        let portal = try await client.send(
            "POST", "/v1/me/billing-portal", headers: ["Authorization": "Bearer \(u.token)"])
        XCTAssertEqual(portal.status, 200, portal.text)
        let url = try XCTUnwrap(try portal.json()["url"] as? String)
        let made = try XCTUnwrap(Self.stripe.portalSessions.first { url.hasSuffix($0.id) })
        XCTAssertEqual(made.field("customer"), customer)
        let nobody = try await client.send(
            "POST", "/v1/me/billing-portal", headers: ["Authorization": "Bearer \(try Self.minter.user().token)"])
        XCTAssertEqual(nobody.status, 404, nobody.text)
    }

    /// Events not signed with the endpoint's secret, signed too long ago, or without a signature
    /// are refused with their machine codes, and change nothing; a replayed event id is answered
    /// as a duplicate and completes nothing twice.
    func testForgedStaleAndReplayedEventsAreRefused() async throws {
        let (plan, _, _) = try await self.plan(token: admin)
        let (code, _) = try await webCoupon("WEBSIG", plan: plan)
        let u = try Self.minter.user()
        let c = try await checkout(code, plan: plan, user: u)
        let completed = try event("checkout.session.completed", c, amountTotal: 500)

        let forged = try await deliver(
            completed.payload, signature: FakeStripe.signature(completed.payload, secret: "whsec_not_the_endpoints"))
        XCTAssertEqual(forged.status, 401, forged.text)
        XCTAssertEqual(forged.errorCode, "invalidSignature")
        let stale = try await deliver(
            completed.payload,
            signature: FakeStripe.signature(
                completed.payload, secret: Self.webhookSecret, time: Date().addingTimeInterval(-400)))
        XCTAssertEqual(stale.status, 400, stale.text)
        XCTAssertEqual(stale.errorCode, "staleSignature")
        let unsigned = try await deliver(completed.payload, signature: nil)
        XCTAssertEqual(unsigned.status, 400, unsigned.text)
        XCTAssertEqual(unsigned.errorCode, "malformedSignature")
        var tampered = completed.payload
        tampered.append(contentsOf: Array(" ".utf8))
        let changed = try await deliver(tampered, signature: completed.signature)
        XCTAssertEqual(changed.status, 401, changed.text)
        let still = try await redemption(c.redemptionId, user: u)
        XCTAssertEqual(still["status"] as? String, "reserved", "no refused event completed anything")

        // Signed while the secret is rolled: one of several v1 signatures matches.
        let rolled = FakeStripe.signature(completed.payload, secret: "whsec_old_one", extra: [Self.webhookSecret])
        let taken = try await deliver(completed.payload, signature: rolled)
        XCTAssertEqual(taken.status, 200, taken.text)
        XCTAssertEqual(try taken.json()["recorded"] as? Bool, true)
        let replayed = try await deliver(completed.payload, signature: completed.signature)
        XCTAssertEqual(replayed.status, 200, replayed.text)
        XCTAssertEqual(try replayed.json()["duplicate"] as? Bool, true)
        let subscription = try subscription(of: completed.payload)
        let rows = try await sql(
            "SELECT count(*)::int AS n FROM grants.stripe_receipts WHERE subscription_id = $1", [subscription])
        XCTAssertLessThanOrEqual(try rows.first!.decode("n", as: Int.self), 1)
        let told = try await Self.stack.eventually(20) { self.receipts(subscription).count == 1 }
        XCTAssertTrue(told, Self.stack.logs())
    }

    /// A session that expires gives the use back: the coupon's only use, held by one user's
    /// checkout, goes to another user once Stripe says the session expired. The first user's
    /// next checkout reuses their Stripe customer.
    func testAnExpiredSessionReleasesTheUse() async throws {
        let (plan, _, _) = try await self.plan(token: admin)
        let (code, _) = try await webCoupon("WEBEXPD", plan: plan, cap: 1)
        let first = try Self.minter.user(), second = try Self.minter.user()
        let c = try await checkout(code, plan: plan, user: first)
        let full = try await client.json(
            "POST", "/v1/redemptions", ["code": code, "platform": "web", "productId": plan], token: second.token)
        XCTAssertEqual(full.status, 422, full.text)

        let expired = try event("checkout.session.expired", c)
        let r = try await deliver(expired.payload, signature: expired.signature)
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(try r.json()["recorded"] as? Bool, true)
        let released = try await redemption(c.redemptionId, user: first)
        XCTAssertEqual(released["status"] as? String, "released")

        let other = try await checkout(code, plan: plan, user: second)
        XCTAssertNotEqual(other.session.field("customer"), c.session.field("customer"))
        // The other one's session expires too, and the first user checks out again: same customer.
        let alsoExpired = try event("checkout.session.expired", other)
        _ = try await deliver(alsoExpired.payload, signature: alsoExpired.signature)
        let again = try await checkout(code, plan: plan, user: first)
        XCTAssertEqual(again.session.field("customer"), c.session.field("customer"))
        XCTAssertEqual(
            Self.stripe.customers.filter { $0.field("metadata[app_user_id]") == first.appUserId }.count, 1,
            "one Stripe customer per account")
    }

    /// Grants killed with SIGKILL after the completed event, while RevenueCat does not take the
    /// receipt yet: after the restart the receipt is sent, and RevenueCat has exactly one.
    func testKillingGrantsBetweenTheEventAndTheReceiptSendsOneReceipt() async throws {
        let (plan, _, _) = try await self.plan(token: admin)
        let (code, _) = try await webCoupon("WEBKILLRC", plan: plan)
        let u = try Self.minter.user()
        let c = try await checkout(code, plan: plan, user: u)
        Self.revenueCat.answerReceipts(503)
        addTeardownBlock { Self.revenueCat.answerReceipts(200) }
        let completed = try event("checkout.session.completed", c, amountTotal: 1_000)
        let subscription = try subscription(of: completed.payload)
        let r = try await deliver(completed.payload, signature: completed.signature)
        XCTAssertEqual(r.status, 200, r.text)
        let tried = try await Self.stack.eventually(20) {
            Self.revenueCat.receipts.contains { $0.fetchToken == subscription && $0.status == 503 }
        }
        XCTAssertTrue(tried, Self.stack.logs())
        let grants = try Self.stack.pid("grants")
        kill(grants, SIGKILL)
        // Dead (its sockets closed) before another binds its addresses.
        let dead = try await Self.stack.eventually(10) { Self.exited(grants) }
        XCTAssertTrue(dead, "grants did not die")
        XCTAssertEqual(receipts(subscription).count, 0)

        Self.revenueCat.answerReceipts(200)
        try await Self.stack.restart("grants")
        let told = try await Self.stack.eventually(30) { self.receipts(subscription).count == 1 }
        XCTAssertTrue(told, Self.stack.logs())
        let sent = try await Self.stack.eventually(10) {
            try await self.sql(
                "SELECT status FROM grants.stripe_receipts WHERE subscription_id = $1", [subscription]
            ).first?.decode("status", as: String.self) == "sent"
        }
        XCTAssertTrue(sent, "the receipt is settled: it is never sent again")
        XCTAssertEqual(receipts(subscription).count, 1, "exactly one receipt")
    }

    /// Stripe makes the promotion code but its answer is lost, and grants is killed with SIGKILL
    /// before it hears again: after the restart it finds the code by its coupon and code, so
    /// neither the Stripe coupon nor the promotion code is made twice.
    func testKillingGrantsAfterStripeMadeTheCodeMakesNothingTwice() async throws {
        let (plan, _, _) = try await self.plan(token: admin)
        Self.stripe.losePromotionCodeAnswers(1_000)
        addTeardownBlock { Self.stripe.losePromotionCodeAnswers(0) }
        let code = newCode("WEBKILL")
        let c = try await client.json(
            "POST", "/v1/coupons",
            [
                "code": code, "kind": "percentOff", "percentOff": 20, "duration": ["unit": "month", "count": 1],
                "periodCount": 1, "productIds": [plan], "platforms": ["web"]
            ], token: admin)
        XCTAssertEqual(c.status, 201, c.text)
        let made = try await Self.stack.eventually(20) {
            Self.stripe.promotionCodes.contains { $0.field("code") == code }
        }
        XCTAssertTrue(made, Self.stack.logs())
        func recorded() async throws -> Int {
            try await sql(
                """
                SELECT count(*)::int AS n FROM grants.store_tasks
                WHERE store = 'stripe' AND code = upper($1) AND offer_id IS NOT NULL AND custom_code_id IS NULL
                """, [code]
            ).first!.decode("n")
        }
        let couponRecorded = try await Self.stack.eventually(10) { try await recorded() == 1 }
        XCTAssertTrue(couponRecorded, "grants recorded the Stripe coupon, not the promotion code")
        kill(try Self.stack.pid("grants"), SIGKILL)
        let creating = try await coupon(code, token: admin).storeOffers?.first?.state
        XCTAssertEqual(creating, "creating")

        Self.stripe.losePromotionCodeAnswers(0)
        try await Self.stack.restart("grants")
        // A run cut off mid-call waits out its lease (8 × 2 s + 30 s) before another takes it.
        let offer = try await ready(code, token: admin, seconds: 60)
        XCTAssertEqual(Self.stripe.promotionCodes.filter { $0.field("code") == code }.count, 1)
        let couponPosts = Self.stripe.received.filter {
            $0.method == "POST" && $0.path == "/v1/coupons" && $0.field("id") == offer.offerId
        }
        XCTAssertEqual(couponPosts.count, 1, "the Stripe coupon was made once")
        let promotion = try XCTUnwrap(promotionCode(of: offer))
        XCTAssertTrue(promotion.active)
    }

    func testALiveCouponBecomesOneStripeCouponAndPromotionCode() async throws {
        let (plan, _, product) = try await self.plan(token: admin)
        let (other, _, otherProduct) = try await self.plan(token: admin)
        let code = newCode("WEB")
        let expires = Date().addingTimeInterval(30 * 86_400)
        let c = try await client.json(
            "POST", "/v1/coupons",
            [
                "code": code, "kind": "percentOff", "percentOff": 30, "duration": ["unit": "month", "count": 1],
                "periodCount": 3,
                "productIds": [plan, other], "platforms": ["web"], "maxRedemptions": 50,
                "expiresAt": Timestamp.iso8601(expires)
            ], token: admin)
        XCTAssertEqual(c.status, 201, c.text)
        let offers = try XCTUnwrap(try c.decode(CouponBody.self).storeOffers, c.text)
        XCTAssertEqual(offers.map(\.store), ["stripe"])

        let offer = try await ready(code, token: admin)
        let stripeCoupon = try XCTUnwrap(Self.stripe.coupon(try XCTUnwrap(offer.offerId)))
        XCTAssertTrue(stripeCoupon.livemode)
        XCTAssertEqual(stripeCoupon.field("percent_off"), "30")
        XCTAssertNil(stripeCoupon.field("amount_off"))
        XCTAssertEqual(stripeCoupon.field("duration"), "repeating")
        XCTAssertEqual(stripeCoupon.field("duration_in_months"), "3")
        XCTAssertEqual(Set(stripeCoupon.fields("applies_to[products][]")), [product, otherProduct])
        let promo = try XCTUnwrap(promotionCode(of: offer))
        XCTAssertEqual(promo.field("code"), code)
        XCTAssertEqual(promo.field("max_redemptions"), "50")
        XCTAssertEqual(promo.field("expires_at"), String(Int(expires.timeIntervalSince1970)))
        XCTAssertTrue(promo.active)
        XCTAssertEqual(
            Self.stripe.coupons.filter {
                $0.field("metadata[redeem_coupon_id]") == stripeCoupon.field("metadata[redeem_coupon_id]")
            }.count, 1)
        XCTAssertEqual(Self.stripe.promotionCodes.filter { $0.field("code") == code }.count, 1)
        // Every call for a live coupon carried the live key.
        XCTAssertTrue(
            Self.stripe.received.filter { $0.field("code") == code || $0.field("id") == offer.offerId }.allSatisfy {
                $0.mode == .live
            })

        // Deactivated: the promotion code goes off; activated again: back on.
        let off = try await client.json("PATCH", "/v1/coupons/\(code)", ["active": false], token: admin)
        XCTAssertEqual(off.status, 200, off.text)
        let wentOff = try await Self.stack.eventually(20) { self.promotionCode(of: offer)?.active == false }
        XCTAssertTrue(wentOff, Self.stack.logs())
        let on = try await client.json("PATCH", "/v1/coupons/\(code)", ["active": true], token: admin)
        XCTAssertEqual(on.status, 200, on.text)
        let cameBack = try await Self.stack.eventually(20) { self.promotionCode(of: offer)?.active == true }
        XCTAssertTrue(cameBack, Self.stack.logs())
        let again = try await ready(code, token: admin)
        XCTAssertEqual(again.offerId, offer.offerId)
        XCTAssertEqual(
            Self.stripe.promotionCodes.filter { $0.field("code") == code }.count, 1, "switched, never made twice")
    }

    func testATestCouponUsesTheTestKeyOnly() async throws {
        let test = try await testAdmin()
        let (plan, _, product) = try await self.plan(token: test)
        let code = newCode("WEBT")
        let c = try await client.json(
            "POST", "/v1/coupons",
            [
                "code": code, "kind": "amountOff", "amountOff": ["amount": "4.90", "currency": "USD"],
                "duration": ["unit": "week", "count": 1], "periodCount": 1,
                "productIds": [plan], "platforms": ["web"], "newCustomersOnly": true
            ], token: test)
        XCTAssertEqual(c.status, 201, c.text)
        let offer = try await ready(code, token: test)
        XCTAssertEqual(offer.store, "stripe")
        let stripeCoupon = try XCTUnwrap(Self.stripe.coupon(try XCTUnwrap(offer.offerId)))
        XCTAssertFalse(stripeCoupon.livemode)
        XCTAssertEqual(stripeCoupon.field("amount_off"), "490")
        XCTAssertEqual(stripeCoupon.field("currency"), "usd")
        XCTAssertEqual(stripeCoupon.field("duration"), "once")
        XCTAssertEqual(stripeCoupon.fields("applies_to[products][]"), [product])
        let promo = try XCTUnwrap(promotionCode(of: offer))
        XCTAssertFalse(promo.livemode)
        XCTAssertNil(promo.field("max_redemptions"))
        XCTAssertEqual(promo.field("restrictions[first_time_transaction]"), "true")
        let calls = Self.stripe.received.filter {
            $0.field("code") == code || $0.field("id") == offer.offerId || $0.field("coupon") == offer.offerId
        }
        XCTAssertGreaterThanOrEqual(calls.count, 2)
        XCTAssertTrue(calls.allSatisfy { $0.mode == .test }, "a test coupon reaches Stripe with the test key only")
    }

    func testAFullCapSwitchesThePromotionCodeOff() async throws {
        let (plan, _, _) = try await self.plan(token: admin)
        let code = newCode("WEBCAP")
        let c = try await client.json(
            "POST", "/v1/coupons",
            [
                "code": code, "kind": "percentOff", "percentOff": 50, "duration": ["unit": "month", "count": 1],
                "periodCount": 2,
                "productIds": [plan], "platforms": ["web"], "maxRedemptions": 1
            ], token: admin)
        XCTAssertEqual(c.status, 201, c.text)
        let offer = try await ready(code, token: admin)
        let u = try Self.minter.user()
        let r = try await client.json(
            "POST", "/v1/redemptions", ["code": code, "platform": "web", "productId": plan], token: u.token)
        XCTAssertEqual(r.status, 201, r.text)
        let id = try XCTUnwrap(try r.json()["redemptionId"] as? String)
        let supportKey =
            try await client.json(
                "POST", "/v1/api-keys", ["name": "stripe support", "role": "support", "mode": "live"], token: admin
            )
            .json()["key"] as? String
        let paid = try await client.json(
            "POST", "/v1/redemptions/\(id)/purchase",
            ["pricePaid": ["amount": "4.99", "currency": "USD"], "storeTransactionId": "sub_cap_\(code)"],
            token: try XCTUnwrap(supportKey))
        XCTAssertEqual(paid.status, 200, paid.text)
        let wentOff = try await Self.stack.eventually(20) { self.promotionCode(of: offer)?.active == false }
        XCTAssertTrue(wentOff, Self.stack.logs())
    }

    func testExpiringSwitchesThePromotionCodeOff() async throws {
        let (plan, _, _) = try await self.plan(token: admin)
        let code = newCode("WEBEXP")
        let expires = Date().addingTimeInterval(8)
        let c = try await client.json(
            "POST", "/v1/coupons",
            [
                "code": code, "kind": "percentOff", "percentOff": 15, "duration": ["unit": "month", "count": 1],
                "periodCount": 1, "productIds": [plan], "platforms": ["web"], "expiresAt": Timestamp.iso8601(expires)
            ], token: admin)
        XCTAssertEqual(c.status, 201, c.text)
        let offer = try await ready(code, token: admin)
        XCTAssertEqual(promotionCode(of: offer)?.active, true)
        let wentOff = try await Self.stack.eventually(20) { self.promotionCode(of: offer)?.active == false }
        XCTAssertTrue(wentOff, Self.stack.logs())
        XCTAssertGreaterThanOrEqual(Date(), expires, "switched off once expired, not before")
    }

    func testACouponWithoutStripePlansIsRefused() async throws {
        let plain = "plain." + UUID().uuidString.prefix(6).lowercased()
        let p = try await client.json("POST", "/v1/plans", ["productId": plain, "name": "Plain"], token: admin)
        XCTAssertEqual(p.status, 201, p.text)
        let c = try await client.json(
            "POST", "/v1/coupons",
            [
                "code": newCode("WEBNO"), "kind": "percentOff", "percentOff": 10,
                "duration": ["unit": "month", "count": 1], "periodCount": 1,
                "productIds": [plain], "platforms": ["web"]
            ], token: admin)
        XCTAssertEqual(c.status, 422, c.text)
        XCTAssertEqual(c.errorField, "productIds")
        let bad = try await client.json(
            "POST", "/v1/plans", ["productId": "bad." + plain, "name": "Bad", "stripe": ["priceId": "prod_x"]],
            token: admin)
        XCTAssertEqual(bad.status, 422, bad.text)
        XCTAssertEqual(bad.errorField, "stripe.priceId")
    }
}
