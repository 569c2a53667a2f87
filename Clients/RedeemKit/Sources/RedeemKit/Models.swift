import Foundation

// The models an app sees, decoded from the same JSON the gateway answers (docs/api.md).
// Closed sets the server may grow (statuses, reasons, kinds) decode a value this version does not
// know as `unknown`, so a newer server never breaks an older app.

/// Where an end user redeems a code.
public enum Platform: String, Codable, Sendable, CaseIterable {
    /// The App Store: iPhone, iPad, Mac (and visionOS). One platform, as universal purchase makes
    /// one app of them.
    case ios
    /// Android phones and tablets.
    case android
    /// A browser.
    case web
}

/// What a coupon gives.
public enum CouponKind: String, Codable, Sendable, CaseIterable {
    /// An entitlement for a duration, granted by Redeem.
    case freePeriod
    /// A percentage off a store plan, charged by the store.
    case percentOff
    /// An amount off a store plan, charged by the store.
    case amountOff
    /// A kind this version of RedeemKit does not know.
    case unknown

    /// Reads an unknown kind as `.unknown`.
    public init(from decoder: any Decoder) throws {
        self = CouponKind(rawValue: try decoder.singleValueContainer().decode(String.self)) ?? .unknown
    }
}

/// Where a redemption is in its life: `reserved` → `granting` → `completed` | `failed`, and
/// `released` (a discount whose purchase did not come in time).
public enum RedemptionStatus: String, Codable, Sendable, CaseIterable {
    /// A discount's use, waiting for its store purchase.
    case reserved
    /// A free period's use, its grant on the way.
    case granting
    /// Granted (a free period) or paid for (a discount).
    case completed
    /// The grant failed for good; the use was given back.
    case failed
    /// The store purchase did not come in time; the use was given back.
    case released
    /// A status this version of RedeemKit does not know.
    case unknown

    /// Reads an unknown status as `.unknown`.
    public init(from decoder: any Decoder) throws {
        self = RedemptionStatus(rawValue: try decoder.singleValueContainer().decode(String.self)) ?? .unknown
    }

    /// Whether the redemption will change no more (where a long poll stops).
    public var isSettled: Bool {
        switch self {
        case .reserved, .granting, .unknown: false
        case .completed, .failed, .released: true
        }
    }
}

/// A length of time in calendar units: `{unit: day|week|month|year, count}`.
public struct CouponDuration: Codable, Sendable, Equatable, Hashable {
    /// `day`, `week`, `month` or `year`.
    public var unit: String
    /// How many units.
    public var count: Int

    /// Makes a duration.
    public init(unit: String, count: Int) {
        self.unit = unit
        self.count = count
    }
}

/// One way an account signs in.
public struct Identity: Codable, Sendable, Equatable {
    /// `email`, `apple` or `cloudkit`.
    public var type: String
    /// The email address, for `email` (and `apple` when Apple shared one).
    public var email: String?
    /// The CloudKit user record name, for `cloudkit`.
    public var recordName: String?

    /// Makes an identity.
    public init(type: String, email: String? = nil, recordName: String? = nil) {
        self.type = type
        self.email = email
        self.recordName = recordName
    }
}

/// The signed-in account (`GET /v1/me`).
public struct Account: Codable, Sendable, Equatable {
    /// The account's id.
    public var id: UUID
    /// The account's email, if it has one.
    public var email: String?
    /// The id the entitlement provider (RevenueCat, or Redeem's ledger) knows the user by: log in
    /// to RevenueCat with it.
    public var appUserId: String
    /// The ways the account signs in.
    public var identities: [Identity]
    /// When the account was made.
    public var createdAt: Date
    /// Whether the email was proven (a verification or reset code, or Apple); nil from a server
    /// older than email verification.
    public var emailVerified: Bool?
    /// Where the user manages (and cancels) their store subscription: the entitlement provider's
    /// management URL (RevenueCat's `management_url`, the App Store's or Google Play's page).
    /// Only `me()` reads it (`GET /v1/me`); nil without a store subscription, under Redeem's own
    /// ledger, or when the provider was slow. Show it as "Manage subscription".
    public var managementUrl: URL?

    /// Makes an account.
    public init(
        id: UUID, email: String?, appUserId: String, identities: [Identity], createdAt: Date,
        emailVerified: Bool? = nil, managementUrl: URL? = nil
    ) {
        self.id = id
        self.email = email
        self.appUserId = appUserId
        self.identities = identities
        self.createdAt = createdAt
        self.emailVerified = emailVerified
        self.managementUrl = managementUrl
    }
}

/// A session's tokens. `expiresAt` is the access token's expiry.
public struct SessionTokens: Codable, Sendable, Equatable {
    /// The short-lived access token sent as `Authorization: Bearer`.
    public var accessToken: String
    /// The one-use token that rotates the session.
    public var refreshToken: String
    /// When the access token expires.
    public var expiresAt: Date

