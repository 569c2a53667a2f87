import Core
import Database
import Foundation
import TestSupport
import XCTest

/// An app's web coupons sell through the app's own Stripe account (docs/apps.md): its Stripe
/// coupon, promotion code, customer, Checkout Session and billing portal are made with the app's
/// own Stripe key (the fake Stripe records which key each call carried), Stripe's events reach the
/// app's own endpoint, checked with the app's webhook secret, and the receipt goes to the app's
/// RevenueCat project with the app's RevenueCat Stripe public key. The default app has no Stripe
/// settings in this suite.
extension AppsTests {
    /// An app with its own Stripe account (live key and webhook secret) and RevenueCat project
    /// (with its Stripe app's public key), a `coupon.redeemed` receiver, and a Stripe plan.
    struct StripeApp {
        let id: String
        let admin: String
        let stripeKey: String
        let webhookSecret: String
        let revenueCatStripeKey: String
        let receiver: WebhookReceiver
        let plan: String
    }

    func stripeApp(_ name: String) async throws -> StripeApp {
        let app = try await makeApp(name)
        let adminKey = try await key(in: app.id, by: admin).key
        let hex = UUID().uuidString.replacingOccurrences(of: "-", with: "")
        let stripeKey = "sk_live_" + hex, webhookSecret = "whsec_" + hex, publicKey = "strp_" + hex.prefix(12)
        Self.stripe.addAccount([.live: stripeKey])
        let stripe = try await send(
            "PUT", "/v1/apps/\(app.id)/stores/stripe", ["secretKey": stripeKey, "webhookSecret": webhookSecret],
            token: adminKey)
        XCTAssertEqual(stripe.status, 200, stripe.text)
        let rc = try await send(
            "PUT", "/v1/apps/\(app.id)/stores/revenuecat",
            ["secretKey": "sk_rc" + hex, "stripePublicKey": publicKey], token: adminKey)
        XCTAssertEqual(rc.status, 200, rc.text)
        XCTAssertEqual(try rc.json()["stripePublicKey"] as? String, publicKey, "shown: it is not secret")
        let receiver = try WebhookReceiver()
        addTeardownBlock { await receiver.stop() }
        let hook = try await send(
            "POST", "/v1/webhooks", ["url": receiver.url.absoluteString, "events": ["coupon.redeemed"]],
            token: adminKey)
        XCTAssertEqual(hook.status, 201, hook.text)
        let suffix = hex.prefix(8).lowercased()
        let plan = "web.\(suffix)", price = "price_\(suffix)"
        Self.stripe.addPrice(price, product: "prod_\(suffix)")
        let made = try await send(
            "POST", "/v1/plans", ["productId": plan, "name": "Pro", "stripe": ["priceId": price]], token: adminKey)
        XCTAssertEqual(made.status, 201, made.text)
        return StripeApp(
            id: app.id, admin: adminKey, stripeKey: stripeKey, webhookSecret: webhookSecret,
            revenueCatStripeKey: publicKey, receiver: receiver, plan: plan)
    }

    func webCoupon(_ code: String, plan: String, token: String) async throws -> HTTPClient.Response {
        try await send(
            "POST", "/v1/coupons",
            [
                "code": code, "kind": "percentOff", "percentOff": 20, "duration": ["unit": "month", "count": 1],
                "periodCount": 1, "productIds": [plan], "platforms": ["web"], "maxRedemptions": 10
            ], token: token)
    }

    /// The coupon's Stripe offer once `ready`.
    func readyStripeOffer(_ code: String, token: String) async throws -> StoreOfferBody {
        func offer() async throws -> StoreOfferBody? {
            try await send("GET", "/v1/coupons/\(code)", token: token).decode(CouponBody.self).storeOffers?.first
        }
        let ready = try await Self.stack.eventually(30) { try await offer()?.state == "ready" }
        XCTAssertTrue(ready, "the Stripe offer became ready\n\(Self.stack.logs())")
        let last = try await offer()
        return try XCTUnwrap(last)
    }

