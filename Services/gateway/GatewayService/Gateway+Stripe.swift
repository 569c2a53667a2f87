import Core
import Cryptography
import Foundation
import HTTP

/// Web subscriptions sold through Stripe Checkout (docs/stripe.md): the Checkout Session of a web
/// reservation, Stripe's signed webhook events completing or releasing it, and the billing
/// portal. Stripe's calls are grants' (it holds the keys); the gateway verifies the events.
extension Gateway {
    /// A Stripe event: the parts of a Checkout Session's event Redeem reads.
    struct StripeEventBody: APIBody {
        static let schemaName: String? = "StripeEvent"
        static let fieldRules: [String: [JSONSchema.Rule]] = [
            "id": [.note("Stripe's event id (evt_…), by which a replay is recognised")],
            "type": [
                .note("checkout.session.completed and checkout.session.expired are read; others are acknowledged")
            ],
            "data": [
                .note("data.object: the Checkout Session (client_reference_id, subscription, amount_total, currency)")
            ]
        ]
        struct Data: Decodable {
            struct Session: Decodable {
                var object: String?
                var client_reference_id: String?
                var subscription: String?
                var amount_total: Int?
                var currency: String?
                var mode: String?
            }
            var object: Session
        }
        var id: String
        var type: String
        var livemode: Bool
        var data: Data
    }

    /// What the gateway did with an event Stripe signed.
    struct StripeEventReceipt: Codable, Sendable, APIBody {
        static let schemaName: String? = "StripeEventReceipt"
        var eventId: String
        /// The event completed or released a reservation; false: another event, or about none of
        /// Redeem's reservations.
        var recorded: Bool
        /// The event's id was seen before: nothing was done again.
        var duplicate: Bool
        var redemptionId: UUID?
    }

    /// The billing portal's address.
    struct BillingPortal: Codable, Sendable, APIBody {
        static let schemaName: String? = "BillingPortal"
        static let fieldRules: [String: [JSONSchema.Rule]] = ["url": [.format("uri")]]
        var url: String
    }

    static let stripeRoutes: [APIRoute] = [
        .route(
            .post, "/v1/stores/stripe/webhooks",
            "Stripe's webhook events for Checkout (public; the Stripe-Signature header is checked)",
            answers: [200: .json(StripeEventReceipt.self)], errors: [400, 401, 404, 422, 429, 503],
            handle: Gateway.stripeWebhook),
        .route(
            .post, "/v1/apps/{id}/stores/stripe/webhooks",
            "Stripe's webhook events for Checkout of an app's own Stripe account (public; the Stripe-Signature"
                + " header is checked against the app's webhookSecret)",
            answers: [200: .json(StripeEventReceipt.self)], errors: [400, 401, 404, 422, 429, 503],
            handle: Gateway.appStripeWebhook),
        .route(
            .post, "/v1/me/billing-portal",
            "A Stripe billing-portal session for the signed-in account's web subscription", access: .user,
            answers: [200: .json(BillingPortal.self)], errors: [404, 503], handle: Gateway.billingPortal),
        // GET /v1/me's managementUrl for a Stripe subscription: the link itself (sealed by grants,
        // an hour long) is the credential, as a browser following it sends no token.
        .route(
            .get, "/v1/billing-portal/{link}",
            "Follow GET /v1/me's managementUrl: a Stripe billing-portal session made now, redirected to (303)",
            answers: [303: .empty], errors: [404, 429, 503], handle: Gateway.followBillingPortalLink)
    ]

    /// Web redemptions of a coupon with a Stripe promotion code go through Stripe Checkout once
    /// the gateway takes Stripe's events (`REDEEM_STRIPE_WEBHOOK_SECRET`): without them nothing
    /// would complete the reservation.
    var sellsThroughStripe: Bool { !config.stripeWebhookSecrets.isEmpty }

    /// Whether a web redemption in `app` may go through Stripe Checkout: the default app's when the
    /// gateway takes its events; another app's coupon has Stripe offers only when the app has
    /// Stripe settings, and grants makes its session with them (docs/apps.md).
    func sellsThroughStripe(in app: UUID) -> Bool { app != DefaultApp.id || sellsThroughStripe }

