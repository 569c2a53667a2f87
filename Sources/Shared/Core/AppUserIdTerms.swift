import Foundation

/// Why linking a CloudKit record name left the account's `appUserId` as it was (the
/// appUserId rule). A closed set: clients may switch over it.
public enum AppUserIdKept: String, Codable, Sendable, CaseIterable {
    /// The record name is the `appUserId` already.
    case alreadyThisId
    /// The `appUserId` is a record name already (an iOS-first account, or an earlier link): the
    /// purchases under it stay where they are.
    case recordNameAlready
    /// The fresh id holds store purchases (the provider's subscriber shows one), so it stays.
    case storePurchases
}

/// Where an entitlement comes from: RevenueCat's `store` of the purchase behind it,
/// or the provider that holds one of Redeem's own grants (`local`, `local-sandbox`, `revenuecat`,
/// `revenuecat-sandbox`, as stored with each grant). Kept as text on the wire, since RevenueCat may
/// add stores; these are the values Redeem knows.
public enum EntitlementSource {
    /// RevenueCat's `store` values (RevenueCat's REST API v1, the customer's subscriptions).
    public static let stores = ["app_store", "mac_app_store", "play_store", "amazon", "stripe", "promotional", "roku", "paddle"]
}
