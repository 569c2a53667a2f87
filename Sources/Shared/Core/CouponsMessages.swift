import Foundation

// Requests the coupons service answers (gateway → coupons, grants → coupons).

/// Money on the wire: `{ "amount": "4.99", "currency": "EUR" }`.
public struct Money: Codable, Sendable, Equatable {
    public var amount: String
    public var currency: String
    public init(amount: String, currency: String) {
        self.amount = amount
        self.currency = currency
    }
}

public struct CouponDuration: Codable, Sendable, Equatable {
    public var unit: String
    public var count: Int
    public init(unit: String, count: Int) {
        self.unit = unit
        self.count = count
    }
}

public struct StoreLimit: Codable, Sendable, Equatable {
    public var store: String
    public var limit: String
    public var value: Int
    public init(store: String, limit: String, value: Int) {
        self.store = store
        self.limit = limit
        self.value = value
    }
}

/// The fields an operator sends to create a coupon; each is checked with a 422 naming it.
public struct CouponInput: Codable, Sendable {
    public var code: String?
    public var kind: String?
    public var percentOff: Int?
    public var amountOff: Money?
    public var duration: CouponDuration?
    public var periodCount: Int?
    public var entitlementId: String?
    public var productIds: [String]?
    public var platforms: [String]?
    public var startsAt: Date?
    public var expiresAt: Date?
    public var maxRedemptions: Int?
    public var newCustomersOnly: Bool?
    /// A free period Redeem grants may be redeemed inside an iOS app (default: on the web only).
    public var allowInApp: Bool?
    /// A coupon may be created deactivated (default: active).
    public var active: Bool?
    /// What operators call the coupon (up to 40 characters, as Stripe's coupons).
    public var name: String?
    /// The operator's own key-value pairs (`CouponMetadata`).
    public var metadata: [String: String]?
    public init() {}
}

/// Limits of a coupon's `name` and `metadata`, Stripe's: up to 50 keys, each key up to 40
/// characters without `[` or `]`, each value up to 500 characters, all strings.
public enum CouponMetadata {
    public static let maxNameLength = 40
    public static let maxKeys = 50
    public static let maxKeyLength = 40
    public static let maxValueLength = 500
}

/// A coupon as operators see it.
public struct CouponView: Codable, Sendable {
    public var code: String
    public var kind: CouponKind
    public var percentOff: Int?
    public var amountOff: Money?
    public var duration: CouponDuration
    public var periodCount: Int?
    public var entitlementId: String?
    public var productIds: [String]
    public var platforms: [Platform]
    public var startsAt: Date?
    public var expiresAt: Date?
    public var maxRedemptions: Int?
    public var newCustomersOnly: Bool
    /// Whether a free period Redeem grants may be redeemed inside an iOS app (else `webOnly` there).
    public var allowInApp: Bool
    public var active: Bool
    public var mode: Mode
    public var redeemedCount: Int
    public var reservedCount: Int
    public var remaining: Int?
    public var createdAt: Date
    public var storeLimits: [StoreLimit]
    /// The coupon's offers in the stores, one per (store, plan); nil (left out) when it has none.
    public var storeOffers: [StoreOfferView]?
    /// Completed store purchases that arrived after the cap was full (counted in
    /// `redeemedCount`, beyond `maxRedemptions`); nil (left out) when there are none.
    public var overCapCount: Int?
    /// What operators call the coupon; null when unnamed.
    public var name: String?
    /// The operator's own key-value pairs; `{}` when none (nil from a coupons service of an
    /// earlier version, written `{}`).
    public var metadata: [String: String]?

