import Foundation

// The stores a coupon can become an offer in, and what coupons knows of each offer
// (docs/stores.md).

/// A store that applies discounts itself.
public enum Store: String, Codable, Sendable, CaseIterable {
    case appStore, playStore
    /// Stripe, for the web (docs/stripe.md): one Stripe coupon and promotion code per coupon.
    case stripe

    /// The stored state of an offer the store has made and that is settling
    /// (`StoreOfferReadiness`): Apple's custom code exists, Google's offer is active, or Stripe's
    /// promotion code exists.
    public var waiting: StoreOfferState {
        switch self {
        case .appStore: .waitingForApple
        case .playStore: .waitingForGoogle
        case .stripe: .waitingForStripe
        }
    }
}

extension Platform {
    /// The store that sells on this platform and applies its discounts, if Redeem offers there.
    /// Every rule that tells stores apart asks this, so a new platform or store is a compile
    /// error here rather than a quiet `false` elsewhere.
    public var store: Store? {
        switch self {
        case .ios: .appStore
        case .android: .playStore
        case .web: .stripe
        }
    }
}

/// Where a coupon's offer for one plan stands in a store (docs/stores.md, "Data"): `creating` until
/// grants has made the offer and its code (Apple) or made and activated the offer (Google), then
/// `waitingForApple` or `waitingForGoogle` (`Store.waiting`), or `failed` with the store's message. `ready` is never stored: it is worked out when read (`StoreOfferReadiness`), once the
/// code exists and is active and either the settle time has passed since the store made it or the
/// first verified purchase of the offer has arrived.
public enum StoreOfferState: String, Codable, Sendable, CaseIterable {
    case creating, waitingForApple, waitingForGoogle, waitingForStripe, ready, failed

    /// The states a row holds (its CHECK constraint allows exactly these).
    public static let stored: [StoreOfferState] = [
        .creating, .waitingForApple, .waitingForGoogle, .waitingForStripe, .failed,
    ]

    /// The store has made the offer, and it settles before it is `ready`.
    public var isWaiting: Bool { self == .waitingForApple || self == .waitingForGoogle || self == .waitingForStripe }

    /// How far a stored state is along: a report never moves an offer back. `failed` comes
    /// before `waitingForApple`, so a provisioning that failed and was later retried to the end
    /// still lands; a late `failed` never undoes a code that exists.
    public var rank: Int {
        switch self {
        case .creating: 0
        case .failed: 1
        case .waitingForApple, .waitingForGoogle, .waitingForStripe: 2
        case .ready: 3
        }
    }
}

/// Whether an offer is `ready` (docs/stores.md): the one statement of the rule, pure, with the time
/// as an input.
public enum StoreOfferReadiness {
    public static func state(
        stored: StoreOfferState, codeCreatedAt: Date?, firstPurchaseAt: Date?, switchedOff: Bool,
        now: Date, settle: TimeInterval
    ) -> StoreOfferState {
        guard stored.isWaiting, !switchedOff, let created = codeCreatedAt else { return stored }
        if firstPurchaseAt != nil || created.addingTimeInterval(settle) <= now { return .ready }
        return stored
    }
}

/// One store offer of a coupon, as `GET /v1/coupons/{code}` shows it in `storeOffers`.
public struct StoreOfferView: Codable, Sendable, Equatable {
    public var store: Store
    public var productId: String
    /// Google Play only: the base plan the offer is on (one offer per base plan of the plan).
    public var basePlanId: String?
    public var state: StoreOfferState
    /// The store's id of the offer, once made.
    public var offerId: String?
    /// The store's message when `failed`.
    public var message: String?
    /// When coupons asked for the offer to be switched off (cap reached, deactivated, expired).
    public var switchedOffAt: Date?
    /// App Store only: the offer's custom code. Apple takes a code once per app, so each plan of
    /// a coupon has its own: the plan whose product id sorts first the coupon's code, the others
    /// the code with `-2`, `-3`, … (`AppStoreCodes`).
    public var customCode: String?

    public init(
        store: Store, productId: String, basePlanId: String? = nil, state: StoreOfferState, offerId: String?,
        message: String?,
        switchedOffAt: Date?, customCode: String? = nil
    ) {
        self.customCode = customCode
        self.store = store
        self.productId = productId
        self.basePlanId = basePlanId
        self.state = state
        self.offerId = offerId
        self.message = message
        self.switchedOffAt = switchedOffAt
    }
}

