/// The events an operator's webhook endpoint can take: the body's `type`, and an
/// endpoint's `events`.
public enum WebhookEventType: String, Codable, Sendable, CaseIterable {
    /// A redemption completed (either kind of coupon), once per redemption.
    case couponRedeemed = "coupon.redeemed"
    /// A redemption's grant failed for good.
    case redemptionFailed = "redemption.failed"
    /// An account's `appUserId` changed (a CloudKit record name was adopted): the
    /// apps log in to the provider again with the new id. `data` is `{accountId, appUserId,
    /// previousAppUserId}`.
    case appUserIdChanged = "account.appUserIdChanged"
    /// A coupon's cap was reached: its last use was taken. Once per coupon and cap (raising the
    /// cap and filling it again is another event). `data` is `CouponExhaustedData`.
    case couponExhausted = "coupon.exhausted"
    /// A reservation ended without a use: given back by the app, not paid for in time, or its
    /// account deleted. Its use went back to the coupon. `data` is the redemption, as for
    /// `coupon.redeemed`, with `status: released` and the reason in `failureReason`.
    case redemptionReleased = "redemption.released"
    /// A store took a coupon's offer (its code or coupon exists there). `data` is `StoreOfferEventData`.
    case storeOfferReady = "storeOffer.ready"
    /// A store refused to make a coupon's offer, for good. `data` is `StoreOfferEventData`, with
    /// the store's message.
    case storeOfferFailed = "storeOffer.failed"
    /// A test event an operator asked for (`POST /v1/webhooks/{id}/test`), to one endpoint; no
    /// endpoint subscribes to it.
    case webhookTest = "webhook.test"

    /// The events an endpoint may subscribe to.
    public static let subscribable: [WebhookEventType] = [
        .couponRedeemed, .redemptionFailed, .appUserIdChanged, .couponExhausted, .redemptionReleased, .storeOfferReady,
        .storeOfferFailed,
    ]

    /// `coupon.redeemed, redemption.failed, …`, for messages about a list that is not made of them.
    public static let listed = subscribable.map(\.rawValue).joined(separator: ", ")
}

/// Where one delivery of an event to one endpoint is: waiting for its next attempt,
/// or ended. A closed set: the column's CHECK constraint holds the same values.
public enum WebhookDeliveryStatus: String, Codable, Sendable, CaseIterable {
    case pending, delivered, failed
}