    public init(
        code: String, kind: CouponKind, percentOff: Int?, amountOff: Money?, duration: CouponDuration,
        periodCount: Int?,
        entitlementId: String?, productIds: [String], platforms: [Platform], startsAt: Date?, expiresAt: Date?,
        maxRedemptions: Int?, newCustomersOnly: Bool, active: Bool, mode: Mode, redeemedCount: Int, reservedCount: Int,
        remaining: Int?, createdAt: Date, storeLimits: [StoreLimit], storeOffers: [StoreOfferView]? = nil,
        overCapCount: Int? = nil,
        allowInApp: Bool = false, name: String? = nil, metadata: [String: String]? = [:]
    ) {
        self.name = name
        self.metadata = metadata
        self.code = code
        self.kind = kind
        self.percentOff = percentOff
        self.amountOff = amountOff
        self.duration = duration
        self.periodCount = periodCount
        self.entitlementId = entitlementId
        self.productIds = productIds
        self.platforms = platforms
        self.startsAt = startsAt
        self.expiresAt = expiresAt
        self.maxRedemptions = maxRedemptions
        self.newCustomersOnly = newCustomersOnly
        self.active = active
        self.mode = mode
        self.redeemedCount = redeemedCount
        self.reservedCount = reservedCount
        self.remaining = remaining
        self.createdAt = createdAt
        self.storeLimits = storeLimits
        self.storeOffers = storeOffers
        self.overCapCount = overCapCount
        self.allowInApp = allowInApp
    }

    /// Every field of the coupon table is present, null when unset (operators' tools read them all);
    /// `storeOffers` and `overCapCount` only when there are any.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(code, forKey: .code)
        try c.encode(name, forKey: .name)
        try c.encode(metadata ?? [:], forKey: .metadata)
        try c.encode(kind, forKey: .kind)
        try c.encode(percentOff, forKey: .percentOff)
        try c.encode(amountOff, forKey: .amountOff)
        try c.encode(duration, forKey: .duration)
        try c.encode(periodCount, forKey: .periodCount)
        try c.encode(entitlementId, forKey: .entitlementId)
        try c.encode(productIds, forKey: .productIds)
        try c.encode(platforms, forKey: .platforms)
        try c.encode(startsAt, forKey: .startsAt)
        try c.encode(expiresAt, forKey: .expiresAt)
        try c.encode(maxRedemptions, forKey: .maxRedemptions)
        try c.encode(newCustomersOnly, forKey: .newCustomersOnly)
        try c.encode(allowInApp, forKey: .allowInApp)
        try c.encode(active, forKey: .active)
        try c.encode(mode, forKey: .mode)
        try c.encode(redeemedCount, forKey: .redeemedCount)
        try c.encode(reservedCount, forKey: .reservedCount)
        try c.encode(remaining, forKey: .remaining)
        try c.encode(createdAt, forKey: .createdAt)
        try c.encode(storeLimits, forKey: .storeLimits)
        if let storeOffers, !storeOffers.isEmpty { try c.encode(storeOffers, forKey: .storeOffers) }
        if let overCapCount, overCapCount > 0 { try c.encode(overCapCount, forKey: .overCapCount) }
    }

    private enum CodingKeys: String, CodingKey {
        case code, kind, percentOff, amountOff, duration, periodCount, entitlementId, productIds, platforms, startsAt,
            expiresAt
        case maxRedemptions, newCustomersOnly, allowInApp, active, mode, redeemedCount, reservedCount, remaining,
            createdAt, storeLimits
        case storeOffers, overCapCount, name, metadata
    }

    /// What end users may see of it.
    public var publicView: PublicCoupon {
        PublicCoupon(
            code: code, kind: kind, percentOff: percentOff, amountOff: amountOff, duration: duration,
            periodCount: periodCount, entitlementId: entitlementId)
    }
}

/// `coupon` (public view) of validate's answer (docs/api.md).
public struct PublicCoupon: Codable, Sendable, Equatable {
    public var code: String
    public var kind: CouponKind
    public var percentOff: Int?
    public var amountOff: Money?
    public var duration: CouponDuration
    public var periodCount: Int?
    public var entitlementId: String?

