import Foundation

// The messages whose JSON is written on every reservation and every completion write it
// themselves (`JSONTextWriting`): the bytes their `Codable` conformances write, keys sorted by their
// bytes, optionals left out or written `null` as `encode(to:)` does. `JSONTextTests` compares each
// with `Codable`'s text, every field set and every optional absent, and fails on a stored property
// it does not set.

extension RedemptionView: JSONTextWriting {
    /// What `encode(to:)` writes: `productId` and `pricePaid` always, the rest only when set.
    public func writeJSON(_ o: inout JSONText.Object) throws {
        if let accountId { o.uuid("accountId", accountId) }
        if let appStore { try o.value("appStore", appStore) }
        if let appUserId { o.string("appUserId", appUserId) }
        o.string("code", code)
        if let completedAt { try o.date("completedAt", completedAt) }
        if let entitlement { try o.object("entitlement", entitlement) }
        if let failureReason { o.string("failureReason", failureReason) }
        o.string("platform", platform.rawValue)
        if let playStore { try o.value("playStore", playStore) }
        if let pricePaid { try o.object("pricePaid", pricePaid) } else { o.null("pricePaid") }
        o.string("productId", productId)
        o.uuid("redemptionId", redemptionId)
        try o.date("reservedAt", reservedAt)
        o.bool("sandbox", sandbox)
        o.string("status", status.rawValue)
        if let stripe { try o.value("stripe", stripe) }
        if let uniqueCodeLast4 { o.string("uniqueCodeLast4", uniqueCodeLast4) }
    }
}

extension RedemptionView.Entitlement: JSONTextWriting {
    public func writeJSON(_ o: inout JSONText.Object) throws {
        o.string("entitlementId", entitlementId)
        try o.date("expiresAt", expiresAt)
    }
}

extension Money: JSONTextWriting {
    public func writeJSON(_ o: inout JSONText.Object) throws {
        o.string("amount", amount)
        o.string("currency", currency)
    }
}

extension CouponDuration: JSONTextWriting {
    public func writeJSON(_ o: inout JSONText.Object) throws {
        o.int("count", count)
        o.string("unit", unit)
    }
}

extension PublicCoupon: JSONTextWriting {
    public func writeJSON(_ o: inout JSONText.Object) throws {
        if let amountOff { try o.object("amountOff", amountOff) }
        o.string("code", code)
        try o.object("duration", duration)
        if let entitlementId { o.string("entitlementId", entitlementId) }
        o.string("kind", kind.rawValue)
        if let percentOff { o.int("percentOff", percentOff) }
        if let periodCount { o.int("periodCount", periodCount) }
    }
}

extension GrantCommand: JSONTextWriting {
    public func writeJSON(_ o: inout JSONText.Object) throws {
        o.uuid("accountId", accountId)
        if let app { o.uuid("app", app) }
        o.string("appUserId", appUserId)
        try o.object("coupon", coupon)
        try o.object("duration", duration)
        o.string("entitlementId", entitlementId)
        if let mode { o.string("mode", mode.rawValue) }
        o.string("platform", platform.rawValue)
        if let productId { o.string("productId", productId) }
        o.uuid("redemptionId", redemptionId)
        try o.date("reservedAt", reservedAt)
        o.bool("sandbox", sandbox)
    }
}

extension Envelope: JSONTextWriting where Body: JSONTextWriting {
    public func writeJSON(_ o: inout JSONText.Object) throws {
        try o.object("body", body)
        if let deadlineMs { o.int("deadlineMs", deadlineMs) }
        if let frames { o.bool("frames", frames) }
        o.string("id", id)
        if let requestId { o.string("requestId", requestId) }
        if let traceparent { o.string("traceparent", traceparent) }
        o.string("type", type)
        o.int("v", v)
    }
}
