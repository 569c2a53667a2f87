import Core
import Foundation

/// The rules shared by validate and redeem (the refusal reasons, in order), apart from any I/O:
/// `RedemptionStore` looks up what they decide on, and `RedemptionRulesTests` holds their table.
enum RedemptionRules {
    /// What the rules say of one request, on what the database answered for it.
    enum Decision: Equatable, Sendable {
        case refuse(RefusalReason)
        /// A use may be reserved, for this product (the coupon's only one when none was named).
        case reserve(productId: String?)
    }

    /// One request as the rules see it: the coupon and the account's standing, as looked up.
    struct Request {
        var coupon: CouponDefinition
        var active: Bool
        var platform: Platform?
        var productId: String?
        var resolveProduct: Bool
        var holdsUse: Bool
        var veteran: Bool
        var usesTaken: Int?
        var readyProducts: Set<String>? = nil
        var ownedProducts: Set<String>? = nil
        var now: Date
    }

    /// The one statement of the refusal rules, for validate and reservation (each a batch, of one
    /// request or many). Pure: the callers look up the coupon and the account's standing
    /// (`notFound` and an account's existing redemption are theirs: they have no row, or answer
    /// that redemption), and pass the time. In order: `inactive`, `notStarted`, `expired`,
    /// `notEligible` (platform, then product), `webOnly` (`CouponDefinition.isWebOnly`), the product a discount needs (`resolveProduct`; an
    /// input error, not a refusal), `alreadyRedeemed` (`holdsUse`: a live use of this coupon, which
    /// only validate asks about), `notEligible` (new customers only, `veteran`), `exhausted`
    /// (`usesTaken` of the cap; nil where the use is not counted: sandbox), and `notReady`
    /// (`readyProducts`: the plans whose App Store offer is ready, for a request that goes through
    /// the App Store, else nil): the product asked for (or resolved) must be one of them, and
    /// without one, at least one plan must be; then `alreadyOwned` (`ownedProducts`: the plans the
    /// account's store account already holds, known for a request through Google Play under
    /// `revenuecat`, else nil): the product asked for (or resolved) must not be one of them, and
    /// without one, some plan (ready, where readiness counts) must not be.
    static func decide(_ r: Request) throws -> Decision {
        guard r.active else { return .refuse(.inactive) }
        if let starts = r.coupon.startsAt, starts > r.now { return .refuse(.notStarted) }
        if let expires = r.coupon.expiresAt, expires <= r.now { return .refuse(.expired) }
        if let platform = r.platform, !r.coupon.platforms.contains(platform) { return .refuse(.notEligible) }
        if let productId = r.productId, !r.coupon.productIds.isEmpty, !r.coupon.productIds.contains(productId) {
            return .refuse(.notEligible)
        }
        if r.coupon.isWebOnly(on: r.platform) { return .refuse(.webOnly) }
        var product = r.productId
        if r.resolveProduct && product == nil && r.coupon.isDiscount {
            guard r.coupon.productIds.count == 1 else {
                throw ServiceError(
                    .invalid, "productId is required: this coupon covers several products", field: "productId")
            }
            product = r.coupon.productIds[0]
        }
        if r.holdsUse { return .refuse(.alreadyRedeemed) }
        if r.coupon.newCustomersOnly && r.veteran { return .refuse(.notEligible) }
        if let usesTaken = r.usesTaken, let max = r.coupon.maxRedemptions, usesTaken >= max {
            return .refuse(.exhausted)
        }
        if let ready = r.readyProducts {
            if let product {
                if !ready.contains(product) { return .refuse(.notReady) }
            } else if ready.isEmpty {
                return .refuse(.notReady)
            }
        }
        if let owned = r.ownedProducts, !owned.isEmpty {
            if let product {
                if owned.contains(product) { return .refuse(.alreadyOwned) }
            } else if (r.readyProducts ?? Set(r.coupon.productIds)).subtracting(owned).isEmpty {
                return .refuse(.alreadyOwned)
            }
        }
        return .reserve(productId: product)
    }
}