    public init(
        code: String, kind: CouponKind, percentOff: Int?, amountOff: Money?, duration: CouponDuration,
        periodCount: Int?, entitlementId: String?
    ) {
        self.code = code
        self.kind = kind
        self.percentOff = percentOff
        self.amountOff = amountOff
        self.duration = duration
        self.periodCount = periodCount
        self.entitlementId = entitlementId
    }
}

/// A redemption, plus who made it (for operators, exports and webhooks).
public struct RedemptionView: Codable, Sendable, Equatable {
    public struct Entitlement: Codable, Sendable, Equatable {
        public var entitlementId: String
        public var expiresAt: Date
        public init(entitlementId: String, expiresAt: Date) {
            self.entitlementId = entitlementId
            self.expiresAt = expiresAt
        }
    }
    public var redemptionId: UUID
    public var code: String
    public var status: RedemptionStatus
    public var platform: Platform
    public var productId: String?
    public var pricePaid: Money?
    public var sandbox: Bool
    public var reservedAt: Date
    public var completedAt: Date?
    public var failureReason: String?
    public var entitlement: Entitlement?
    /// nil for a store purchase no account has claimed yet (an unattributed redemption: a code
    /// typed straight into the App Store, say); a later post of the purchase by the app fills it.
    public var accountId: UUID?
    public var appUserId: String?
    /// Redeem's answer on iOS for a coupon with App Store offers: where the app sends its user.
    public var appStore: AppStoreHandoff?
    /// Redeem's answer on Android for a coupon with Google Play offers: the offer and the account's
    /// obfuscated id for the billing flow.
    public var playStore: PlayStoreHandoff?
    /// The last four characters of the unique code it was redeemed with (`UniqueCode`); nil
    /// (left out) when it was redeemed with the coupon's own code.
    public var uniqueCodeLast4: String?
    /// Redeem's answer on the web for a coupon with a Stripe promotion code: the Checkout
    /// Session the redeem page sends its user to (docs/stripe.md).
    public var stripe: StripeHandoff?

    public init(
        redemptionId: UUID, code: String, status: RedemptionStatus, platform: Platform, productId: String?,
        pricePaid: Money?,
        sandbox: Bool, reservedAt: Date, completedAt: Date?, failureReason: String?, entitlement: Entitlement?,
        accountId: UUID?, appUserId: String?, appStore: AppStoreHandoff? = nil
    ) {
        self.redemptionId = redemptionId
        self.code = code
        self.status = status
        self.platform = platform
        self.productId = productId
        self.pricePaid = pricePaid
        self.sandbox = sandbox
        self.reservedAt = reservedAt
        self.completedAt = completedAt
        self.failureReason = failureReason
        self.entitlement = entitlement
        self.accountId = accountId
        self.appUserId = appUserId
        self.appStore = appStore
    }

    private enum CodingKeys: String, CodingKey {
        case redemptionId, code, status, platform, productId, pricePaid, sandbox, reservedAt, completedAt,
            failureReason, entitlement
        case accountId, appUserId, appStore, playStore, uniqueCodeLast4, stripe
    }

    /// The API's shape (docs/api.md): `productId` and `pricePaid` are always there (null when there is
    /// none, as for a free period); `completedAt`, `failureReason` and `entitlement` only once set;
    /// `accountId` and `appUserId` unless the redemption is an unattributed store purchase;
    /// `appStore` only in redeem's answer on iOS for a coupon with App Store offers;
    /// `uniqueCodeLast4` only when it was redeemed with a unique code.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(redemptionId, forKey: .redemptionId)
        try c.encode(code, forKey: .code)
        try c.encode(status, forKey: .status)
        try c.encode(platform, forKey: .platform)
        try c.encode(productId, forKey: .productId)
        try c.encode(pricePaid, forKey: .pricePaid)
        try c.encode(sandbox, forKey: .sandbox)
        try c.encode(reservedAt, forKey: .reservedAt)
        try c.encodeIfPresent(completedAt, forKey: .completedAt)
        try c.encodeIfPresent(failureReason, forKey: .failureReason)
        try c.encodeIfPresent(entitlement, forKey: .entitlement)
        try c.encodeIfPresent(accountId, forKey: .accountId)
        try c.encodeIfPresent(appUserId, forKey: .appUserId)
        try c.encodeIfPresent(appStore, forKey: .appStore)
        try c.encodeIfPresent(playStore, forKey: .playStore)
        try c.encodeIfPresent(uniqueCodeLast4, forKey: .uniqueCodeLast4)
        try c.encodeIfPresent(stripe, forKey: .stripe)
    }
}

