// The message types that are also bodies of the public HTTP API (`APIBody`). Each one's fields
// come from its Codable definition; the rules here say what its Swift types don't.

extension Platform: WireEnum {}
extension CouponKind: WireEnum {}
extension Role: WireEnum {}
extension Mode: WireEnum {}
extension AppUserIdKept: WireEnum {}
extension RefusalReason: WireEnum {}
extension RedemptionStatus: WireEnum {}
extension WebhookEventType: WireEnum {}
extension WebhookDeliveryStatus: WireEnum {}
extension Store: WireEnum {}
extension StoreOfferState: WireEnum {}

extension Money: APIBody {
    public static let schemaName: String? = "Money"
    public static let fieldRules: [String: [JSONSchema.Rule]] = [
        "amount": [.pattern(#"^[0-9]+(\.[0-9]{1,2})?$"#)],
        "currency": [.pattern("^[A-Z]{3}$")],
    ]
}

extension CouponDuration: APIBody {
    public static let schemaName: String? = "Duration"
    public static let fieldRules: [String: [JSONSchema.Rule]] = [
        "unit": [.oneOf(["day", "week", "month", "year"])],
        "count": [.minimum(1)],
    ]
}

extension StoreLimit: APIBody {
    public static let schemaName: String? = "StoreLimit"
}

/// Every field may be left out as far as the decoder goes; coupons checks each and
/// answers 422 naming it.
extension CouponInput: APIBody {
    public static let schemaName: String? = "CouponInput"
    public static let fieldRules: [String: [JSONSchema.Rule]] = [
        "code": [.required, .pattern("^[A-Za-z0-9_-]{3,64}$")],
        "kind": [.required, .oneOf(CouponKind.self)],
        "duration": [.required],
        "percentOff": JSONSchema.Rule.range(1...100),
        "periodCount": [.minimum(1)],
        "platforms": [.items([.oneOf(Platform.self)])],
        "maxRedemptions": JSONSchema.Rule.range(1...Coupons.largestCap),
    ]
}

extension CouponView: APIBody {
    public static let schemaName: String? = "Coupon"
}

extension PublicCoupon: APIBody {
    public static let schemaName: String? = "PublicCoupon"
}

extension RedemptionView: APIBody {
    public static let schemaName: String? = "Redemption"
}

extension Coupons.Validate.Answer: APIBody {
    public static let schemaName: String? = "ValidateResult"
}

extension StoreOfferView: APIBody {
    public static let schemaName: String? = "StoreOffer"
}

extension StoreOfferTerms: APIBody {
    public static let schemaName: String? = "OfferTerms"
    public static let fieldRules: [String: [JSONSchema.Rule]] = ["percentOff": JSONSchema.Rule.range(1...100), "periodCount": [.minimum(1)]]
}

extension AppStoreHandoff: APIBody {
    public static let schemaName: String? = "AppStoreHandoff"
    public static let fieldRules: [String: [JSONSchema.Rule]] = ["redemptionUrl": [.format("uri")]]
}

extension PlayStoreHandoff: APIBody {
    public static let schemaName: String? = "PlayStoreHandoff"
}

extension StripeHandoff: APIBody {
    public static let schemaName: String? = "StripeHandoff"
    public static let fieldRules: [String: [JSONSchema.Rule]] = ["checkoutUrl": [.format("uri")]]
}

extension AccountView: APIBody {
    public static let schemaName: String? = "Account"
}

extension AccountView.Identity: APIBody {
    public static let schemaName: String? = "Identity"
    public static let fieldRules: [String: [JSONSchema.Rule]] = ["type": [.oneOf(["email", "apple", "cloudkit"])]]
}

extension SessionTokens: APIBody {
    public static let schemaName: String? = "Session"
}

extension Accounts.LinkCloudKit.Response: APIBody {
    public static let schemaName: String? = "AppUserId"
}

extension APIKeyView: APIBody {
    public static let schemaName: String? = "ApiKey"
}

/// A list page is named after its items: `CouponPage`.
extension Page: APIBody where Item: APIBody {
    public static var schemaName: String? { Item.schemaName.map { $0 + "Page" } }
    public static var fieldRules: [String: [JSONSchema.Rule]] { ["nextCursor": [.alwaysSent]] }
}

extension EntitlementView: APIBody {
    public static let schemaName: String? = "Entitlement"
}

extension Grants.Entitlements.Response: APIBody {
    public static let schemaName: String? = "EntitlementList"
    /// Its decoder reads answers of earlier grants without one; the gateway always sends it.
    public static let fieldRules: [String: [JSONSchema.Rule]] = ["partial": [.required]]
}

extension WebhookEndpointView: APIBody {
    public static let schemaName: String? = "Webhook"
    /// Its decoder reads answers of earlier grants without one; the gateway always sends it.
    public static let fieldRules: [String: [JSONSchema.Rule]] = ["mode": [.required]]
}

extension RedemptionEventData: APIBody {
    public static let schemaName: String? = "RedemptionEventData"
}

extension CouponExhaustedData: APIBody {
    public static let schemaName: String? = "CouponExhaustedData"
}

extension StoreOfferEventData: APIBody {
    public static let schemaName: String? = "StoreOfferEventData"
}

extension AppUserIdChangedData: APIBody {
    public static let schemaName: String? = "AppUserIdChangedData"
}

extension WebhookTestData: APIBody {
    public static let schemaName: String? = "WebhookTestData"
}

extension WebhookDeliveryView: APIBody {
    public static let schemaName: String? = "Delivery"
    public static let fieldRules: [String: [JSONSchema.Rule]] = ["lastResponse": [.maxLength(1024)]]
}

/// Every field may be left out as far as the decoder goes; coupons checks each and answers 422
/// naming it.
extension PlanInput: APIBody {
    public static let schemaName: String? = "PlanInput"
    public static let fieldRules: [String: [JSONSchema.Rule]] = ["productId": [.required], "name": [.required]]
}

extension PlanInput.AppStore: APIBody {
    public static let schemaName: String? = "PlanAppStoreInput"
    public static let fieldRules: [String: [JSONSchema.Rule]] = [
        "subscriptionId": [.note("the App Store Connect resource id of the auto-renewable subscription, not its product identifier")],
    ]
}

extension PlanInput.PlayStore: APIBody {
    public static let schemaName: String? = "PlanPlayStoreInput"
}

extension PlanView: APIBody {
    public static let schemaName: String? = "Plan"
}

extension AppStorePlan: APIBody {
    public static let schemaName: String? = "PlanAppStore"
}

extension PlayStorePlan: APIBody {
    public static let schemaName: String? = "PlanPlayStore"
}

extension AuditActor.Kind: WireEnum {}

extension AuditActor: APIBody {
    public static let schemaName: String? = "AuditActor"
}

extension AuditEntry: APIBody {
    public static let schemaName: String? = "AuditEntry"
    public static let fieldRules: [String: [JSONSchema.Rule]] = [
        "actor": [.alwaysSent, .note("null for a change from a gateway of an earlier version")],
        "action": [
            .note(
                "<objectType>.<verb>: coupon.create, coupon.update, coupon.deactivate, plan.create, plan.update, apiKey.create, "
                    + "apiKey.revoke, webhook.create, webhook.update, webhook.rotateSecret, webhook.delete, member.invite, "
                    + "member.join, member.update, member.remove, "
                    + "redemption.confirm, redemption.simulatePurchase, storeOffer.simulateReady")
        ],
        "objectId": [.note("a coupon's code, a plan's productId, or the id of a key, webhook, member or redemption")],
        "before": [.alwaysSent, .note("the object's public JSON before the change (never a secret); null when it was made")],
        "after": [.alwaysSent, .note("the object's public JSON after the change (never a secret); null when it was removed")],
        "requestId": [.alwaysSent],
    ]
}

extension MemberView: APIBody {
    public static let schemaName: String? = "Member"
}

extension MemberInviteView: APIBody {
    public static let schemaName: String? = "MemberInvite"
}

/// `count` and `prefix` of `POST /v1/coupons/{code}/codes`; coupons checks each and answers 422
/// naming it.
extension CodesInput: APIBody {
    public static let schemaName: String? = "CodesInput"
    public static let fieldRules: [String: [JSONSchema.Rule]] = [
        "count": [.required] + JSONSchema.Rule.range(1...UniqueCode.maxCount),
        "prefix": [.pattern("^[A-Za-z0-9]{1,12}$"), .note("printed before each code, with a hyphen")],
    ]
}

extension CodesCreated: APIBody {
    public static let schemaName: String? = "CodesCreated"
    public static let fieldRules: [String: [JSONSchema.Rule]] = [
        "csvUrl": [.format("uri")], "downloadUrl": [.format("uri")],
    ]
}

extension RedemptionStats: APIBody {
    public static let schemaName: String? = "RedemptionStats"
}

extension RedemptionStats.Day: APIBody {
    public static let schemaName: String? = "RedemptionStatsDay"
}

extension RedemptionStats.CouponCount: APIBody {
    public static let schemaName: String? = "RedemptionStatsCoupon"
}

extension RedemptionExport: APIBody {
    public static let schemaName: String? = "RedemptionExport"
    public static let fieldRules: [String: [JSONSchema.Rule]] = ["downloadUrl": [.format("uri")]]
}

extension AppView: APIBody {
    public static let schemaName: String? = "App"
}

extension StoreSettingsView: APIBody {
    public static let schemaName: String? = "StoreSettings"
    public static let fieldRules: [String: [JSONSchema.Rule]] = [
        "secretEnding": [.note("the last four characters of the API key; for a key file, of a hash of its public key")]
    ]
}

extension AppStores.List.Response: APIBody {
    public static let schemaName: String? = "StoreSettingsList"
}
