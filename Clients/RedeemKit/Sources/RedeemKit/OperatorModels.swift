import Foundation

// What operators see and send (docs/api.md), for `OperatorClient`.

/// An API key's role: `readonly` < `support` < `admin`.
public enum Role: String, Codable, Sendable, CaseIterable {
    /// Reads coupons and redemptions.
    case readonly
    /// What readonly can, and confirms purchases by hand.
    case support
    /// Everything.
    case admin
}

/// Test mode or live mode: two separate worlds, as in Stripe.
public enum Mode: String, Codable, Sendable, CaseIterable {
    /// The live world.
    case live
    /// The test world.
    case test
}

/// A limit a store sets on a coupon: `{store, limit, value}`.
public struct StoreLimit: Codable, Sendable, Equatable {
    /// The store, such as `appStore`.
    public var store: String
    /// The limit, such as `maxRedemptions`.
    public var limit: String
    /// Its value.
    public var value: Int
}

/// A store offer made for a coupon (App Store offer codes).
public struct StoreOffer: Codable, Sendable, Equatable {
    /// The store, such as `appStore`.
    public var store: String
    /// The plan the offer is on.
    public var productId: String
    /// `creating`, `waitingForApple`, `ready` or `failed`.
    public var state: String
    /// The store's id of the offer.
    public var offerId: String?
    /// The store's message, when `failed`.
    public var message: String?
    /// When Redeem asked for the offer to be switched off.
    public var switchedOffAt: Date?
    /// App Store only: this plan's custom code (the first plan the coupon's code, others `-2`, `-3`, …).
    public var customCode: String?
}

/// A coupon as operators see it, with its counts.
public struct Coupon: Codable, Sendable, Equatable {
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
    /// The plans it covers (empty: all, for free periods).
    public var productIds: [String]
    /// Where it can be redeemed.
    public var platforms: [Platform]
    /// When it may first be redeemed.
    public var startsAt: Date?
    /// When it stops.
    public var expiresAt: Date?
    /// The cap on uses.
    public var maxRedemptions: Int?
    /// Only accounts that never held the entitlement nor redeemed a coupon.
    public var newCustomersOnly: Bool
    /// A free period Redeem grants may be redeemed inside an iOS app (else iOS is `webOnly`); nil
    /// from a server that predates it.
    public var allowInApp: Bool?
    /// Whether it can still be redeemed.
    public var active: Bool
    /// The mode of the key that made it.
    public var mode: Mode
    /// Completed uses.
    public var redeemedCount: Int
    /// Uses reserved and not yet completed.
    public var reservedCount: Int
    /// Uses left under the cap.
    public var remaining: Int?
    /// When it was made.
    public var createdAt: Date
    /// The store limits that apply to it.
    public var storeLimits: [StoreLimit]
    /// Its store offers, when it has any.
    public var storeOffers: [StoreOffer]?
    /// Store purchases recorded after the cap was full (counted in `redeemedCount` too).
    public var overCapCount: Int?
}

/// A new coupon (`POST /v1/coupons`). Fields left nil are left out; the server checks each and
/// answers 422 naming the field.
public struct CouponInput: Codable, Sendable, Equatable {
    /// 3–64 of `A-Z 0-9 - _` (matched without case).
    public var code: String
    /// What it gives.
    public var kind: CouponKind
    /// 1–100, for `percentOff`.
    public var percentOff: Int?
    /// For `amountOff`.
    public var amountOff: Money?
    /// A free period's length, or a discount's billing period.
    public var duration: CouponDuration
    /// How many periods a discount lasts (discounts only).
    public var periodCount: Int?
    /// The entitlement to grant (free periods; default from the server's configuration).
    public var entitlementId: String?
    /// The plans covered (discounts need at least one).
    public var productIds: [String]?
    /// Where it can be redeemed (default all).
    public var platforms: [Platform]?
    /// When it may first be redeemed.
    public var startsAt: Date?
    /// When it stops.
    public var expiresAt: Date?
    /// The cap on uses.
    public var maxRedemptions: Int?
    /// Only new customers.
    public var newCustomersOnly: Bool?
    /// Free periods only: redeemable inside an iOS app (App Review 3.1.1 needs Apple's approval).
    public var allowInApp: Bool?
    /// `false` makes it deactivated.
    public var active: Bool?

    /// A coupon of `kind` lasting `duration`; set the other fields as needed.
    public init(code: String, kind: CouponKind, duration: CouponDuration) {
        self.code = code
        self.kind = kind
        self.duration = duration
    }
}