public enum Coupons {
    /// The largest cap a coupon may have (`maxRedemptions`, on create and on change); the column is
    /// an `integer`, and no campaign comes near it.
    public static let largestCap = 100_000_000

    /// A code as coupons are matched by: without surrounding white space (a pasted code often
    /// carries a space or a line break; codes never contain any) and without case.
    public static func normalizeCode(_ code: String) -> String {
        guard code.first?.isWhitespace == true || code.last?.isWhitespace == true else { return code.uppercased() }
        return code.trimmingCharacters(in: .whitespacesAndNewlines).uppercased()
    }

    /// The mode whose coupon an end user's validation or redemption reaches when a code exists in
    /// both: the live coupon in production, the test coupon in sandbox; the other only when the
    /// preferred one does not exist. (End users have no mode; a test coupon's redemptions are
    /// always sandbox.)
    public static func preferredMode(sandbox: Bool) -> Mode { sandbox ? .test : .live }

    /// The key that validations and reservations are gathered into batches by: one batch reaches
    /// one coupon, so the code and the environment that picks between its modes.
    /// Requests that go together (validated or reserved in one batch): one code, environment and
    /// app. The default app's key names no app, so its requests pay nothing for apps.
    public static func batchKey(code: String, sandbox: Bool, app: UUID? = nil) -> String {
        let prefix = sandbox ? "s:" : "p:"
        guard let app, app != DefaultApp.id else { return prefix + normalizeCode(code) }
        return prefix + app.lowercasedString + ":" + normalizeCode(code)
    }

    public struct Create: BusRequest {
        public static let type = "coupons.create"
        /// Who asks, for the audit log (nil from a gateway of an earlier version).
        public var actor: AuditActor? = nil
        public typealias Response = CouponView
        public var input: CouponInput
        public var mode: Mode
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public var dryRun: Bool
        public init(input: CouponInput, mode: Mode, app: UUID, dryRun: Bool) {
            self.input = input
            self.mode = mode
            self.app = app
            self.dryRun = dryRun
        }
    }

    public struct List: BusRequest {
        public static let type = "coupons.list"
        public typealias Response = Page<CouponView>
        public var active: Bool?
        public var limit: Int
        public var cursor: String?
        /// Only this mode's coupons (`Mode.of`).
        public var mode: Mode?
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public init(active: Bool?, limit: Int, cursor: String?, mode: Mode, app: UUID) {
            self.active = active
            self.limit = limit
            self.cursor = cursor
            self.mode = mode
            self.app = app
        }
    }

    /// The coupon of a code in one mode (`Mode.of`); `notFound` when only the other mode has one.
    /// Completed redemptions of a mode over the last `days` days (UTC), for the dashboard's
    /// overview: per day and platform, per platform, and the coupons redeemed most.
    public struct Stats: BusRequest {
        public static let type = "coupons.stats"
        public typealias Response = RedemptionStats
        public var mode: Mode
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public var days: Int
        public init(mode: Mode, app: UUID, days: Int) {
            self.mode = mode
            self.app = app
            self.days = days
        }
    }

    public struct Get: BusRequest {
        public static let type = "coupons.get"
        public typealias Response = CouponView
        public var code: String
        public var mode: Mode?
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public init(code: String, mode: Mode, app: UUID) {
            self.code = code
            self.mode = mode
            self.app = app
        }
    }

