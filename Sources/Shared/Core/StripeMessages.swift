import Foundation

/// The bus messages of Stripe checkout (docs/stripe.md): the gateway asks coupons what a web
/// reservation sells through Stripe, asks grants (which holds the secret keys) for the Checkout
/// Session, and hands coupons Stripe's verified webhook events.
extension Coupons {
    /// What a reserved web redemption sells through Stripe: its coupon (whose promotion code
    /// grants made), the coupon's mode and the plan's Stripe price. `sellsThroughStripe` false
    /// when it is not a reserved web redemption of a coupon with Stripe offers, or its plan has
    /// no Stripe price.
    public struct StripeTerms: BusRequest {
        public static let type = "coupons.stripeTerms"
        public struct Response: Codable, Sendable, Equatable {
            public var sellsThroughStripe: Bool
            public var couponId: UUID?
            public var mode: Mode?
            public var priceId: String?
            /// The coupon's app (nil: the default app), whose Stripe account sells it.
            public var app: UUID?
            public init(
                sellsThroughStripe: Bool, couponId: UUID? = nil, mode: Mode? = nil, priceId: String? = nil,
                app: UUID? = nil
            ) {
                self.app = app
                self.sellsThroughStripe = sellsThroughStripe
                self.couponId = couponId
                self.mode = mode
                self.priceId = priceId
            }
        }
        public var redemptionId: UUID
        public var accountId: UUID
        public init(redemptionId: UUID, accountId: UUID) {
            self.redemptionId = redemptionId
            self.accountId = accountId
        }
    }

    /// A Checkout Session's event, verified by the gateway (`Stripe-Signature`): `completed`
    /// completes the reservation named by `client_reference_id`, `expired` releases it. The
    /// event's id is remembered in the same transaction, so a replay changes nothing.
    public struct StripeEvent: BusRequest {
        public static let type = "coupons.stripeEvent"
        public enum Kind: String, Codable, Sendable {
            case completed, expired
        }
        public struct Response: Codable, Sendable, Equatable {
            /// The event changed a redemption.
            public var recorded: Bool
            /// The event's id was seen before: nothing was done again.
            public var duplicate: Bool
            public var redemptionId: UUID?
            public init(recorded: Bool, duplicate: Bool, redemptionId: UUID? = nil) {
                self.recorded = recorded
                self.duplicate = duplicate
                self.redemptionId = redemptionId
            }
        }
        public var eventId: String
        public var kind: Kind
        public var redemptionId: UUID
        /// `completed`: the subscription the session started (the purchase chain).
        public var subscriptionId: String?
        /// `completed`: what was paid (`amount_total`), in the currency's minor unit.
        public var amountTotal: Int?
        public var currency: String?
        public var livemode: Bool
        /// The app whose Stripe endpoint took the event (nil: the default app's): only a
        /// redemption of that app's coupons is changed.
        public var app: UUID?
        public init(
            eventId: String, kind: Kind, redemptionId: UUID, subscriptionId: String? = nil, amountTotal: Int? = nil,
            currency: String? = nil, livemode: Bool, app: UUID? = nil
        ) {
            self.app = app
            self.eventId = eventId
            self.kind = kind
            self.redemptionId = redemptionId
            self.subscriptionId = subscriptionId
            self.amountTotal = amountTotal
            self.currency = currency
            self.livemode = livemode
        }
    }
}

extension Grants {
    /// A Checkout Session for a reserved web redemption: the account's Stripe customer (made once
    /// per account and mode, then reused), the plan's price, the coupon's promotion code, and the
    /// redemption's id as `client_reference_id`. `unavailable` when Stripe is not reachable or the
    /// coupon's promotion code is not made yet.
    public struct StripeCheckout: BusRequest {
        public static let type = "grants.stripeCheckout"
        public struct Response: Codable, Sendable, Equatable {
            public var checkoutUrl: String
            public init(checkoutUrl: String) { self.checkoutUrl = checkoutUrl }
        }
        public var redemptionId: UUID
        public var couponId: UUID
        public var mode: Mode
        public var priceId: String
        public var accountId: UUID
        public var appUserId: String
        public var successURL: String
        public var cancelURL: String
        /// The coupon's app (nil: the default app): its own Stripe settings make the session.
        public var app: UUID?
        public init(
            redemptionId: UUID, couponId: UUID, mode: Mode, priceId: String, accountId: UUID, appUserId: String,
            successURL: String, cancelURL: String, app: UUID? = nil
        ) {
            self.app = app
            self.redemptionId = redemptionId
            self.couponId = couponId
            self.mode = mode
            self.priceId = priceId
            self.accountId = accountId
            self.appUserId = appUserId
            self.successURL = successURL
            self.cancelURL = cancelURL
        }
    }