    /// The user's web redemption of `code` in `app`: its id and Checkout Session's id.
    func stripeCheckout(
        _ code: String, plan: String, token: String, app: String
    ) async throws -> (redemption: String, session: String) {
        let r = try await send(
            "POST", "/v1/redemptions", ["code": code, "platform": "web", "productId": plan], token: token, app: app)
        XCTAssertTrue([200, 201].contains(r.status), r.text)
        let body = try r.json()
        XCTAssertEqual(body["status"] as? String, "reserved")
        let url = try XCTUnwrap((body["stripe"] as? [String: Any])?["checkoutUrl"] as? String, r.text)
        return (try XCTUnwrap(body["redemptionId"] as? String), try XCTUnwrap(URL(string: url)?.lastPathComponent))
    }

    func postStripeEvent(_ payload: Data, signature: String, app: String?) async throws -> HTTPClient.Response {
        let path = app.map { "/v1/apps/\($0)/stores/stripe/webhooks" } ?? "/v1/stores/stripe/webhooks"
        return try await client.send(
            "POST", path, body: payload, headers: ["Content-Type": "application/json", "Stripe-Signature": signature])
    }

    func testAnAppsWebCouponSellsThroughItsOwnStripeAccount() async throws {
        let b = try await stripeApp("Stripe B")
        let a = try await stripeApp("Stripe A")

        // B's coupon: its Stripe coupon and promotion code are made with B's key.
        let code = "WEBB-" + UUID().uuidString.prefix(6).uppercased()
        let made = try await webCoupon(code, plan: b.plan, token: b.admin)
        XCTAssertEqual(made.status, 201, made.text)
        let offer = try await readyStripeOffer(code, token: b.admin)
        let offerCalls = Self.stripe.received.filter {
            ($0.path == "/v1/coupons" && $0.field("id") == offer.offerId)
                || ($0.path == "/v1/promotion_codes" && $0.method == "POST" && $0.field("coupon") == offer.offerId)
        }
        XCTAssertEqual(offerCalls.count, 2, "one Stripe coupon and one promotion code")
        XCTAssertTrue(offerCalls.allSatisfy { $0.key == b.stripeKey }, "made with B's key")
        let promotion = try XCTUnwrap(Self.stripe.promotionCodes.first { $0.field("coupon") == offer.offerId })
        XCTAssertEqual(promotion.field("code"), code)

        // An app without Stripe settings: refused, naming them.
        let c = try await makeApp("Stripe C")
        let adminC = try await key(in: c.id, by: admin).key
        let plainPlan = try await send(
            "POST", "/v1/plans", ["productId": b.plan, "name": "Pro", "stripe": ["priceId": "price_c"]],
            token: adminC)
        XCTAssertEqual(plainPlan.status, 201, plainPlan.text)
        let refused = try await webCoupon(code, plan: b.plan, token: adminC)
        XCTAssertEqual(refused.status, 422, refused.text)
        XCTAssertEqual([refused.errorCode, refused.errorField], ["invalid", "platforms"], refused.text)
        XCTAssertTrue(refused.text.contains("Stripe settings"), refused.text)

        // Checkout in B: the session and the customer are B's; redeeming again reuses the customer.
        let email = "stripe-b-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let signUp = try await client.json(
            "POST", "/v1/accounts", ["email": email, "password": "a long end-user passphrase"])
        XCTAssertEqual(signUp.status, 201, signUp.text)
        let user = try signUp.decode(AccountSessionBody.self)
        let token = user.session.accessToken
        let first = try await stripeCheckout(code, plan: b.plan, token: token, app: b.id)
        let again = try await stripeCheckout(code, plan: b.plan, token: token, app: b.id)
        XCTAssertEqual(first.redemption, again.redemption, "the same reservation")
        let sessions = [first.session, again.session].compactMap { Self.stripe.session($0) }
        XCTAssertEqual(sessions.count, 2)
        XCTAssertEqual(Set(sessions.compactMap { $0.field("customer") }).count, 1, "one customer, reused")
        XCTAssertEqual(sessions.first?.field("discounts[0][promotion_code]"), promotion.id)
        let sessionCalls = Self.stripe.received.filter { $0.path == "/v1/checkout/sessions" }.filter {
            $0.field("client_reference_id") == first.redemption.lowercased()
        }
        XCTAssertEqual(sessionCalls.count, 2)
        XCTAssertTrue(sessionCalls.allSatisfy { $0.key == b.stripeKey }, "sessions made with B's key")
        let customerCalls = Self.stripe.received.filter {
            $0.path == "/v1/customers" && $0.field("metadata[app_user_id]") == user.account.appUserId
        }
        XCTAssertEqual(customerCalls.map(\.key), [b.stripeKey], "one customer, made in B's Stripe account")
        XCTAssertEqual(customerCalls.first?.field("metadata[redeem_app_id]"), b.id.lowercased())

