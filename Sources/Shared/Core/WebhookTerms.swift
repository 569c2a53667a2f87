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
    /// A test event an operator asked for (`POST /v1/webhooks/{id}/test`), to one endpoint; no
    /// endpoint subscribes to it.
    case webhookTest = "webhook.test"

    /// The events an endpoint may subscribe to.
    public static let subscribable: [WebhookEventType] = [.couponRedeemed, .redemptionFailed, .appUserIdChanged]

    /// `coupon.redeemed, redemption.failed, …`, for messages about a list that is not made of them.
    public static let listed = subscribable.map(\.rawValue).joined(separator: ", ")
}

/// Where one delivery of an event to one endpoint is: waiting for its next attempt,
/// or ended. A closed set: the column's CHECK constraint holds the same values.
public enum WebhookDeliveryStatus: String, Codable, Sendable, CaseIterable {
    case pending, delivered, failed
}
