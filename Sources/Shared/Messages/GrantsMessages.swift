import Foundation

/// The grant command (SPEC §3): written to the coupons outbox with the reservation, pushed to
/// grants (PUSH/PULL) and re-sent until grants acknowledges it. Grants makes at most one grant
/// per redemption, so a repeated command is harmless.
public struct GrantCommand: BusRequest, Equatable {
    public static let type = "grants.grant"
    public typealias Response = Empty
    public var redemptionId: UUID
    public var accountId: UUID
    public var appUserId: String
    public var entitlementId: String
    public var duration: CouponDuration
    public var sandbox: Bool
    public var code: String
    public init(redemptionId: UUID, accountId: UUID, appUserId: String, entitlementId: String, duration: CouponDuration, sandbox: Bool, code: String) {
        self.redemptionId = redemptionId
        self.accountId = accountId
        self.appUserId = appUserId
        self.entitlementId = entitlementId
        self.duration = duration
        self.sandbox = sandbox
        self.code = code
    }
}
