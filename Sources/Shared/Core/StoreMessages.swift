import Foundation

// Store offers and store purchases on the bus (docs/stores.md, "Flow"): coupons' commands to
// grants through the outbox, grants' reports back, and verified purchases from the gateway.

/// A store transaction whose signature the gateway has verified (`AppleSignedData`): the fields
/// coupons needs to complete a redemption. Nothing unverified is sent as one.
public struct VerifiedStoreTransaction: Codable, Sendable, Equatable {
    public var store: Store
    public var transactionId: String
    /// Stays the same across renewals and restores: one purchase chain, one redemption.
    public var originalTransactionId: String
    /// The store's product identifier.
    public var productId: String
    /// Apple's `offerType`: 3 is an offer code.
    public var offerType: Int?
    /// For an offer code, the offer's reference name: the `offerName` coupons gave it.
    public var offerIdentifier: String?
    public var appAccountToken: UUID?
    /// What the customer paid, in milliunits of `currency` (9990 is 9.99).
    public var priceMilliunits: Int64?
    public var currency: String?
    /// From the store's `environment` (Sandbox, Xcode and LocalTesting are sandbox), never from a client.
    public var sandbox: Bool
    public var purchaseDate: Date
    /// Google Play: the base plan the offer was bought on.
    public var basePlanId: String?
    /// Google Play: `externalAccountIdentifiers.obfuscatedExternalAccountId`, the value the app set
    /// from redeem's answer (`StoreIds.obfuscatedAccountId` of the account).
    public var obfuscatedAccountId: String?
    /// Google Play: the purchase this one replaces (a re-subscription, an upgrade): the same
    /// purchase chain when that one is recorded.
    public var linkedPurchaseToken: String?

    public init(store: Store, transactionId: String, originalTransactionId: String, productId: String, offerType: Int?,
                offerIdentifier: String?, appAccountToken: UUID?, priceMilliunits: Int64?, currency: String?, sandbox: Bool,
                purchaseDate: Date, basePlanId: String? = nil, obfuscatedAccountId: String? = nil, linkedPurchaseToken: String? = nil) {
        self.basePlanId = basePlanId
        self.obfuscatedAccountId = obfuscatedAccountId
        self.linkedPurchaseToken = linkedPurchaseToken
        self.store = store
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.offerType = offerType
        self.offerIdentifier = offerIdentifier
        self.appAccountToken = appAccountToken
        self.priceMilliunits = priceMilliunits
        self.currency = currency
        self.sandbox = sandbox
        self.purchaseDate = purchaseDate
    }

    /// Apple's `offerType` of an offer code.
    public static let offerCode = 3
}

extension Coupons {
    /// A verified store purchase completes a redemption (gateway → coupons; docs/stores.md flow
    /// step 4), from Apple's notification or from the app's post of the transaction StoreKit gave
    /// it. One transaction: the notification is recorded (a repeat stops there), the purchase
    /// chain gets its one row, the offer is matched by name, the account by `appAccountToken`
    /// (or the posting account), and the matching reservation completes, else a completed
    /// redemption is made (unattributed without an account; over the cap when it is full).
    /// `coupon.redeemed` goes out once per chain. A later post of an unattributed chain attaches
    /// the account to it.
    public struct StorePurchase: BusRequest {
        public static let type = "coupons.storePurchase"
        public struct Response: Codable, Sendable {
            public var redemption: RedemptionView
            /// Whether this request recorded the purchase chain (false: a repeat, a renewal, or
            /// the app's post of a chain a notification recorded first).
            public var created: Bool
            public init(redemption: RedemptionView, created: Bool) {
                self.redemption = redemption
                self.created = created
            }
        }
        public var transaction: VerifiedStoreTransaction
        /// Apple's `notificationUUID`, when the purchase came in a notification.
        public var notificationUUID: String?
        /// When the app posted it: the redemption it posted to, and its signed-in account.
        public var redemptionId: UUID?
        public var accountId: UUID?
        public var appUserId: String?
        /// True for test mode's simulated store (`Coupons.SimulatedPurchase`), which completes test
        /// redemptions only; nil or false for what a store signed, which completes live ones only.
        public var simulated: Bool?
        /// A Google Play purchase: the app whose Google Play settings read it from Google (nil: the
        /// default app, the environment's). It completes only that app's coupons (docs/apps.md).
        public var storeApp: UUID?

