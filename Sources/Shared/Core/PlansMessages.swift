import Foundation

// The plans catalog (docs/stores.md): the products coupons can cover, and what each is called in
// each store. Kept by coupons (gateway → coupons); each plan belongs to the mode of the key that
// made it, as every object does.

/// A plan's App Store side: the App Store Connect id of its auto-renewable subscription (the
/// resource id offers are created under, not the product identifier).
public struct AppStorePlan: Codable, Sendable, Equatable {
    public var subscriptionId: String
    public init(subscriptionId: String) { self.subscriptionId = subscriptionId }
}

/// A plan's Google Play side: the subscription's product id and the base plans offers may go on.
public struct PlayStorePlan: Codable, Sendable, Equatable {
    public var productId: String
    public var basePlanIds: [String]
    public init(productId: String, basePlanIds: [String]) {
        self.productId = productId
        self.basePlanIds = basePlanIds
    }
}

/// A plan's Stripe side, for the web: the recurring price a Checkout Session sells (`price_…`).
public struct StripePlan: Codable, Sendable, Equatable {
    public var priceId: String
    public init(priceId: String) { self.priceId = priceId }
}

/// The fields an operator sends for a plan; each is checked with a 422 naming it (`PlanRules`).
public struct PlanInput: Codable, Sendable {
    public struct AppStore: Codable, Sendable {
        public var subscriptionId: String?
        public init(subscriptionId: String?) { self.subscriptionId = subscriptionId }
    }
    public struct PlayStore: Codable, Sendable {
        public var productId: String?
        public var basePlanIds: [String]?
        public init(productId: String?, basePlanIds: [String]?) {
            self.productId = productId
            self.basePlanIds = basePlanIds
        }
    }
    public struct Stripe: Codable, Sendable {
        public var priceId: String?
        public init(priceId: String?) { self.priceId = priceId }
    }
    public var productId: String?
    public var name: String?
    public var appStore: AppStore?
    public var playStore: PlayStore?
    public var stripe: Stripe?
    public init(
        productId: String?, name: String?, appStore: AppStore? = nil, playStore: PlayStore? = nil, stripe: Stripe? = nil
    ) {
        self.productId = productId
        self.name = name
        self.appStore = appStore
        self.playStore = playStore
        self.stripe = stripe
    }
}

/// A plan as operators see it.
public struct PlanView: Codable, Sendable, Equatable {
    public var productId: String
    public var name: String
    public var appStore: AppStorePlan?
    public var playStore: PlayStorePlan?
    public var stripe: StripePlan?
    public var mode: Mode
    public var createdAt: Date
    public var updatedAt: Date

    public init(productId: String, name: String, appStore: AppStorePlan?, playStore: PlayStorePlan?, mode: Mode, createdAt: Date, updatedAt: Date) {
        self.productId = productId
        self.name = name
        self.appStore = appStore
        self.playStore = playStore
        self.mode = mode
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    private enum CodingKeys: String, CodingKey {
        case productId, name, appStore, playStore, stripe, mode, createdAt, updatedAt
    }

    /// Every field is present, a store the plan is not in as null (as a coupon's fields are).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(productId, forKey: .productId)
        try c.encode(name, forKey: .name)
        try c.encode(appStore, forKey: .appStore)
        try c.encode(playStore, forKey: .playStore)
        try c.encode(stripe, forKey: .stripe)
        try c.encode(mode, forKey: .mode)
        try c.encode(createdAt, forKey: .createdAt)
        try c.encode(updatedAt, forKey: .updatedAt)
    }
}

public enum Plans {
    /// 201 with the plan; 409 `productInUse` when the mode has a plan of this product id; 422
    /// naming the field.
    public struct Create: BusRequest {
        public static let type = "coupons.createPlan"
        /// Who asks, for the audit log (nil from a gateway of an earlier version).
        public var actor: AuditActor? = nil
        public typealias Response = PlanView
        public var input: PlanInput
        public var mode: Mode
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public init(input: PlanInput, mode: Mode, app: UUID) {
            self.input = input
            self.mode = mode
            self.app = app
        }
    }

    /// The plans of one mode, newest first, a page at a time (`Keyset`).
    public struct List: BusRequest {
        public static let type = "coupons.listPlans"
        public typealias Response = Page<PlanView>
        public var limit: Int?
        public var cursor: String?
        public var mode: Mode
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public init(limit: Int?, cursor: String?, mode: Mode, app: UUID) {
            self.limit = limit
            self.cursor = cursor
            self.mode = mode
            self.app = app
        }
    }

    /// One plan; `notFound` when the mode has none of this product id.
    public struct Get: BusRequest {
        public static let type = "coupons.getPlan"
        public typealias Response = PlanView
        public var productId: String
        public var mode: Mode
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public init(productId: String, mode: Mode, app: UUID) {
            self.productId = productId
            self.mode = mode
            self.app = app
        }
    }

    /// A change to a plan: fields left out stay; `appStore` or `playStore` named in `removing`
    /// (sent as null) is removed. The product id never changes. An App Store subscription that
    /// coupons have offers on can't change (409 `invalidState`).
    public struct Patch: BusRequest {
        public static let type = "coupons.patchPlan"
        /// Who asks, for the audit log (nil from a gateway of an earlier version).
        public var actor: AuditActor? = nil
        public typealias Response = PlanView
        public var productId: String
        public var name: String?
        public var appStore: PlanInput.AppStore?
        public var playStore: PlanInput.PlayStore?
        public var stripe: PlanInput.Stripe?
        /// `appStore`, `playStore`, `stripe`: sent as null, to remove.
        public var removing: [String]?
        public var mode: Mode
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public init(
            productId: String, mode: Mode, app: UUID, name: String? = nil, appStore: PlanInput.AppStore? = nil,
            playStore: PlanInput.PlayStore? = nil, removing: [String]? = nil, stripe: PlanInput.Stripe? = nil
        ) {
            self.stripe = stripe
            self.productId = productId
            self.mode = mode
            self.app = app
            self.name = name
            self.appStore = appStore
            self.playStore = playStore
            self.removing = removing
        }
    }
}