/// A change to a coupon (`PATCH /v1/coupons/{code}`): a field left as `.keep` stays, `.remove`
/// sends null (no cap, no end).
public struct CouponPatch: Encodable, Sendable, Equatable {
    /// One field of a change.
    public enum Change<Value: Sendable & Equatable & Encodable>: Sendable, Equatable {
        /// Leave the field as it is.
        case keep
        /// Set it.
        case set(Value)
        /// Remove it (sent as null).
        case remove
    }

    /// Activate or deactivate.
    public var active: Bool?
    /// The cap.
    public var maxRedemptions: Change<Int>
    /// The end.
    public var expiresAt: Change<Date>

    /// A change of the given fields.
    public init(active: Bool? = nil, maxRedemptions: Change<Int> = .keep, expiresAt: Change<Date> = .keep) {
        self.active = active
        self.maxRedemptions = maxRedemptions
        self.expiresAt = expiresAt
    }

    private enum CodingKeys: String, CodingKey { case active, maxRedemptions, expiresAt }

    /// Writes set fields as values and removed ones as null.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(active, forKey: .active)
        switch maxRedemptions {
        case .keep: break
        case .set(let v): try c.encode(v, forKey: .maxRedemptions)
        case .remove: try c.encodeNil(forKey: .maxRedemptions)
        }
        switch expiresAt {
        case .keep: break
        case .set(let v): try c.encode(v, forKey: .expiresAt)
        case .remove: try c.encodeNil(forKey: .expiresAt)
        }
    }
}

/// An API key as listed: the secret is never shown again.
public struct APIKey: Codable, Sendable, Equatable {
    /// The key's id (to revoke it).
    public var id: UUID
    /// The first characters of the secret, to recognise it.
    public var prefix: String
    /// Its name.
    public var name: String
    /// Its role.
    public var role: Role
    /// Its mode.
    public var mode: Mode
    /// When it was made.
    public var createdAt: Date
    /// When it was last used.
    public var lastUsedAt: Date?
}

/// A new API key: the listed fields and the secret, shown once.
public struct CreatedAPIKey: Codable, Sendable, Equatable {
    /// The key's id.
    public var id: UUID
    /// The first characters of the secret.
    public var prefix: String
    /// Its name.
    public var name: String
    /// Its role.
    public var role: Role
    /// Its mode.
    public var mode: Mode
    /// When it was made.
    public var createdAt: Date
    /// The secret (`sk_live_…` or `sk_test_…`): keep it safe, it is not shown again.
    public var key: String
}

/// A webhook endpoint.
public struct WebhookEndpoint: Codable, Sendable, Equatable {
    /// Its id.
    public var id: UUID
    /// Where events are posted.
    public var url: String
    /// The events it takes: `coupon.redeemed`, `redemption.failed`.
    public var events: [String]
    /// False once it answered 410 Gone.
    public var active: Bool
    /// The mode whose events it gets.
    public var mode: Mode
    /// When it was added.
    public var createdAt: Date
}

/// A new webhook endpoint, with its signing secret shown once.
public struct CreatedWebhook: Codable, Sendable, Equatable {
    /// Its id.
    public var id: UUID
    /// Where events are posted.
    public var url: String
    /// The events it takes.
    public var events: [String]
    /// Whether it is active.
    public var active: Bool
    /// Its mode.
    public var mode: Mode
    /// When it was added.
    public var createdAt: Date
    /// The `whsec_…` secret that signs its deliveries (Standard Webhooks).
    public var secret: String
}

/// One delivery of one event to one endpoint.
public struct WebhookDelivery: Codable, Sendable, Equatable {
    /// Its id.
    public var id: UUID
    /// The `webhook-id` header, the same on every attempt.
    public var webhookId: String
    /// The event type.
    public var type: String
    /// `pending`, `delivered` or `failed`.
    public var status: String
    /// Attempts made.
    public var attempts: Int
    /// The last answer's status code.
    public var lastStatusCode: Int?
    /// The last attempt's error.
    public var lastError: String?
    /// The first 1 KiB of the last answer's body.
    public var lastResponse: String?
    /// When the event was queued.
    public var createdAt: Date
    /// When it was delivered.
    public var deliveredAt: Date?
    /// When the next attempt is due.
    public var nextAttemptAt: Date?
}

/// A plan discount coupons can cover, and its ids in each store.
public struct Plan: Codable, Sendable, Equatable {
    /// The App Store side of a plan.
    public struct AppStore: Codable, Sendable, Equatable {
        /// The App Store Connect id of the subscription.
        public var subscriptionId: String
    }
    /// The Google Play side of a plan.
    public struct PlayStore: Codable, Sendable, Equatable {
        /// The Play product id.
        public var productId: String
        /// Its base plans.
        public var basePlanIds: [String]
    }
    /// The product id coupons name.
    public var productId: String
    /// Its name.
    public var name: String
    /// Its App Store subscription.
    public var appStore: AppStore?
    /// Its Google Play subscription.
    public var playStore: PlayStore?
    /// Its mode.
    public var mode: Mode
    /// When it was registered.
    public var createdAt: Date
    /// When it last changed.
    public var updatedAt: Date
}