    public struct Patch: BusRequest {
        public static let type = "coupons.patch"
        /// Who asks, for the audit log (nil from a gateway of an earlier version).
        public var actor: AuditActor? = nil
        public typealias Response = CouponView
        public var code: String
        public var active: Bool?
        public var maxRedemptions: Int?
        public var expiresAt: Date?
        /// Fields sent as `null`, to remove: `maxRedemptions` (no cap), `expiresAt` (no end), `name`
        /// and `metadata` (every key).
        public var removing: [String]?
        /// The coupon of this mode (`Mode.of`).
        public var mode: Mode?
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public var name: String?
        /// Merged into the coupon's metadata; a key with an empty value is removed.
        public var metadata: [String: String]?
        public init(
            code: String, mode: Mode, app: UUID, active: Bool?, maxRedemptions: Int?, expiresAt: Date?,
                removing: [String]? = nil,
            name: String? = nil, metadata: [String: String]? = nil
        ) {
            self.name = name
            self.metadata = metadata
            self.code = code
            self.mode = mode
            self.app = app
            self.active = active
            self.maxRedemptions = maxRedemptions
            self.expiresAt = expiresAt
            self.removing = removing
        }
    }

    public struct Redemptions: BusRequest {
        public static let type = "coupons.redemptions"
        public typealias Response = Page<RedemptionView>
        /// The largest page: more than the API's 100, for the CSV export, which reads every row.
        public static let maxLimit = 500
        public var code: String
        public var limit: Int
        public var cursor: String?
        /// Oldest first (exports) instead of newest first (pages).
        public var oldestFirst: Bool
        /// The coupon of this mode (`Mode.of`).
        public var mode: Mode?
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public init(code: String, mode: Mode, app: UUID, limit: Int, cursor: String?, oldestFirst: Bool = false) {
            self.code = code
            self.mode = mode
            self.app = app
            self.limit = limit
            self.cursor = cursor
            self.oldestFirst = oldestFirst
        }
    }

    public struct Validate: BusRequest {
        public static let type = "coupons.validate"
        /// The answer of `POST /v1/coupons/validate`.
        public struct Answer: Codable, Sendable {
            public var valid: Bool
            public var reason: RefusalReason?
            public var coupon: PublicCoupon?
            public var eligibleProductIds: [String]
            /// On iOS, for a coupon with App Store offers, once valid: what the offer gives, and
            /// where the app sends its user (`eligibleProductIds` are then the plans whose offer
            /// is ready).
            public var offer: StoreOfferTerms?
            public var appStore: AppStoreHandoff?
            /// On Android, for a coupon with Google Play offers, once valid: per eligible plan, the
            /// base plans whose offer is ready, and the offer to find in `ProductDetails`.
            public var basePlanIds: [String: [String]]?
            public var playStore: PlayStoreHandoff?
            /// With `webOnly`: the redeem page for the code (the gateway adds it, knowing its address).
            public var redeemUrl: String?
            public init(
                valid: Bool, reason: RefusalReason?, coupon: PublicCoupon?, eligibleProductIds: [String],
                offer: StoreOfferTerms? = nil, appStore: AppStoreHandoff? = nil, basePlanIds: [String: [String]]? = nil,
                playStore: PlayStoreHandoff? = nil
            ) {
                self.valid = valid
                self.reason = reason
                self.coupon = coupon
                self.eligibleProductIds = eligibleProductIds
                self.offer = offer
                self.appStore = appStore
                self.basePlanIds = basePlanIds
                self.playStore = playStore
            }
        }
        /// The answer as the gateway sends it, and its reason (which the gateway's abuse limits read).
        ///
        /// On the bus: `{reason, answer: <frame>}` to a caller that reads frames; to any other
        /// caller the answer's own fields, the shape earlier versions send and read (and are read
        /// in).
        public struct Response: Codable, Sendable {
            public var reason: RefusalReason?
            public var answer: WireJSON<Answer>
            /// The answer holds only if the account does not already hold a plan on Google Play:
            /// the request goes through Play and did not say (`playOwned` nil). The gateway asks the
            /// store's view and sends the request again with it. Never part of the public answer.
            public var asksPlayOwnership = false
            public init(_ answer: Answer, asksPlayOwnership: Bool = false) throws {
                self.reason = answer.reason
                self.answer = try WireJSON(answer)
                self.asksPlayOwnership = asksPlayOwnership
            }