        public init(transaction: VerifiedStoreTransaction, notificationUUID: String? = nil, redemptionId: UUID? = nil,
                    accountId: UUID? = nil, appUserId: String? = nil, simulated: Bool? = nil,
                    storeApp: UUID? = nil) {
            self.storeApp = storeApp
            self.transaction = transaction
            self.notificationUUID = notificationUUID
            self.redemptionId = redemptionId
            self.accountId = accountId
            self.appUserId = appUserId
            self.simulated = simulated
        }
    }

    /// A test helper (gateway → coupons, test keys only): a test reservation completes as if the
    /// store had sold its offer, through the same path as a verified purchase
    /// (`coupons.storePurchase`), so it makes the same records, webhook and CSV row, sandbox as
    /// every test redemption. 404 for a redemption of another mode, 409 `invalidState` for one that
    /// is not a reservation on iOS or Android, or whose simulated offer is not `ready`.
    public struct SimulatedPurchase: BusRequest {
        public static let type = "coupons.simulatedPurchase"
        public typealias Response = RedemptionView
        /// Who asks, for the audit log.
        public var actor: AuditActor? = nil
        public var redemptionId: UUID
        public var mode: Mode
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public var pricePaid: Money
        /// The simulated store's environment: true as if bought in Apple's or Google's sandbox.
        public var sandbox: Bool?

        public init(redemptionId: UUID, mode: Mode, app: UUID, pricePaid: Money, sandbox: Bool? = nil) {
            self.redemptionId = redemptionId
            self.mode = mode
            self.app = app
            self.pricePaid = pricePaid
            self.sandbox = sandbox
        }
    }

    /// A test helper (gateway → coupons, test keys only): a simulated store offer, named by its
    /// simulated `offerId`, skips the rest of its settle time and is `ready` at once. 404 for an
    /// offer that is not a test coupon's; 409 `invalidState` for one not waiting for its store.
    public struct SimulatedOfferReady: BusRequest {
        public static let type = "coupons.simulatedOfferReady"
        public typealias Response = StoreOfferView
        public var actor: AuditActor? = nil
        public var offerId: String
        public var mode: Mode
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?

        public init(offerId: String, mode: Mode, app: UUID) {
            self.offerId = offerId
            self.mode = mode
            self.app = app
        }
    }

    /// Grants reports how provisioning an offer went (grants → coupons): `waitingForApple` once the
    /// offer and its code exist, or `failed` with the store's message. Idempotent, and an offer
    /// never moves back (`StoreOfferState.rank`).
    public struct StoreOfferReport: BusRequest {
        public static let type = "coupons.storeOfferReport"
        public typealias Response = StoreOfferView
        public var couponId: UUID
        public var store: Store
        public var productId: String
        /// Google Play: the base plan of the offer.
        public var basePlanId: String?
        /// The store's waiting state (`waitingForApple`, `waitingForGoogle`) or `failed`.
        public var state: StoreOfferState
        public var offerId: String?
        public var customCodeId: String?
        /// When the store made the code, or activated the offer (the settle time counts from here).
        public var codeCreatedAt: Date?
        /// The store's message when `failed`; for an offer made, what it leaves out (regions).
        public var message: String?

        public init(couponId: UUID, store: Store, productId: String, basePlanId: String? = nil, state: StoreOfferState, offerId: String? = nil,
                    customCodeId: String? = nil, codeCreatedAt: Date? = nil, message: String? = nil) {
            self.couponId = couponId
            self.store = store
            self.productId = productId
            self.basePlanId = basePlanId
            self.state = state
            self.offerId = offerId
            self.customCodeId = customCodeId
            self.codeCreatedAt = codeCreatedAt
            self.message = message
        }
    }
}

