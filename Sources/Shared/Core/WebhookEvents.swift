import Foundation

/// An event coupons commits for the operator's webhooks (`coupon.exhausted`,
/// `redemption.released`, `storeOffer.ready`, `storeOffer.failed`): written to its outbox in the
/// transaction that makes it true, pushed to grants until acknowledged (like
/// `RedemptionCompletedNotice`), and queued there once per endpoint: its `webhook-id` is made
/// from the type and `subject`, so a repeat queues nothing more.
public struct WebhookEventNotice: BusRequest, Equatable {
    public static let type = "grants.webhookEvent"
    public typealias Response = Empty
    public var event: WebhookEventType
    /// What the event is about, one per event (the outbox key, and grants' acknowledgement).
    public var subject: UUID
    /// The mode of the coupon: the event goes to that mode's endpoints only.
    public var mode: Mode
    /// The event's `data`, as the public JSON of its type (`RedemptionEventData`,
    /// `CouponExhaustedData`, `StoreOfferEventData`).
    public var data: JSONValue
    /// The app of the coupon: the event goes to that app's endpoints only (`DefaultApp.of`).
    public var app: UUID?
    public init(event: WebhookEventType, subject: UUID, mode: Mode, app: UUID? = nil, data: some Encodable) throws {
        self.app = app == DefaultApp.id ? nil : app
        self.event = event
        self.subject = subject
        self.mode = mode
        self.data = try JSONValue.of(data)
    }
}

/// `data` of `coupon.redeemed`, `redemption.failed` and `redemption.released`: the redemption's
/// own fields (with who made it), and the public coupon beside them in the same object.
public struct RedemptionEventData: Codable, Sendable {
    public var redemption: RedemptionView
    public var coupon: PublicCoupon

    public init(_ redemption: RedemptionView, coupon: PublicCoupon) {
        self.redemption = redemption
        self.coupon = coupon
    }

    private enum Keys: String, CodingKey { case coupon }

    public init(from decoder: any Decoder) throws {
        redemption = try RedemptionView(from: decoder)
        coupon = try decoder.container(keyedBy: Keys.self).decode(PublicCoupon.self, forKey: .coupon)
    }

    public func encode(to encoder: any Encoder) throws {
        try redemption.encode(to: encoder)
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(coupon, forKey: .coupon)
    }
}

/// `data` of `coupon.exhausted`: the coupon whose cap is reached.
public struct CouponExhaustedData: Codable, Sendable, Equatable {
    public var coupon: PublicCoupon
    public var maxRedemptions: Int
    /// The uses taken (redemptions completed or waiting): the cap or, after a purchase over the
    /// cap, more.
    public var redemptionCount: Int
    public init(coupon: PublicCoupon, maxRedemptions: Int, redemptionCount: Int) {
        self.coupon = coupon
        self.maxRedemptions = maxRedemptions
        self.redemptionCount = redemptionCount
    }
}

/// `data` of `storeOffer.ready` and `storeOffer.failed`: one offer of a coupon in one store.
public struct StoreOfferEventData: Codable, Sendable, Equatable {
    /// The coupon's code.
    public var code: String
    public var store: Store
    public var productId: String
    /// Google Play: the base plan of the offer.
    public var basePlanId: String?
    /// The store's id of the offer (Google Play's offer, the App Store's offer code, Stripe's coupon).
    public var offerId: String?
    /// `storeOffer.failed`: the store's reason. `storeOffer.ready`: what it left out, if anything.
    public var message: String?
    public init(code: String, store: Store, productId: String, basePlanId: String?, offerId: String?, message: String?)
    {
        self.code = code
        self.store = store
        self.productId = productId
        self.basePlanId = basePlanId
        self.offerId = offerId
        self.message = message
    }
}

/// `data` of `account.appUserIdChanged`.
public struct AppUserIdChangedData: Codable, Sendable, Equatable {
    public var accountId: UUID
    public var appUserId: String
    public var previousAppUserId: String
    public init(accountId: UUID, appUserId: String, previousAppUserId: String) {
        self.accountId = accountId
        self.appUserId = appUserId
        self.previousAppUserId = previousAppUserId
    }
}

/// `data` of `webhook.test`: the endpoint it was sent to.
public struct WebhookTestData: Codable, Sendable, Equatable {
    public var endpointId: UUID
    public var message: String
    public init(endpointId: UUID, message: String) {
        self.endpointId = endpointId
        self.message = message
    }
}

/// A webhook event as a receiver gets it: `{type, timestamp, data}`.
public struct WebhookEvent<Data: Codable & Sendable>: Codable, Sendable {
    public var type: WebhookEventType
    public var timestamp: Date
    public var data: Data
    public init(type: WebhookEventType, timestamp: Date, data: Data) {
        self.type = type
        self.timestamp = timestamp
        self.data = data
    }
}