            private enum Keys: String, CodingKey { case reason, answer, asksPlayOwnership }

            public init(from decoder: any Decoder) throws {
                let c = try decoder.container(keyedBy: Keys.self)
                guard c.contains(.answer) else {
                    let inline = try Answer(from: decoder)
                    self = try Response(inline)
                    return
                }
                reason = try c.decodeIfPresent(RefusalReason.self, forKey: .reason)
                answer = try c.decode(WireJSON<Answer>.self, forKey: .answer)
                asksPlayOwnership = try c.decodeIfPresent(Bool.self, forKey: .asksPlayOwnership) ?? false
            }

            public func encode(to encoder: any Encoder) throws {
                guard BusFrames.carried(by: encoder) else { return try answer.decoded().encode(to: encoder) }
                var c = encoder.container(keyedBy: Keys.self)
                try c.encodeIfPresent(reason, forKey: .reason)
                try c.encode(answer, forKey: .answer)
                if asksPlayOwnership { try c.encode(true, forKey: .asksPlayOwnership) }
            }
        }
        public var accountId: UUID
        public var code: String
        public var platform: Platform?
        /// `environment: "sandbox"`: picks the test coupon of a code both modes have
        /// (`preferredMode`). nil (earlier gateways): production.
        public var sandbox: Bool?
        /// The Google Play subscription products the account holds, as the store's view reports
        /// them (`Grants.StoreView`; `[]` when it holds none or the view could not be read in
        /// time). nil: not asked; a request through Play is then answered `asksPlayOwnership`.
        public var playOwned: [String]?
        /// The plan the client means to buy, when it knows: refused as redeem would refuse it
        /// (not covered, its offer not ready), and on iOS handed that plan's offer-code page.
        public var productId: String?
        /// The app whose coupons the code is looked up in (`Redeem-App`; `DefaultApp.of`: nil from
        /// a gateway of an earlier version).
        public var app: UUID?
        public init(
            accountId: UUID, code: String, platform: Platform?, sandbox: Bool = false, playOwned: [String]? = nil,
            productId: String? = nil, app: UUID? = nil
        ) {
            self.app = app
            self.accountId = accountId
            self.code = code
            self.platform = platform
            self.sandbox = sandbox
            self.playOwned = playOwned
            self.productId = productId
        }
    }

    /// Validations that reached a gateway together, in one message (`BusClient.requestBatch`).
    public struct ValidateMany: BusBatch {
        public static let type = "coupons.validateMany"
        public struct Response: Codable, Sendable {
            public var answers: [Validate.Response]
            public init(answers: [Validate.Response]) { self.answers = answers }
        }
        public var items: [Validate]
        public init(items: [Validate]) { self.items = items }
        public static func answers(in response: Response) -> [Result<Validate.Response, any Error>] {
            response.answers.map { .success($0) }
        }
    }