    /// Makes a session.
    public init(accessToken: String, refreshToken: String, expiresAt: Date) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.expiresAt = expiresAt
    }
}

/// The answer to sign-up, sign-in and refresh: `{account, session}`.
public struct AuthResult: Codable, Sendable, Equatable {
    /// The account signed in to.
    public var account: Account
    /// Its new session.
    public var session: SessionTokens
}

/// The answer to linking a CloudKit record name: the id the app logs in to RevenueCat with.
public struct CloudKitLink: Codable, Sendable, Equatable {
    /// The account's `appUserId` after the link (the record name when it took it over).
    public var appUserId: String
}

/// A coupon as end users see it (validate's `coupon`).
public struct PublicCoupon: Codable, Sendable, Equatable {
    /// The code, upper-case.
    public var code: String
    /// What it gives.
    public var kind: CouponKind
    /// The percentage off, for `percentOff`.
    public var percentOff: Int?
    /// The amount off, for `amountOff`.
    public var amountOff: Money?
    /// A free period's length, or a discount's billing period.
    public var duration: CouponDuration
    /// How many periods a discount lasts.
    public var periodCount: Int?
    /// The entitlement a free period grants.
    public var entitlementId: String?
}

/// The terms of a discount's store offer (validate's `offer`).
public struct OfferTerms: Codable, Sendable, Equatable {
    /// `percentOff` or `amountOff`.
    public var kind: CouponKind
    /// The percentage off.
    public var percentOff: Int?
    /// The amount off.
    public var amountOff: Money?
    /// The billing period.
    public var duration: CouponDuration
    /// How many periods the discount lasts.
    public var periodCount: Int
}

/// What an iOS app hands to the App Store for a discount: the offer-code page and, once redeemed,
/// the token StoreKit should carry so Apple's signed purchase names the account.
public struct AppStoreHandoff: Codable, Sendable, Equatable {
    /// Apple's offer-code page with the code filled in: on redeem, the code of the plan redeemed.
    public var redemptionUrl: URL
    /// Per plan (product id), its offer-code page: Apple takes a custom code once per app, so each
    /// plan of a coupon past the first has a code of its own. Validate answers it for the ready
    /// plans; nil from a server that does not.
    public var redemptionUrls: [String: URL]?
    /// The UUID to pass to StoreKit as `appAccountToken` (redeem answers it; validate does not).
    public var appAccountToken: UUID?

    /// Makes a hand-off.
    public init(redemptionUrl: URL, redemptionUrls: [String: URL]? = nil, appAccountToken: UUID? = nil) {
        self.redemptionUrl = redemptionUrl
        self.redemptionUrls = redemptionUrls
        self.appAccountToken = appAccountToken
    }

    /// The offer-code page for `productId`: its own when the server named one, else `redemptionUrl`.
    public func redemptionUrl(for productId: String?) -> URL {
        productId.flatMap { redemptionUrls?[$0] } ?? redemptionUrl
    }
}

/// What an Android app hands to Google Play for a discount (docs/stores.md, "Google Play").
public struct PlayStoreHandoff: Codable, Sendable, Equatable {
    /// The value to pass to `BillingFlowParams.Builder.setObfuscatedAccountId` (redeem answers it).
    public var obfuscatedAccountId: String?
    /// The offer's id on its base plan (validate answers it).
    public var offerId: String?
    /// The offer's tags, to find its token in `ProductDetails` (validate answers them).
    public var offerTags: [String]?
}

/// The answer of `validateCoupon(_:)`. A refused code is `valid == false` with a `reason`.
public struct CouponValidation: Codable, Sendable, Equatable {
    /// Whether the code can be redeemed now by this account.
    public var valid: Bool
    /// Why not, when `valid` is false.
    public var reason: CouponError.Reason?
    /// What the code gives, when it exists.
    public var coupon: PublicCoupon?
    /// The plans it covers (empty: any product).
    public var eligibleProductIds: [String]
    /// A discount's store offer terms, once its offer is ready.
    public var offer: OfferTerms?
    /// On iOS, the App Store offer-code page for a discount.
    public var appStore: AppStoreHandoff?
    /// On Android, the Google Play offer for a discount.
    public var playStore: PlayStoreHandoff?
    /// On Android, per eligible plan (product id), the base plans whose offer is ready: launch the
    /// billing flow on one of these.
    public var basePlanIds: [String: [String]]?
    /// For `webOnly`: the redeem page with the code filled in, to open in a browser.
    public var redeemUrl: URL?

    /// The refusal as an error value (nil when valid), with its sentence for people.
    public var error: CouponError? { reason.map { CouponError($0, redeemUrl: redeemUrl) } }