        // B's event: refused at A's endpoint and at the default app's (which takes none here);
        // forged and stale refused at B's; A's signature on B's session completes nothing.
        let completed = try XCTUnwrap(
            Self.stripe.checkoutEvent(
                "checkout.session.completed", sessionId: again.session, secret: b.webhookSecret, amountTotal: 799))
        let onA = try await postStripeEvent(completed.payload, signature: completed.signature, app: a.id)
        XCTAssertEqual([onA.status], [401], onA.text)
        XCTAssertEqual(onA.errorCode, "invalidSignature")
        let onDefault = try await postStripeEvent(completed.payload, signature: completed.signature, app: nil)
        XCTAssertEqual(onDefault.status, 404, onDefault.text)
        let forged = FakeStripe.signature(completed.payload, secret: "whsec_forged")
        let forgedOnB = try await postStripeEvent(completed.payload, signature: forged, app: b.id)
        XCTAssertEqual([forgedOnB.status], [401], forgedOnB.text)
        let stale = FakeStripe.signature(
            completed.payload, secret: b.webhookSecret, time: Date().addingTimeInterval(-600))
        let staleOnB = try await postStripeEvent(completed.payload, signature: stale, app: b.id)
        XCTAssertEqual([staleOnB.status], [400], staleOnB.text)
        XCTAssertEqual(staleOnB.errorCode, "staleSignature")
        let signedByA = try XCTUnwrap(
            Self.stripe.checkoutEvent(
                "checkout.session.completed", sessionId: again.session, secret: a.webhookSecret, amountTotal: 799))
        let crossed = try await postStripeEvent(signedByA.payload, signature: signedByA.signature, app: a.id)
        XCTAssertEqual(crossed.status, 200, crossed.text)
        XCTAssertEqual(try crossed.json()["recorded"] as? Bool, false, "A's endpoint never completes B's redemption")
        let still = try await send("GET", "/v1/redemptions/\(first.redemption)", token: token, app: b.id)
        XCTAssertEqual(try still.json()["status"] as? String, "reserved", still.text)

        // On B's endpoint: completed once, a replay changes nothing.
        let taken = try await postStripeEvent(completed.payload, signature: completed.signature, app: b.id)
        XCTAssertEqual(taken.status, 200, taken.text)
        XCTAssertEqual(try taken.json()["recorded"] as? Bool, true, taken.text)
        let replay = try await postStripeEvent(completed.payload, signature: completed.signature, app: b.id)
        XCTAssertEqual(try replay.json()["duplicate"] as? Bool, true, replay.text)
        let done = try await send("GET", "/v1/redemptions/\(first.redemption)", token: token, app: b.id)
        XCTAssertEqual(try done.json()["status"] as? String, "completed", done.text)