/// What making unique codes answers (`POST /v1/coupons/{code}/codes`): how many, and where their
/// CSV is downloaded, once. The codes are only in that CSV.
public struct CreatedCodes: Codable, Sendable, Equatable {
    /// The coupon's own code.
    public var code: String
    public var count: Int
    public var prefix: String?
    /// The CSV for an operator key: once, then 410 `downloadGone`.
    public var csvUrl: String
    /// The same CSV at a one-time address that needs no key (for a person).
    public var downloadUrl: String
    /// After this the CSV is deleted undownloaded.
    public var expiresAt: Date
}

/// A member: an operator account with a role, which signs in to the dashboard.
public struct Member: Codable, Sendable, Equatable {
    /// The member's account id (to change or remove them).
    public var id: UUID
    public var email: String
    public var role: Role
    /// When they became a member.
    public var createdAt: Date
    /// Whether they sign in with two-step verification (TOTP).
    public var totpEnabled: Bool
}

/// An invitation still pending (never its token).
public struct MemberInvite: Codable, Sendable, Equatable {
    /// Its id (to revoke it).
    public var id: UUID
    public var email: String
    public var role: Role
    public var createdAt: Date
    /// After this its URL makes no member.
    public var expiresAt: Date
}

/// A new invitation, with its one-time token and URL shown this once.
public struct CreatedMemberInvite: Codable, Sendable, Equatable {
    public var id: UUID
    public var email: String
    public var role: Role
    public var createdAt: Date
    public var expiresAt: Date
    /// The one-time token the URL carries.
    public var token: String
    /// The dashboard's address with the token: pass it on to the person invited.
    public var inviteUrl: String
    /// Whether the server mailed the invitation too.
    public var mailed: Bool
}

/// Who made an operator change: an API key or a member, by id.
public struct AuditActor: Codable, Sendable, Equatable {
    /// `apiKey` or `member`.
    public var type: String
    /// The key's id, or the member's account id.
    public var id: UUID
}

/// One operator change in the audit log (`GET /v1/audit`).
public struct AuditEntry: Codable, Sendable, Equatable {
    public var id: UUID
    public var createdAt: Date
    /// nil for a change whose author was not recorded.
    public var actor: AuditActor?
    /// `<objectType>.<verb>`, such as `coupon.create`.
    public var action: String
    public var objectType: String
    /// A coupon's code, a plan's product id, or an id.
    public var objectId: String
    /// The object before the change, as the API shows it (nil for a creation).
    public var before: JSONValue?
    /// The object after the change (nil for a removal).
    public var after: JSONValue?
    /// The HTTP request that made it.
    public var requestId: String?
    public var mode: Mode

    private enum CodingKeys: String, CodingKey {
        case id, createdAt, actor, action, objectType, objectId, before, after, requestId, mode
    }

    /// `actor`, `before`, `after` and `requestId` are written as null when there is none, as the API does.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(createdAt, forKey: .createdAt)
        try c.encode(actor, forKey: .actor)
        try c.encode(action, forKey: .action)
        try c.encode(objectType, forKey: .objectType)
        try c.encode(objectId, forKey: .objectId)
        try c.encode(before, forKey: .before)
        try c.encode(after, forKey: .after)
        try c.encode(requestId, forKey: .requestId)
        try c.encode(mode, forKey: .mode)
    }
}

/// Which audit entries to list; nil fields don't filter.
public struct AuditFilter: Sendable, Equatable {
    /// `coupon`, `plan`, `apiKey`, `webhook`, `member`, …
    public var objectType: String?
    public var objectId: String?
    /// An API key's or member's id.
    public var actorId: UUID?
    /// Such as `coupon.create`.
    public var action: String?

    public init(objectType: String? = nil, objectId: String? = nil, actorId: UUID? = nil, action: String? = nil) {
        self.objectType = objectType
        self.objectId = objectId
        self.actorId = actorId
        self.action = action
    }
}

/// Any JSON value, kept as it came (an audit entry's object before and after).
public enum JSONValue: Codable, Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let b = try? c.decode(Bool.self) {
            self = .bool(b)
        } else if let n = try? c.decode(Double.self) {
            self = .number(n)
        } else if let s = try? c.decode(String.self) {
            self = .string(s)
        } else if let a = try? c.decode([JSONValue].self) {
            self = .array(a)
        } else {
            self = .object(try c.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .number(let n):
            // Whole numbers are written without a fraction, as they came.
            if n.rounded() == n, abs(n) < 9_007_199_254_740_992 { try c.encode(Int64(n)) } else { try c.encode(n) }
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }
}
