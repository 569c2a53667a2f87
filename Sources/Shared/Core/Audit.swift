import Foundation

/// Who made an operator change: an API key, or a member (an operator account) signed in.
public struct AuditActor: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable, CaseIterable {
        case apiKey, member
    }
    public var type: Kind
    /// The key's id, or the member's account id.
    public var id: UUID
    public init(type: Kind, id: UUID) {
        self.type = type
        self.id = id
    }
}

/// One operator change as the audit log keeps it (`GET /v1/audit`): who, what, when, the object
/// before and after (its public JSON, which never holds a secret), the HTTP request's id and the
/// mode it was made in. Each service writes its own in the transaction of the change
/// (docs/operations.md#audit-log).
public struct AuditEntry: Codable, Sendable, Equatable {
    public var id: UUID
    public var createdAt: Date
    /// nil for a change that came from a gateway of an earlier version, which did not say who.
    public var actor: AuditActor?
    /// `<objectType>.<verb>`, e.g. `coupon.create`.
    public var action: String
    public var objectType: String
    public var objectId: String
    public var before: JSONValue?
    public var after: JSONValue?
    public var requestId: String?
    public var mode: Mode
    public init(id: UUID, createdAt: Date, actor: AuditActor?, action: String, objectType: String, objectId: String,
                before: JSONValue?, after: JSONValue?, requestId: String?, mode: Mode) {
        self.id = id
        self.createdAt = createdAt
        self.actor = actor
        self.action = action
        self.objectType = objectType
        self.objectId = objectId
        self.before = before
        self.after = after
        self.requestId = requestId
        self.mode = mode
    }

    private enum CodingKeys: String, CodingKey { case id, createdAt, actor, action, objectType, objectId, before, after, requestId, mode }

    /// `actor`, `before`, `after` and `requestId` are written as null when there is none, not left out.
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

/// A change to write to a service's audit table, in the transaction that makes it.
/// Every operator change the audit log records, `<objectType>.<verb>` on the wire.
public enum AuditAction: String, Codable, Sendable, CaseIterable {
    case couponCreate = "coupon.create", couponUpdate = "coupon.update", couponDeactivate = "coupon.deactivate"
    case couponCreateCodes = "coupon.createCodes"
    case redemptionConfirm = "redemption.confirm", redemptionSimulatePurchase = "redemption.simulatePurchase"
    case storeOfferSimulateReady = "storeOffer.simulateReady"
    case planCreate = "plan.create", planUpdate = "plan.update"
    case apiKeyCreate = "apiKey.create", apiKeyRevoke = "apiKey.revoke"
    case memberInvite = "member.invite", memberUpdate = "member.update", memberRemove = "member.remove", memberJoin = "member.join"
    case memberInviteRevoke = "member.inviteRevoke", memberTOTPEnable = "member.totpEnable", memberTOTPDisable = "member.totpDisable"
    case memberSettingsUpdate = "memberSettings.update"
    case webhookCreate = "webhook.create", webhookDelete = "webhook.delete", webhookUpdate = "webhook.update"
    case webhookRotateSecret = "webhook.rotateSecret"
    case appCreate = "app.create"
    /// An app's store or RevenueCat settings set or removed (never a secret in the entry).
    case appStoresSet = "appStores.set", appStoresClear = "appStores.clear"