    /// A Stripe billing-portal session for the Stripe customer of the account, named by its id or
    /// by a portal link (`StripePortalLink`); `notFound` when the account has none (it never
    /// checked out through Stripe), or the link is not one of grants' or has ended.
    public struct StripePortal: BusRequest {
        public static let type = "grants.stripePortal"
        public struct Response: Codable, Sendable, Equatable {
            public var url: String
            public init(url: String) { self.url = url }
        }
        public var accountId: UUID?
        public var link: String?
        public var returnURL: String
        /// The app whose Stripe customer is meant (nil: the default app); a link names its own.
        public var app: UUID?
        public init(accountId: UUID, returnURL: String, app: UUID? = nil) {
            self.accountId = accountId
            self.returnURL = returnURL
            self.app = app
        }
        public init(link: String, returnURL: String) {
            self.link = link
            self.returnURL = returnURL
        }
    }

    /// A link to the account's billing portal, for `GET /v1/me`'s `managementUrl`: sealed by
    /// grants, it names the account for an hour, and following it makes the portal session
    /// (`StripePortal` with the link). nil when the account has no Stripe customer.
    public struct StripePortalLink: BusRequest {
        public static let type = "grants.stripePortalLink"
        public struct Response: Codable, Sendable, Equatable {
            public var link: String?
            public init(link: String?) { self.link = link }
        }
        public var accountId: UUID
        /// The app whose Stripe customer is meant (nil: the default app).
        public var app: UUID?
        public init(accountId: UUID, app: UUID? = nil) {
            self.accountId = accountId
            self.app = app
        }
    }

    /// Checks a Stripe event sent to an app's own endpoint (`POST /v1/apps/{id}/stores/stripe/webhooks`)
    /// against the `webhookSecret` of the app's Stripe settings (either mode), which only grants
    /// holds: the payload and `Stripe-Signature` go to grants, the secrets never leave it.
    /// `verdict`: `valid`, `malformed`, `forged`, `stale`, or `notSet` (the app has no webhook
    /// secret: it takes no Stripe events).
    public struct StripeVerify: BusRequest {
        public static let type = "grants.stripeVerify"
        public enum Verdict: String, Codable, Sendable {
            case valid, malformed, forged, stale, notSet
        }
        public struct Response: Codable, Sendable, Equatable {
            public var verdict: Verdict
            public init(verdict: Verdict) { self.verdict = verdict }
        }
        public var app: UUID
        public var payload: Data
        public var signature: String?
        public init(app: UUID, payload: Data, signature: String?) {
            self.app = app
            self.payload = payload
            self.signature = signature
        }
    }
}

/// What grants tells RevenueCat once a Stripe checkout completed (docs/stripe.md): the
/// subscription, sent as a receipt (`POST /v1/receipts`, `X-Platform: stripe`) through the
/// grants outbox, once per subscription.
public struct StripeReceipt: Codable, Sendable, Equatable {
    public var subscriptionId: String
    public var appUserId: String
    public init(subscriptionId: String, appUserId: String) {
        self.subscriptionId = subscriptionId
        self.appUserId = appUserId
    }
}

/// Stripe's amounts are in the currency's minor unit (490 is 4.90 USD), except in the currencies
/// it counts in whole units (JPY).
public enum StripeAmount {
    /// Currencies Stripe counts in whole units (no minor unit).
    public static let zeroDecimal: Set<String> = [
        "BIF", "CLP", "DJF", "GNF", "JPY", "KMF", "KRW", "MGA", "PYG", "RWF", "UGX", "VND", "VUV", "XAF", "XOF", "XPF"
    ]

    /// An amount in minor units as a decimal amount of `currency` (490 USD → 4.9).
    public static func decimal(minorUnits: Int, currency: String) -> Decimal {
        zeroDecimal.contains(currency.uppercased()) ? Decimal(minorUnits) : Decimal(minorUnits) / 100
    }
}
