/// Why validate or redeem refused a code, with its sentence for people, written once.
/// Validate answers it as `reason`; redeem as a 422 whose `error.code` is the reason.
/// `alreadyOwned`: the account's store account already holds the plan (on Google Play, known
/// through RevenueCat's subscriber), so a purchase would be refused by the store.
public enum RefusalReason: String, Codable, Sendable, CaseIterable {
    case notFound, inactive, notStarted, expired, exhausted, alreadyRedeemed, notEligible, notReady, alreadyOwned

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
        }
    }
}