        // One coupon.redeemed to B's endpoint, none to A's; one receipt to B's RevenueCat project.
        let event = try XCTUnwrap(try JSONSerialization.jsonObject(with: completed.payload) as? [String: Any])
        let subscription = try XCTUnwrap(
            ((event["data"] as? [String: Any])?["object"] as? [String: Any])?["subscription"] as? String)
        func redeemed(_ receiver: WebhookReceiver) -> Int {
            receiver.received.filter {
                let body = String(decoding: $0.body, as: UTF8.self)
                return body.contains(first.redemption) && body.contains("coupon.redeemed")
            }.count
        }
        let reached = try await Self.stack.eventually(15) { redeemed(b.receiver) == 1 }
        XCTAssertTrue(reached, "B's endpoint gets one coupon.redeemed")
        let received = try await Self.stack.eventually(15) {
            Self.revenueCat.takenReceipts.contains { $0.fetchToken == subscription }
        }
        XCTAssertTrue(received, "the receipt reached RevenueCat\n\(Self.stack.logs())")
        try await Task.sleep(for: .seconds(1.5))
        XCTAssertEqual(redeemed(b.receiver), 1, "once")
        XCTAssertEqual(redeemed(a.receiver), 0, "never to A")
        let receipts = Self.revenueCat.receipts.filter { $0.fetchToken == subscription }
        XCTAssertEqual(receipts.count, 1, "exactly one receipt")
        XCTAssertEqual(receipts.first?.platform, "stripe")
        XCTAssertEqual(receipts.first?.authorization, "Bearer \(b.revenueCatStripeKey)", "B's RevenueCat Stripe key")
        XCTAssertEqual(receipts.first?.appUserId, user.account.appUserId)
        // Kept apart from the default app's receipts, which the previous release's pods send.
        let db = try PGConnection(url: try Self.stack.adminDatabaseURL())
        let kept = try db.query(
            """
            SELECT (SELECT count(*)::int FROM grants.stripe_receipts WHERE subscription_id = $1) AS default_rows,
                (SELECT count(*)::int FROM grants.stripe_app_receipts WHERE subscription_id = $1 AND status = 'sent')
                AS app_rows
            """, [subscription]
        ).first
        XCTAssertEqual(try kept?.decode("default_rows", as: Int.self), 0)
        XCTAssertEqual(try kept?.decode("app_rows", as: Int.self), 1)

        // The billing portal, in B: with B's key, for B's customer; none in A.
        let portal = try await send("POST", "/v1/me/billing-portal", token: token, app: b.id)
        XCTAssertEqual(portal.status, 200, portal.text)
        let portalCall = Self.stripe.received.last { $0.path == "/v1/billing_portal/sessions" }
        XCTAssertEqual(portalCall?.key, b.stripeKey)
        XCTAssertEqual(portalCall?.field("customer"), sessions.first?.field("customer"))
        let noneInA = try await send("POST", "/v1/me/billing-portal", token: token, app: a.id)
        XCTAssertEqual(noneInA.status, 404, noneInA.text)
        let me = try await send("GET", "/v1/me", token: token, app: b.id)
        let link = try XCTUnwrap(try me.json()["managementUrl"] as? String, me.text)
        XCTAssertTrue(link.contains("/v1/billing-portal/"), link)
        let meInA = try await send("GET", "/v1/me", token: token, app: a.id)
        XCTAssertNil(try meInA.json()["managementUrl"] as? String, meInA.text)
        let browser = HTTPClient(base: Self.stack.gateway, followRedirects: false)
        let followed = try await browser.send("GET", String(link[link.range(of: "/v1/billing-portal/")!.lowerBound...]))
        XCTAssertEqual(followed.status, 303, followed.text)
        XCTAssertEqual(Self.stripe.received.last { $0.path == "/v1/billing_portal/sessions" }?.key, b.stripeKey)