    /// Makes an answer (RedeemKit makes the guest's `.notIdentified` answer itself).
    public init(
        valid: Bool, reason: CouponError.Reason?, coupon: PublicCoupon? = nil, eligibleProductIds: [String] = [],
        offer: OfferTerms? = nil, appStore: AppStoreHandoff? = nil, playStore: PlayStoreHandoff? = nil,
        basePlanIds: [String: [String]]? = nil, redeemUrl: URL? = nil
    ) {
        self.valid = valid
        self.reason = reason
        self.coupon = coupon
        self.eligibleProductIds = eligibleProductIds
        self.offer = offer
        self.appStore = appStore
        self.playStore = playStore
        self.basePlanIds = basePlanIds
        self.redeemUrl = redeemUrl
    }

    /// The base plans of `productId` whose Play offer is ready (empty when none, or not Android).
    public func basePlanIds(for productId: String) -> [String] { basePlanIds?[productId] ?? [] }

    private enum CodingKeys: String, CodingKey {
        case valid, reason, coupon, eligibleProductIds, offer, appStore, playStore, basePlanIds, redeemUrl
    }

    /// Decodes the API's JSON; a missing `eligibleProductIds` reads as empty.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        valid = try c.decode(Bool.self, forKey: .valid)
        reason = try c.decodeIfPresent(CouponError.Reason.self, forKey: .reason)
        coupon = try c.decodeIfPresent(PublicCoupon.self, forKey: .coupon)
        eligibleProductIds = try c.decodeIfPresent([String].self, forKey: .eligibleProductIds) ?? []
        offer = try c.decodeIfPresent(OfferTerms.self, forKey: .offer)
        appStore = try c.decodeIfPresent(AppStoreHandoff.self, forKey: .appStore)
        playStore = try c.decodeIfPresent(PlayStoreHandoff.self, forKey: .playStore)
        basePlanIds = try c.decodeIfPresent([String: [String]].self, forKey: .basePlanIds)
        redeemUrl = try c.decodeIfPresent(URL.self, forKey: .redeemUrl)
    }
}

/// A redemption: one use of a coupon by one account.
public struct Redemption: Codable, Sendable, Equatable, Identifiable {
    /// What a completed free period granted.
    public struct Grant: Codable, Sendable, Equatable {
        /// The entitlement granted.
        public var entitlementId: String
        /// When it ends.
        public var expiresAt: Date
    }

    /// The redemption's id.
    public var redemptionId: UUID
    /// The coupon's code.
    public var code: String
    /// Where it is in its life.
    public var status: RedemptionStatus
    /// Where it was redeemed.
    public var platform: Platform
    /// The plan it is for, if any.
    public var productId: String?
    /// What the store charged, for a completed discount.
    public var pricePaid: Money?
    /// A sandbox (test) redemption.
    public var sandbox: Bool
    /// When the use was reserved.
    public var reservedAt: Date
    /// When it completed.
    public var completedAt: Date?
    /// Why it failed.
    public var failureReason: String?
    /// What it granted, once completed.
    public var entitlement: Grant?
    /// The account (operator views; a store purchase no account claimed yet has none).
    public var accountId: UUID?
    /// The account's appUserId (operator views).
    public var appUserId: String?
    /// On iOS, for a discount: what to hand to the App Store.
    public var appStore: AppStoreHandoff?
    /// On Android, for a discount: what to hand to Google Play.
    public var playStore: PlayStoreHandoff?
    /// The last four characters of the unique code it was redeemed with, if it was.
    public var uniqueCodeLast4: String?

    /// The redemption's id (`Identifiable`).
    public var id: UUID { redemptionId }
}

/// An active entitlement (`GET /v1/me/entitlements`): the latest expiry over the grants of one
/// entitlement in one environment.
public struct Entitlement: Codable, Sendable, Equatable, Hashable {
    /// The entitlement, such as `pro`.
    public var entitlementId: String
    /// When it ends.
    public var expiresAt: Date
    /// Granted by a sandbox redemption.
    public var sandbox: Bool
    /// Where it comes from (`redeem`, or the provider's name).
    public var source: String

    /// Makes an entitlement.
    public init(entitlementId: String, expiresAt: Date, sandbox: Bool, source: String) {
        self.entitlementId = entitlementId
        self.expiresAt = expiresAt
        self.sandbox = sandbox
        self.source = source
    }

    /// Whether it is still in force at `date`.
    public func isActive(at date: Date = Date()) -> Bool { expiresAt > date }
}

/// One page of a list: `{data, nextCursor}`. Send `nextCursor` back as `cursor` for the next.
public struct Page<Item: Codable & Sendable>: Codable, Sendable {
    /// This page's items, newest first.
    public var data: [Item]
    /// The cursor of the next page; nil on the last.
    public var nextCursor: String?
}

/// `{data: [...]}` without paging (entitlements).
struct DataList<Item: Codable & Sendable>: Codable, Sendable {
    var data: [Item]
}