/// What a store offer gives, in the coupon's terms: `percentOff` or `amountOff` for a discount
/// (the store's `PAY_AS_YOU_GO`, `duration` the billing period, for `periodCount` periods), or a
/// free period with plans (`FREE_TRIAL`, one period of `duration`).
public struct StoreOfferTerms: Codable, Sendable, Equatable {
    public var kind: CouponKind
    public var percentOff: Int?
    public var amountOff: Money?
    public var duration: CouponDuration
    public var periodCount: Int

    public init(kind: CouponKind, percentOff: Int?, amountOff: Money?, duration: CouponDuration, periodCount: Int) {
        self.kind = kind
        self.percentOff = percentOff
        self.amountOff = amountOff
        self.duration = duration
        self.periodCount = periodCount
    }
}

/// Where an iOS client sends its user to use a code: Apple's offer-code page with the plan's code
/// filled in (validate answers the URLs, redeem the token too).
public struct AppStoreHandoff: Codable, Sendable, Equatable {
    /// `https://apps.apple.com/redeem?ctx=offercodes&id={appId}&code={code}`, with the custom code
    /// of the plan redeemed (validate: the first ready plan's).
    public var redemptionUrl: String
    /// The UUID the app passes to StoreKit wherever it takes one, so Apple's notification names
    /// the account (docs/stores.md).
    public var appAccountToken: UUID?
    /// Validate only: the page for each ready plan, by product id (each plan has its own code).
    public var redemptionUrls: [String: String]?

    public init(redemptionUrl: String, appAccountToken: UUID?, redemptionUrls: [String: String]? = nil) {
        self.redemptionUrl = redemptionUrl
        self.appAccountToken = appAccountToken
        self.redemptionUrls = redemptionUrls
    }

    /// The offer-code page of app `appId` with `code` filled in. Codes are `A-Z 0-9 - _`, which
    /// a URL query carries as they are.
    public static func redemptionURL(appId: String, code: String) -> String {
        "https://apps.apple.com/redeem?ctx=offercodes&id=\(appId)&code=\(code)"
    }
}

/// The App Store custom code of each plan of a coupon. Apple takes a custom code only once per
/// app, so one code can't stand for every plan: the plan whose product id sorts first keeps the
/// coupon's code exactly (a code typed straight into the App Store works for it), and each further
/// plan, in product id order, gets the code with `-2`, `-3`, … (`SPRING25`, `SPRING25-2`). Every one
/// of them counts toward the one coupon and its one cap.
public enum AppStoreCodes {
    public static func byProduct(code: String, productIds: [String]) -> [String: String] {
        Dictionary(
            uniqueKeysWithValues: productIds.sorted().enumerated().map { i, product in
                (product, i == 0 ? code : "\(code)-\(i + 1)")
            })
    }

    /// The longest code a coupon on `plans` App Store plans may have: Apple's custom codes are
    /// at most 64 characters, and further plans add a suffix.
    public static func longestCode(plans: Int) -> Int { plans <= 1 ? 64 : 64 - 1 - String(plans).count }
}

/// What an Android client is handed for a coupon with Google Play offers (docs/stores.md):
/// validate names the offer, so the app finds its token among the `ProductDetails` of the plan's
/// base plans; redeem adds the value the app passes to `BillingFlowParams.setObfuscatedAccountId`,
/// so Google's purchase names the account.
public struct PlayStoreHandoff: Codable, Sendable, Equatable {
    /// The offer's id, the same on every base plan of the coupon.
    public var offerId: String?
    public var offerTags: [String]?
    /// Derived from the account: 64 hex digits, no personal data (Google blocks purchases that
    /// carry any).
    public var obfuscatedAccountId: String?

    public init(offerId: String?, offerTags: [String]?, obfuscatedAccountId: String? = nil) {
        self.offerId = offerId
        self.offerTags = offerTags
        self.obfuscatedAccountId = obfuscatedAccountId
    }

    /// The tag every coupon offer carries at Google Play.
    public static let couponTag = "redeem-coupon"
}

/// Redeem's answer on the web for a coupon with a Stripe promotion code (docs/stripe.md): the
/// Stripe Checkout Session made for the reservation, in subscription mode with the plan's price
/// and the promotion code applied. The redeem page sends its user to `checkoutUrl`.
public struct StripeHandoff: Codable, Sendable, Equatable {
    public var checkoutUrl: String
    public init(checkoutUrl: String) { self.checkoutUrl = checkoutUrl }
}