/// Make a coupon's offer and its custom code for one plan in a store (coupons → grants, through the
/// outbox). Written in the transaction that creates the coupon and re-sent until grants
/// acknowledges it (`OutboxAck` with `commandId`); grants keeps one task per (coupon, store,
/// plan), so a repeat is harmless.
public struct StoreProvisionCommand: BusRequest, Equatable {
    public static let type = "grants.storeProvision"
    public typealias Response = Empty
    /// The outbox key grants acknowledges the command by (`OutboxAck.redemptionIds`): derived from
    /// the coupon, store and plan, so the same command always has the same one.
    public var commandId: UUID
    public var couponId: UUID
    public var code: String
    public var mode: Mode
    public var store: Store
    public var productId: String
    /// The plan's id in the store: its App Store Connect subscription id, or its Google Play
    /// subscription product id; for Stripe, the recurring prices of every plan of the coupon
    /// (`price_…`), comma-separated, since one Stripe coupon covers them all.
    public var subscriptionId: String
    /// Google Play: the base plan the offer is made on (one command per base plan).
    public var basePlanId: String?
    /// The offer's reference name (Apple) or offer id (Google): unique, stable for (coupon, store,
    /// plan, base plan); a purchase carries it back.
    public var offerName: String
    public var offer: StoreOfferTerms
    /// `NEW` customers only at Apple, else also `EXISTING` and `EXPIRED`.
    public var newCustomersOnly: Bool
    public var maxRedemptions: Int?
    public var expiresAt: Date?
    /// The coupon's app (nil: the default app, whose offers are made with the environment's store
    /// settings); another app's are made with its own stored settings (docs/apps.md).
    public var app: UUID?

    public init(commandId: UUID, couponId: UUID, code: String, mode: Mode, store: Store, productId: String, subscriptionId: String,
                basePlanId: String? = nil, offerName: String, offer: StoreOfferTerms, newCustomersOnly: Bool, maxRedemptions: Int?,
                expiresAt: Date?, app: UUID? = nil) {
        self.app = app
        self.commandId = commandId
        self.couponId = couponId
        self.code = code
        self.mode = mode
        self.store = store
        self.productId = productId
        self.subscriptionId = subscriptionId
        self.basePlanId = basePlanId
        self.offerName = offerName
        self.offer = offer
        self.newCustomersOnly = newCustomersOnly
        self.maxRedemptions = maxRedemptions
        self.expiresAt = expiresAt
    }
}

/// Switch a coupon's offer and its custom code off, or back on, in a store (coupons → grants,
/// through the outbox). Off: the coupon reached its cap, was deactivated, or expired. On: it was
/// activated again, or its cap or expiry moved so that it takes uses again.
public struct StoreSwitchCommand: BusRequest, Equatable {
    public static let type = "grants.storeSwitch"
    public typealias Response = Empty

    public enum Reason: String, Codable, Sendable, CaseIterable {
        case capReached, deactivated, expired
        /// Switched back on: the coupon was activated again, or its cap raised or its expiry moved.
        case reopened
    }

    /// The outbox key grants acknowledges it by, derived like `StoreProvisionCommand.commandId`
    /// with the generation.
    public var commandId: UUID
    public var couponId: UUID
    public var code: String
    public var mode: Mode
    public var store: Store
    public var productId: String
    /// Google Play: the base plan of the offer.
    public var basePlanId: String?
    public var offerName: String
    /// The store's ids, when coupons has them already (grants may know them first).
    public var offerId: String?
    public var customCodeId: String?
    /// On or off.
    public var active: Bool
    /// The offer's switch count in coupons (1 for its first switch-off): grants runs an offer's
    /// switches in this order, so the last one asked for is the one that stays.
    public var generation: Int
    public var reason: Reason

    public init(commandId: UUID, couponId: UUID, code: String, mode: Mode, store: Store, productId: String, basePlanId: String? = nil,
                offerName: String, offerId: String?, customCodeId: String?, active: Bool, generation: Int, reason: Reason) {
        self.commandId = commandId
        self.couponId = couponId
        self.code = code
        self.mode = mode
        self.store = store
        self.productId = productId
        self.basePlanId = basePlanId
        self.offerName = offerName
        self.offerId = offerId
        self.customCodeId = customCodeId
        self.active = active
        self.generation = generation
        self.reason = reason
    }
}