        // Deactivated: B's promotion code is switched off, with B's key.
        let off = try await send("PATCH", "/v1/coupons/\(code)", ["active": false], token: b.admin)
        XCTAssertEqual(off.status, 200, off.text)
        let switched = try await Self.stack.eventually(20) {
            Self.stripe.promotionCode(promotion.id)?.active == false
        }
        XCTAssertTrue(switched, "the promotion code was switched off\n\(Self.stack.logs())")
        let switchCall = Self.stripe.received.last { $0.path == "/v1/promotion_codes/\(promotion.id)" }
        XCTAssertEqual(switchCall?.key, b.stripeKey)
    }

    func testAnAppsExpiredCheckoutReleasesItsUse() async throws {
        let b = try await stripeApp("Stripe expiry B")
        let code = "EXPB-" + UUID().uuidString.prefix(6).uppercased()
        let made = try await webCoupon(code, plan: b.plan, token: b.admin)
        XCTAssertEqual(made.status, 201, made.text)
        _ = try await readyStripeOffer(code, token: b.admin)
        let user = try Self.minter.user()
        let checkout = try await stripeCheckout(code, plan: b.plan, token: user.token, app: b.id)
        let expired = try XCTUnwrap(
            Self.stripe.checkoutEvent("checkout.session.expired", sessionId: checkout.session, secret: b.webhookSecret))
        let r = try await postStripeEvent(expired.payload, signature: expired.signature, app: b.id)
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(try r.json()["recorded"] as? Bool, true, r.text)
        let released = try await send("GET", "/v1/redemptions/\(checkout.redemption)", token: user.token, app: b.id)
        XCTAssertEqual(try released.json()["status"] as? String, "released", released.text)
        let coupon = try await send("GET", "/v1/coupons/\(code)", token: b.admin)
        XCTAssertEqual(try coupon.decode(CouponBody.self).remaining, 10, "the use is given back: \(coupon.text)")
        // An app with no webhook secret takes no events: 404, as an id that names no app.
        let nowhere = try await postStripeEvent(expired.payload, signature: expired.signature, app: UUID().uuidString)
        XCTAssertEqual(nowhere.status, 404, nowhere.text)
    }

    /// Without a webhook secret nothing would complete a checkout: the app's web redemption is
    /// answered 503 and no session is made.
    func testAnAppWithoutAWebhookSecretMakesNoCheckoutSession() async throws {
        let d = try await makeApp("Stripe no hook D")
        let adminD = try await key(in: d.id, by: admin).key
        let stripeKey = "sk_live_" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        Self.stripe.addAccount([.live: stripeKey])
        let set = try await send("PUT", "/v1/apps/\(d.id)/stores/stripe", ["secretKey": stripeKey], token: adminD)
        XCTAssertEqual(set.status, 200, set.text)
        let suffix = UUID().uuidString.prefix(8).lowercased()
        Self.stripe.addPrice("price_\(suffix)", product: "prod_\(suffix)")
        let plan = try await send(
            "POST", "/v1/plans",
            ["productId": "web.\(suffix)", "name": "Pro", "stripe": ["priceId": "price_\(suffix)"]],
            token: adminD)
        XCTAssertEqual(plan.status, 201, plan.text)
        let code = "NOHOOK-" + UUID().uuidString.prefix(6).uppercased()
        let made = try await webCoupon(code, plan: "web.\(suffix)", token: adminD)
        XCTAssertEqual(made.status, 201, made.text)
        _ = try await readyStripeOffer(code, token: adminD)
        let sessionsBefore = Self.stripe.sessions.count
        let user = try Self.minter.user()
        let r = try await send(
            "POST", "/v1/redemptions", ["code": code, "platform": "web", "productId": "web.\(suffix)"],
            token: user.token, app: d.id)
        XCTAssertEqual(r.status, 503, r.text)
        XCTAssertTrue(r.text.contains("webhookSecret"), r.text)
        XCTAssertEqual(Self.stripe.sessions.count, sessionsBefore, "no Checkout Session")
    }
}
