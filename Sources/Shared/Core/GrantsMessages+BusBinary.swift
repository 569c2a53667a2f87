import Foundation

// The binary form of the grant command every free period's reservation pushes to grants, written
// and read by hand (`BusBinaryFields`): the bytes its `Codable` conformance writes, field for field.

extension GrantCommand: BusBinaryFields {
    func write(to w: BusBinaryWriter) throws {
        w.container(.object) {
            w.field("redemptionId", redemptionId)
            w.field("accountId", accountId)
            w.field("appUserId", appUserId)
            w.field("entitlementId", entitlementId)
            w.name("duration")
            duration.write(to: w)
            w.field("sandbox", sandbox)
            w.name("coupon")
            coupon.write(to: w)
            w.field("platform", platform.rawValue)
            w.field("productId", productId)
            w.field("reservedAt", reservedAt)
            w.field("mode", mode?.rawValue)
            w.field("app", app)
        }
    }

    init(binary r: BusBinaryReader, at offset: Int) throws {
        var redemptionId: UUID?, accountId: UUID?, appUserId: String?, entitlementId: String?
        var duration: CouponDuration?, sandbox: Bool?, coupon: PublicCoupon?, platform: Platform?
        var productId: String?, reservedAt: Date?, mode: Mode?, app: UUID?
        try r.fields(at: offset) { key, at in
            if r.key(key, is: "redemptionId") {
                redemptionId = try r.uuid(at: at)
            } else if r.key(key, is: "accountId") {
                accountId = try r.uuid(at: at)
            } else if r.key(key, is: "appUserId") {
                appUserId = try r.string(at: at)
            } else if r.key(key, is: "entitlementId") {
                entitlementId = try r.string(at: at)
            } else if r.key(key, is: "duration") {
                duration = try CouponDuration(binary: r, at: at)
            } else if r.key(key, is: "sandbox") {
                sandbox = try r.bool(at: at)
            } else if r.key(key, is: "coupon") {
                coupon = try PublicCoupon(binary: r, at: at)
            } else if r.key(key, is: "platform") {
                platform = try r.raw(Platform.self, at: at)
            } else if r.key(key, is: "productId") {
                productId = try r.optional(at: at) { try r.string(at: $0) }
            } else if r.key(key, is: "reservedAt") {
                reservedAt = try r.date(at: at)
            } else if r.key(key, is: "mode") {
                mode = try r.optional(at: at) { try r.raw(Mode.self, at: $0) }
            } else if r.key(key, is: "app") {
                app = try r.optional(at: at) { try r.uuid(at: $0) }
            }
        }
        guard let redemptionId, let accountId, let appUserId, let entitlementId, let duration, let sandbox,
              let coupon, let platform, let reservedAt
        else { throw r.missing("a field of grants.grant") }
        self.init(
            redemptionId: redemptionId, accountId: accountId, appUserId: appUserId, entitlementId: entitlementId,
            duration: duration, sandbox: sandbox, coupon: coupon, platform: platform, productId: productId,
            reservedAt: reservedAt, mode: .live)
        // As `Codable` reads them: absent is nil (the initializer's defaults differ).
        (self.mode, self.app) = (mode, app)
    }
}

extension PublicCoupon: BusBinaryFields {
    func write(to w: BusBinaryWriter) {
        w.container(.object) {
            w.field("code", code)
            w.field("kind", kind.rawValue)
            w.field("percentOff", percentOff)
            if let amountOff {
                w.name("amountOff")
                amountOff.write(to: w)
            }
            w.name("duration")
            duration.write(to: w)
            w.field("periodCount", periodCount)
            w.field("entitlementId", entitlementId)
        }
    }

    init(binary r: BusBinaryReader, at offset: Int) throws {
        var code: String?, kind: CouponKind?, percentOff: Int?, amountOff: Money?, duration: CouponDuration?
        var periodCount: Int?, entitlementId: String?
        try r.fields(at: offset) { key, at in
            if r.key(key, is: "code") {
                code = try r.string(at: at)
            } else if r.key(key, is: "kind") {
                kind = try r.raw(CouponKind.self, at: at)
            } else if r.key(key, is: "percentOff") {
                percentOff = try r.optional(at: at) { try r.integer(Int.self, at: $0) }
            } else if r.key(key, is: "amountOff") {
                amountOff = try r.optional(at: at) { try Money(binary: r, at: $0) }
            } else if r.key(key, is: "duration") {
                duration = try CouponDuration(binary: r, at: at)
            } else if r.key(key, is: "periodCount") {
                periodCount = try r.optional(at: at) { try r.integer(Int.self, at: $0) }
            } else if r.key(key, is: "entitlementId") {
                entitlementId = try r.optional(at: at) { try r.string(at: $0) }
            }
        }
        guard let code, let kind, let duration else { throw r.missing("code, kind or duration") }
        self.init(
            code: code, kind: kind, percentOff: percentOff, amountOff: amountOff, duration: duration,
            periodCount: periodCount, entitlementId: entitlementId)
    }
}

extension CouponDuration: BusBinaryFields {
    func write(to w: BusBinaryWriter) {
        w.container(.object) {
            w.field("unit", unit)
            w.field("count", count)
        }
    }

    init(binary r: BusBinaryReader, at offset: Int) throws {
        var unit: String?, count: Int?
        try r.fields(at: offset) { key, at in
            if r.key(key, is: "unit") {
                unit = try r.string(at: at)
            } else if r.key(key, is: "count") {
                count = try r.integer(Int.self, at: at)
            }
        }
        guard let unit, let count else { throw r.missing("unit or count") }
        self.init(unit: unit, count: count)
    }
}

extension Money: BusBinaryFields {
    func write(to w: BusBinaryWriter) {
        w.container(.object) {
            w.field("amount", amount)
            w.field("currency", currency)
        }
    }

    init(binary r: BusBinaryReader, at offset: Int) throws {
        var amount: String?, currency: String?
        try r.fields(at: offset) { key, at in
            if r.key(key, is: "amount") {
                amount = try r.string(at: at)
            } else if r.key(key, is: "currency") {
                currency = try r.string(at: at)
            }
        }
        guard let amount, let currency else { throw r.missing("amount or currency") }
        self.init(amount: amount, currency: currency)
    }
}