    public struct Redeem: BusRequest {
        public static let type = "coupons.redeem"
        /// Either the redemption (`created` tells 201 from 200) or the refusal reason.
        public struct Response: Codable, Sendable {
            /// The redemption as the gateway sends it.
            public var redemption: WireJSON<RedemptionView>?
            public var created: Bool
            public var refusal: RefusalReason?
            /// Nothing was reserved: the request goes through Google Play and did not say which
            /// Play subscriptions the account holds (`playOwned` nil). The gateway asks the
            /// store's view and sends it again.
            public var asksPlayOwnership: Bool?
            public init(
                redemption: RedemptionView?, created: Bool, refusal: RefusalReason? = nil,
                asksPlayOwnership: Bool = false
            ) throws {
                self.redemption = try redemption.map { try WireJSON($0) }
                self.created = created
                self.refusal = refusal
                self.asksPlayOwnership = asksPlayOwnership ? true : nil
            }
        }
        public var accountId: UUID
        public var appUserId: String
        public var code: String
        public var productId: String?
        public var platform: Platform
        public var sandbox: Bool
        /// The Google Play subscription products the account holds (see `Validate.playOwned`).
        public var playOwned: [String]?
        /// The span of the request that asked (W3C `traceparent`): requests share a batch message,
        /// and the grant command of each carries its own request's trace.
        public var traceparent: String?
        /// The app whose coupons the code is looked up in (see `Validate.app`).
        public var app: UUID?
        public init(
            accountId: UUID, appUserId: String, code: String, productId: String?, platform: Platform, sandbox: Bool,
            playOwned: [String]? = nil, traceparent: String? = LogContext.trace?.traceparent, app: UUID? = nil
        ) {
            self.app = app
            self.traceparent = traceparent
            self.accountId = accountId
            self.appUserId = appUserId
            self.code = code
            self.productId = productId
            self.platform = platform
            self.sandbox = sandbox
            self.playOwned = playOwned
        }
    }

    /// Reservations that reached a gateway together, in one message (`BusClient.requestBatch`).
    /// Each item fails on its own (a bad product, say), so each answer is a value or an error.
    public struct RedeemMany: BusBatch {
        public static let type = "coupons.redeemMany"
        public struct Response: Codable, Sendable {
            public var answers: [BatchAnswer<Redeem.Response>]
            public init(answers: [BatchAnswer<Redeem.Response>]) { self.answers = answers }
        }
        public var items: [Redeem]
        public init(items: [Redeem]) { self.items = items }
        public static func answers(in response: Response) -> [Result<Redeem.Response, any Error>] {
            response.answers.map(\.result)
        }
    }

    /// One redemption; `accountId` nil for operators, whose key's `mode` (`Mode.of`) must be its
    /// coupon's, else the account must own it (`notFound` otherwise).
    public struct GetRedemption: BusRequest {
        public static let type = "coupons.getRedemption"
        public typealias Response = RedemptionView
        public var id: UUID
        public var accountId: UUID?
        public var mode: Mode?
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        /// An end user's read: `accountId` must own it.
        public init(id: UUID, accountId: UUID) {
            self.id = id
            self.accountId = accountId
        }
        /// An operator's read, with a key of `mode`.
        public init(id: UUID, mode: Mode, app: UUID) {
            self.id = id
            self.mode = mode
            self.app = app
        }
    }