    /// The Checkout Session of a reserved web redemption, when its coupon sells through Stripe;
    /// the redemption as it is otherwise.
    func withStripeCheckout(
        _ redemption: RedemptionView, req: HTTPRequest, user: Authenticator.User
    ) async throws
        -> RedemptionView
    {
        guard sellsThroughStripe(in: user.app), redemption.platform == .web, redemption.status == .reserved else {
            return redemption
        }
        let terms = try await coupons.request(
            Coupons.StripeTerms(redemptionId: redemption.redemptionId, accountId: user.account))
        guard terms.sellsThroughStripe, let coupon = terms.couponId, let mode = terms.mode, let price = terms.priceId
        else { return redemption }
        var page = URLComponents()
        page.queryItems = [
            URLQueryItem(name: "code", value: redemption.code),
            URLQueryItem(name: "redemption", value: redemption.redemptionId.uppercasedString)
        ]
        let back = Self.origin(req) + "/redeem?" + (page.percentEncodedQuery ?? "")
        let session = try await grants.request(
            Grants.StripeCheckout(
                redemptionId: redemption.redemptionId, couponId: coupon, mode: mode, priceId: price,
                accountId: user.account, appUserId: user.appUserId,
                successURL: back + "&checkout=success", cancelURL: back + "&checkout=cancel", app: terms.app))
        var handed = redemption
        handed.stripe = StripeHandoff(checkoutUrl: session.checkoutUrl)
        return handed
    }

    /// Stripe's event: its signature checked first (401 forged, 400 stale or malformed, counted
    /// against the address), then a Checkout Session's completion or expiry handed to coupons,
    /// which remembers the event's id in the same transaction (a replay is answered `duplicate`).
    /// Stripe retries anything but a 2xx, so an event about nothing of Redeem's is acknowledged.
    func stripeWebhook(_ req: HTTPRequest, _ body: Incoming<StripeEventBody>) async throws -> HTTPResponse {
        try abuse.checkStoreNotifications(ip: req.clientAddress)
        guard req.body.count <= Self.maxNotificationBytes else {
            throw HTTPError.invalid(nil, "an event is at most \(Self.maxNotificationBytes / 1024) KiB")
        }
        // A server that sells nothing through Stripe has no such endpoint: 404, as for a route it lacks
        // (not 401: no credential would help).
        guard sellsThroughStripe else {
            abuse.storeNotificationRefused(ip: req.clientAddress)
            throw HTTPError(
                404, "notFound", "this server takes no Stripe events (REDEEM_STRIPE_WEBHOOK_SECRET is unset)")
        }
        do {
            try StripeSignature.verify(
                payload: req.body, header: req.header("stripe-signature"), secrets: config.stripeWebhookSecrets,
                now: Date())
        } catch {
            abuse.storeNotificationRefused(ip: req.clientAddress)
            throw Self.stripeSignatureRefused(error)
        }
        return try await stripeEvent(try body.read(), app: DefaultApp.id)
    }

    /// A Stripe event sent to an app's own endpoint (docs/apps.md): checked by grants against the
    /// `webhookSecret` of the app's Stripe settings (the secrets never leave grants), refused as
    /// at the default app's endpoint, then handed to coupons for that app's redemptions only. The
    /// default app's endpoint is `POST /v1/stores/stripe/webhooks`; an app without a webhook
    /// secret, or no such app, is 404.
    func appStripeWebhook(_ req: HTTPRequest, _ body: Incoming<StripeEventBody>) async throws -> HTTPResponse {
        try abuse.checkStoreNotifications(ip: req.clientAddress)
        guard req.body.count <= Self.maxNotificationBytes else {
            throw HTTPError.invalid(nil, "an event is at most \(Self.maxNotificationBytes / 1024) KiB")
        }
        guard let app = req.pathParameters["id"].flatMap(UUID.init(parsing:)), app != DefaultApp.id else {
            abuse.storeNotificationRefused(ip: req.clientAddress)
            throw HTTPError(
                404, "notFound",
                "no such app's Stripe endpoint (the default app's is POST /v1/stores/stripe/webhooks)")
        }
        let verdict = try await grants.request(
            Grants.StripeVerify(app: app, payload: req.body, signature: req.header("stripe-signature"))
        ).verdict
        switch verdict {
        case .valid: break
        case .notSet:
            abuse.storeNotificationRefused(ip: req.clientAddress)
            throw HTTPError(
                404, "notFound", "this app takes no Stripe events (its Stripe settings have no webhookSecret)")
        case .malformed:
            abuse.storeNotificationRefused(ip: req.clientAddress)
            throw Self.stripeSignatureRefused(.malformed)
        case .forged:
            abuse.storeNotificationRefused(ip: req.clientAddress)
            throw Self.stripeSignatureRefused(.forged)
        case .stale:
            abuse.storeNotificationRefused(ip: req.clientAddress)
            throw Self.stripeSignatureRefused(.stale)
        }
        return try await stripeEvent(try body.read(), app: app)
    }

