/// Why validate or redeem refused a code, with its sentence for people, written once.
/// Validate answers it as `reason`; redeem as a 422 whose `error.code` is the reason.
/// `alreadyOwned`: the account's store account already holds the plan (on Google Play, known
/// through RevenueCat's subscriber), so a purchase would be refused by the store.
/// `webOnly`: a free period Redeem grants (no App Store offer) asked for inside an iOS app, where
/// App Review (guideline 3.1.1) lets an app unlock features only through in-app purchase; the
/// gateway adds the redeem page's URL for the code (`redeemUrl`).
/// `mistyped`: a code of the unique shape whose check character does not match (`UniqueCode`),
/// answered before any lookup. `codeUsed`: a unique code another redemption holds.
public enum RefusalReason: String, Codable, Sendable, CaseIterable {
    case notFound, inactive, notStarted, expired, exhausted, alreadyRedeemed, notEligible, notReady, alreadyOwned,
        webOnly, mistyped, codeUsed

    /// What the redeem page and an error's `message` say.
    public var sentence: String {
        switch self {
        case .notFound: "There is no coupon with this code."
        case .inactive: "This coupon is no longer active."
        case .notStarted: "This coupon can't be used yet."
        case .expired: "This coupon has expired."
        case .exhausted: "This coupon has been used up."
        case .alreadyRedeemed: "You have already redeemed this coupon."
        case .notEligible: "This coupon doesn't apply to your account, platform or product."
        case .notReady: "This offer isn't available in the store yet; try again later."
        case .alreadyOwned: "Your store account already has this plan, so this coupon can't be used for it."
        case .webOnly: "This coupon is redeemed on the web: open its page to redeem it."
        case .mistyped: "This code has a typing error: check each character and try again."
        case .codeUsed: "This code has already been used."
        }
    }
}