    /// An account's redemptions, newest first, a page at a time (`Keyset`).
    public struct MyRedemptions: BusRequest {
        public static let type = "coupons.myRedemptions"
        public typealias Response = Page<RedemptionView>
        public var accountId: UUID
        /// nil (a caller from before pages): the default page size.
        public var limit: Int?
        public var cursor: String?
        /// Only those of this mode's coupons (an operator's look at a customer); nil: those of
        /// either mode, as the account's owner sees them.
        public var mode: Mode?
        /// Only those of this app's coupons: the key's, or the app the owner's request names
        /// (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public init(accountId: UUID, limit: Int, cursor: String?, mode: Mode? = nil, app: UUID? = nil) {
            self.accountId = accountId
            self.limit = limit
            self.cursor = cursor
            self.mode = mode
            self.app = app
        }
    }

    /// An operator confirms a purchase; `notFound` unless the redemption's coupon is of `mode` (`Mode.of`).
    public struct Purchase: BusRequest {
        public static let type = "coupons.purchase"
        /// Who asks, for the audit log (nil from a gateway of an earlier version).
        public var actor: AuditActor? = nil
        public typealias Response = RedemptionView
        public var id: UUID
        public var pricePaid: Money
        public var storeTransactionId: String
        public var mode: Mode?
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public init(id: UUID, mode: Mode, app: UUID, pricePaid: Money, storeTransactionId: String) {
            self.id = id
            self.mode = mode
            self.app = app
            self.pricePaid = pricePaid
            self.storeTransactionId = storeTransactionId
        }
    }

    /// The owner's app gives a reservation back (gateway → coupons): the store said the account
    /// already owns the plan (Google Play's `ITEM_ALREADY_OWNED`), so nothing was bought. The
    /// redemption ends `released` and its use goes back. Only a `reserved` redemption of the
    /// account can be given back (404 for another's, 409 `invalidState` once it ended).
    public struct GiveBack: BusRequest {
        public static let type = "coupons.giveBack"
        public typealias Response = RedemptionView
        /// Why the app gives the use back: a closed set.
        public enum Reason: String, Codable, Sendable, CaseIterable, WireEnum {
            /// The store account already owns the plan: nothing was charged, the coupon is not used.
            case alreadyOwned
        }
        public var id: UUID
        public var accountId: UUID
        public var reason: Reason
        public init(id: UUID, accountId: UUID, reason: Reason) {
            self.id = id
            self.accountId = accountId
            self.reason = reason
        }
    }

    /// A grant failed: the redemption fails and its use is given back (grants → coupons).
    public struct Release: BusRequest {
        public static let type = "coupons.release"
        public typealias Response = Empty
        public var redemptionId: UUID
        public var reason: String
        public init(redemptionId: UUID, reason: String) {
            self.redemptionId = redemptionId
            self.reason = reason
        }
    }

}

extension Coupons {
    /// Many grants succeeded: their redemptions complete (grants → coupons, one request per batch).
    public struct CompleteMany: BusRequest {
        public static let type = "coupons.completeMany"
        /// When coupons recorded each completion (a repeat answers the first time), so the
        /// `coupon.redeemed` webhook carries the `completedAt` the API shows. Optional: a coupons of
        /// an earlier version answers `{}`.
        public struct Response: Codable, Sendable {
            public var completedAt: [String: Date]?
            public init(completedAt: [String: Date]?) { self.completedAt = completedAt }
        }
        public struct Item: Codable, Sendable {
            public var redemptionId: UUID
            public var entitlement: RedemptionView.Entitlement
            public init(redemptionId: UUID, entitlement: RedemptionView.Entitlement) {
                self.redemptionId = redemptionId
                self.entitlement = entitlement
            }
        }
        public var items: [Item]
        public init(items: [Item]) { self.items = items }
    }
}

/// Completed redemptions over a window, counted three ways. Sandbox redemptions (of a live
/// coupon, or any test one) are counted in `sandbox` only, so live figures are sales.
public struct RedemptionStats: Codable, Sendable, Equatable {
    public struct Day: Codable, Sendable, Equatable {
        /// `YYYY-MM-DD`, UTC.
        public var date: String
        public var ios: Int
        public var android: Int
        public var web: Int
        public init(date: String, ios: Int = 0, android: Int = 0, web: Int = 0) {
            self.date = date
            self.ios = ios
            self.android = android
            self.web = web
        }
    }
    public struct CouponCount: Codable, Sendable, Equatable {
        public var code: String
        public var redemptions: Int
        public init(code: String, redemptions: Int) {
            self.code = code
            self.redemptions = redemptions
        }
    }
    /// Every day of the window, oldest first, with zeros where nothing was redeemed.
    public var days: [Day]
    /// The window's totals per platform.
    public var platforms: Day
    /// The ten coupons redeemed most in the window, most first.
    public var coupons: [CouponCount]
    /// Sandbox redemptions in the window, counted apart.
    public var sandbox: Int
    public init(days: [Day], platforms: Day, coupons: [CouponCount], sandbox: Int) {
        self.days = days
        self.platforms = platforms
        self.coupons = coupons
        self.sandbox = sandbox
    }
}