    /// A refused signature as its HTTP error. The codes are StripeSignature.Failure's, written out
    /// for the error catalogue.
    static func stripeSignatureRefused(_ failure: StripeSignature.Failure) -> HTTPError {
        switch failure {
        case .malformed:
            HTTPError(400, "malformedSignature",
                "Stripe-Signature must carry t= and at least one v1=",
                field: "Stripe-Signature")
        case .forged:
            HTTPError(401, "invalidSignature",
                "no v1 signature of Stripe-Signature matches this endpoint's secret",
                field: "Stripe-Signature")
        case .stale:
            HTTPError(400, "staleSignature",
                "Stripe-Signature's time is more than 5 minutes from now",
                field: "Stripe-Signature")
        }
    }

    /// A verified event of `app`'s Stripe account: a Checkout Session's completion or expiry
    /// handed to coupons, for that app's redemptions only.
    func stripeEvent(_ event: StripeEventBody, app: UUID) async throws -> HTTPResponse {
        let kind: Coupons.StripeEvent.Kind
        switch event.type {
        case "checkout.session.completed": kind = .completed
        case "checkout.session.expired": kind = .expired
        default: return .json(200, StripeEventReceipt(eventId: event.id, recorded: false, duplicate: false))
        }
        let session = event.data.object
        guard let reference = session.client_reference_id, let redemption = UUID(uuidString: reference) else {
            return .json(200, StripeEventReceipt(eventId: event.id, recorded: false, duplicate: false))
        }
        do {
            let answer = try await coupons.request(
                Coupons.StripeEvent(
                    eventId: event.id, kind: kind, redemptionId: redemption, subscriptionId: session.subscription,
                    amountTotal: session.amount_total, currency: session.currency, livemode: event.livemode,
                    app: app == DefaultApp.id ? nil : app))
            return .json(
                200,
                StripeEventReceipt(
                    eventId: event.id, recorded: answer.recorded, duplicate: answer.duplicate,
                    redemptionId: answer.redemptionId))
        } catch let e as ServiceError where [.invalid, .transactionInUse, .notFound].contains(e.code) {
            logger.info(
                "stripe event ignored",
                ["event.id": event.id, "error.code": e.code.rawValue, "error.field": e.field ?? ""])
            return .json(200, StripeEventReceipt(eventId: event.id, recorded: false, duplicate: false))
        }
    }

    /// Where `GET /v1/me` says the account's Stripe subscription is managed: a link to
    /// `GET /v1/billing-portal/{link}` when the account has a Stripe customer, nil otherwise or when
    /// grants cannot say.
    func stripeManagementURL(_ req: HTTPRequest, account: UUID, app: UUID = DefaultApp.id) async -> String? {
        // Without Stripe's events nothing checks out through Stripe: no customer to ask about.
        guard sellsThroughStripe(in: app),
            let answer = try? await grants.request(
                Grants.StripePortalLink(accountId: account, app: app == DefaultApp.id ? nil : app)),
            let link = answer.link
        else { return nil }
        return Self.origin(req) + "/v1/billing-portal/" + link
    }

    /// A followed `managementUrl`: the portal session is made now (Stripe's portal sessions are
    /// short-lived, made when the customer asks), and the browser sent on to it. An unknown or
    /// ended link is 404; an address is held to the sign-in rate.
    func followBillingPortalLink(_ req: HTTPRequest) async throws -> HTTPResponse {
        try abuse.checkAuth(ip: req.clientAddress, email: nil)
        let link = req.pathParameters["link"] ?? ""
        let portal = try await grants.request(Grants.StripePortal(link: link, returnURL: Self.origin(req) + "/redeem"))
        return HTTPResponse(status: 303, headers: [("Location", portal.url), ("Cache-Control", "no-store")])
    }

    /// A billing-portal session for the account's Stripe customer, back to the redeem page.
    func billingPortal(_ req: HTTPRequest, _ user: Authenticator.User) async throws -> HTTPResponse {
        let portal = try await grants.request(
            Grants.StripePortal(
                accountId: user.account, returnURL: Self.origin(req) + "/redeem",
                app: user.app == DefaultApp.id ? nil : user.app))
        return .json(200, BillingPortal(url: portal.url))
    }
}