    /// The kind of object changed: the part before the dot.
    public var objectType: String { String(rawValue.prefix { $0 != "." }) }
    /// Every kind of object the log holds changes to.
    public static var objectTypes: [String] {
        allCases.map(\.objectType).reduce(into: []) { types, t in if !types.contains(t) { types.append(t) } }
    }
}

public struct AuditChange: Sendable {
    public var actor: AuditActor?
    public var action: String
    public var objectType: String
    public var objectId: String
    public var before: JSONValue?
    public var after: JSONValue?
    public var requestId: String?
    public var mode: Mode
    public var app: UUID
    public init(actor: AuditActor?, action: AuditAction, objectId: String, before: (any Encodable)?, after: (any Encodable)?,
                requestId: String?, mode: Mode, app: UUID) throws {
        self.actor = actor
        self.action = action.rawValue
        self.objectType = action.objectType
        self.objectId = objectId
        self.before = try before.map { try JSONValue.of($0) }
        self.after = try after.map { try JSONValue.of($0) }
        self.requestId = requestId
        self.mode = mode
        self.app = app
    }
}

/// What the gateway asks each service for when it reads the audit log: the newest rows before a
/// point, filtered. The gateway merges the three answers (`AuditMerge`).
public struct AuditQuery: Codable, Sendable {
    /// nil: every mode.
    public var mode: Mode?
    /// The app whose entries are read (`DefaultApp.of`).
    public var app: UUID?
    public var objectType: String?
    public var objectId: String?
    public var actorId: UUID?
    public var action: String?
    /// Rows to answer at most.
    public var limit: Int
    /// Only rows strictly before this (time in µs since 1970, id), newest first.
    public var beforeMicros: Int64?
    public var beforeId: UUID?
    public init(mode: Mode?, app: UUID, objectType: String?, objectId: String?, actorId: UUID?, action: String?,
        limit: Int,
                beforeMicros: Int64?, beforeId: UUID?) {
        self.mode = mode
        self.app = app
        self.objectType = objectType
        self.objectId = objectId
        self.actorId = actorId
        self.action = action
        self.limit = limit
        self.beforeMicros = beforeMicros
        self.beforeId = beforeId
    }
}

/// A service's answer to an `AuditQuery`: entries newest first, each with its exact time.
public struct AuditRows: Codable, Sendable {
    public struct Row: Codable, Sendable {
        public var entry: AuditEntry
        public var micros: Int64
        public init(entry: AuditEntry, micros: Int64) {
            self.entry = entry
            self.micros = micros
        }
    }
    public var rows: [Row]
    public init(rows: [Row]) { self.rows = rows }
}

/// The audit-log reads, one per service that keeps an audit table.
public enum Audit {
    public struct ReadAccounts: BusRequest {
        public static let type = "accounts.audit"
        public typealias Response = AuditRows
        public var query: AuditQuery
        public init(query: AuditQuery) { self.query = query }
    }
    public struct ReadCoupons: BusRequest {
        public static let type = "coupons.audit"
        public typealias Response = AuditRows
        public var query: AuditQuery
        public init(query: AuditQuery) { self.query = query }
    }
    public struct ReadGrants: BusRequest {
        public static let type = "grants.audit"
        public typealias Response = AuditRows
        public var query: AuditQuery
        public init(query: AuditQuery) { self.query = query }
    }

    /// The newest `limit` of several services' answers, each newest first, and whether more follow.
    public static func merge(_ answers: [AuditRows], limit: Int) -> (rows: [AuditRows.Row], more: Bool) {
        let all = answers.flatMap(\.rows).sorted { a, b in
            a.micros != b.micros ? a.micros > b.micros : a.entry.id.lowercasedString > b.entry.id.lowercasedString
        }
        return (Array(all.prefix(limit)), all.count > limit)
    }
}

/// A request that changes what operators own, and so says who asks (`actor`), for the audit log.
public protocol AuditedRequest: BusRequest {
    var actor: AuditActor? { get set }
}

extension AuditedRequest {
    /// The request, made by `actor`.
    public func by(_ actor: AuditActor) -> Self {
        var request = self
        request.actor = actor
        return request
    }
}

extension Coupons.Create: AuditedRequest {}
extension Coupons.Patch: AuditedRequest {}
extension Coupons.CreateCodes: AuditedRequest {}
extension Coupons.Purchase: AuditedRequest {}
extension Coupons.SimulatedPurchase: AuditedRequest {}
extension Coupons.SimulatedOfferReady: AuditedRequest {}
extension Plans.Create: AuditedRequest {}
extension Plans.Patch: AuditedRequest {}
extension APIKeys.Create: AuditedRequest {}
extension APIKeys.Revoke: AuditedRequest {}
extension Grants.CreateWebhook: AuditedRequest {}
extension Grants.DeleteWebhook: AuditedRequest {}
extension Grants.UpdateWebhook: AuditedRequest {}
extension Grants.RotateWebhookSecret: AuditedRequest {}
extension Apps.Create: AuditedRequest {}
