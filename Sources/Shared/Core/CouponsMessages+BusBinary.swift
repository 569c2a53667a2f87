import Foundation

// The binary forms of the messages every reservation and validation sends, written and read by
// hand (`BusBinaryFields`): the bytes their `Codable` conformances write, field for field.

extension BatchAnswer: BusBinaryFields {
    func write(to w: BusBinaryWriter) throws {
        try w.container(.object) {
            if let value {
                w.name("value")
                try w.message(value)
            }
            if let error {
                w.name("error")
                try w.write(error)
            }
        }
    }

    init(binary r: BusBinaryReader, at offset: Int) throws {
        var value: Value?, error: ServiceError?
        try r.fields(at: offset) { key, at in
            if r.key(key, is: "value") {
                value = try r.optional(at: at) { try r.message(Value.self, at: $0, key: "value") }
            } else if r.key(key, is: "error") {
                error = try r.optional(at: at) { try r.read(ServiceError.self, at: $0, key: BusBinaryKey("error")) }
            }
        }
        (self.value, self.error) = (value, error)
    }
}

extension Coupons.RedeemMany: BusBinaryFields {
    func write(to w: BusBinaryWriter) throws { try w.object("items", array: items) }

    init(binary r: BusBinaryReader, at offset: Int) throws {
        self.init(items: try r.array("items", of: Coupons.Redeem.self, inObjectAt: offset))
    }
}

extension Coupons.RedeemMany.Response: BusBinaryFields {
    func write(to w: BusBinaryWriter) throws { try w.object("answers", array: answers) }

    init(binary r: BusBinaryReader, at offset: Int) throws {
        self.init(answers: try r.array("answers", of: BatchAnswer<Coupons.Redeem.Response>.self, inObjectAt: offset))
    }
}

extension Coupons.Redeem: BusBinaryFields {
    func write(to w: BusBinaryWriter) throws {
        w.container(.object) {
            w.field("accountId", accountId)
            w.field("appUserId", appUserId)
            w.field("code", code)
            w.field("productId", productId)
            w.field("platform", platform.rawValue)
            w.field("sandbox", sandbox)
            w.field("playOwned", playOwned)
            w.field("traceparent", traceparent)
            w.field("app", app)
        }
    }

    init(binary r: BusBinaryReader, at offset: Int) throws {
        var accountId: UUID?, appUserId: String?, code: String?, productId: String?, platform: Platform?
        var sandbox: Bool?, playOwned: [String]?, traceparent: String?, app: UUID?
        try r.fields(at: offset) { key, at in
            if r.key(key, is: "accountId") {
                accountId = try r.uuid(at: at)
            } else if r.key(key, is: "appUserId") {
                appUserId = try r.string(at: at)
            } else if r.key(key, is: "code") {
                code = try r.string(at: at)
            } else if r.key(key, is: "productId") {
                productId = try r.optional(at: at) { try r.string(at: $0) }
            } else if r.key(key, is: "platform") {
                platform = try r.raw(Platform.self, at: at)
            } else if r.key(key, is: "sandbox") {
                sandbox = try r.bool(at: at)
            } else if r.key(key, is: "playOwned") {
                playOwned = try r.optional(at: at) { try r.strings(at: $0) }
            } else if r.key(key, is: "traceparent") {
                traceparent = try r.optional(at: at) { try r.string(at: $0) }
            } else if r.key(key, is: "app") {
                app = try r.optional(at: at) { try r.uuid(at: $0) }
            }
        }
        guard let accountId, let appUserId, let code, let platform, let sandbox else {
            throw r.missing("accountId, appUserId, code, platform or sandbox")
        }
        self.init(
            accountId: accountId, appUserId: appUserId, code: code, productId: productId, platform: platform,
            sandbox: sandbox, playOwned: playOwned, traceparent: traceparent, app: app)
    }
}

extension Coupons.Redeem.Response: BusBinaryFields {
    func write(to w: BusBinaryWriter) throws {
        try w.container(.object) {
            if let redemption {
                w.name("redemption")
                try w.put(redemption)
            }
            w.field("created", created)
            w.field("refusal", refusal?.rawValue)
            w.field("asksPlayOwnership", asksPlayOwnership)
        }
    }

    init(binary r: BusBinaryReader, at offset: Int) throws {
        var redemption: WireJSON<RedemptionView>?, created: Bool?, refusal: RefusalReason?, asks: Bool?
        try r.fields(at: offset) { key, at in
            if r.key(key, is: "redemption") {
                redemption = try r.optional(at: at) { try r.wire(WireJSON<RedemptionView>.self, at: $0) }
            } else if r.key(key, is: "created") {
                created = try r.bool(at: at)
            } else if r.key(key, is: "refusal") {
                refusal = try r.optional(at: at) { try r.raw(RefusalReason.self, at: $0) }
            } else if r.key(key, is: "asksPlayOwnership") {
                asks = try r.optional(at: at) { try r.bool(at: $0) }
            }
        }
        guard let created else { throw r.missing("created") }
        (self.redemption, self.created, self.refusal, self.asksPlayOwnership) = (redemption, created, refusal, asks)
    }
}

extension Coupons.ValidateMany: BusBinaryFields {
    func write(to w: BusBinaryWriter) throws { try w.object("items", array: items) }

    init(binary r: BusBinaryReader, at offset: Int) throws {
        self.init(items: try r.array("items", of: Coupons.Validate.self, inObjectAt: offset))
    }
}

extension Coupons.ValidateMany.Response: BusBinaryFields {
    func write(to w: BusBinaryWriter) throws { try w.object("answers", array: answers) }

    init(binary r: BusBinaryReader, at offset: Int) throws {
        self.init(answers: try r.array("answers", of: Coupons.Validate.Response.self, inObjectAt: offset))
    }
}

extension Coupons.Validate: BusBinaryFields {
    func write(to w: BusBinaryWriter) throws {
        w.container(.object) {
            w.field("accountId", accountId)
            w.field("code", code)
            w.field("platform", platform?.rawValue)
            w.field("sandbox", sandbox)
            w.field("playOwned", playOwned)
            w.field("productId", productId)
            w.field("app", app)
        }
    }

    init(binary r: BusBinaryReader, at offset: Int) throws {
        var accountId: UUID?, code: String?, platform: Platform?, sandbox: Bool?, playOwned: [String]?
        var productId: String?, app: UUID?
        try r.fields(at: offset) { key, at in
            if r.key(key, is: "accountId") {
                accountId = try r.uuid(at: at)
            } else if r.key(key, is: "code") {
                code = try r.string(at: at)
            } else if r.key(key, is: "platform") {
                platform = try r.optional(at: at) { try r.raw(Platform.self, at: $0) }
            } else if r.key(key, is: "sandbox") {
                sandbox = try r.optional(at: at) { try r.bool(at: $0) }
            } else if r.key(key, is: "playOwned") {
                playOwned = try r.optional(at: at) { try r.strings(at: $0) }
            } else if r.key(key, is: "productId") {
                productId = try r.optional(at: at) { try r.string(at: $0) }
            } else if r.key(key, is: "app") {
                app = try r.optional(at: at) { try r.uuid(at: $0) }
            }
        }
        guard let accountId, let code else { throw r.missing("accountId or code") }
        self.init(
            accountId: accountId, code: code, platform: platform, playOwned: playOwned, productId: productId, app: app)
        self.sandbox = sandbox
    }
}

/// Written as its `Codable` form writes it: `{reason, answer: <frame>}` to a caller that reads
/// frames, and the answer's own fields inline to any other (then through `Codable`).
extension Coupons.Validate.Response: BusBinaryFields {
    func write(to w: BusBinaryWriter) throws {
        guard w.frames != nil else { return try w.write(self) }
        try w.container(.object) {
            w.field("reason", reason?.rawValue)
            w.name("answer")
            try w.put(answer)
            if asksPlayOwnership {
                w.field("asksPlayOwnership", true)
            }
        }
    }

    /// Reads the framed form only; the inline form (from a caller that does not read frames, never
    /// the gateway) is read through `Codable`.
    init(binary r: BusBinaryReader, at offset: Int) throws {
        var reason: RefusalReason?, answer: WireJSON<Coupons.Validate.Answer>?, asks: Bool?
        try r.fields(at: offset) { key, at in
            if r.key(key, is: "reason") {
                reason = try r.optional(at: at) { try r.raw(RefusalReason.self, at: $0) }
            } else if r.key(key, is: "answer") {
                answer = try r.wire(WireJSON<Coupons.Validate.Answer>.self, at: at)
            } else if r.key(key, is: "asksPlayOwnership") {
                asks = try r.optional(at: at) { try r.bool(at: $0) }
            }
        }
        guard let answer else { throw r.missing("answer") }
        (self.reason, self.answer, self.asksPlayOwnership) = (reason, answer, asks ?? false)
    }
}

extension Coupons.CompleteMany: BusBinaryFields {
    func write(to w: BusBinaryWriter) throws { try w.object("items", array: items) }

    init(binary r: BusBinaryReader, at offset: Int) throws {
        self.init(items: try r.array("items", of: Item.self, inObjectAt: offset))
    }
}

extension Coupons.CompleteMany.Item: BusBinaryFields {
    func write(to w: BusBinaryWriter) {
        w.container(.object) {
            w.field("redemptionId", redemptionId)
            w.name("entitlement")
            w.container(.object) {
                w.field("entitlementId", entitlement.entitlementId)
                w.field("expiresAt", entitlement.expiresAt)
            }
        }
    }

    init(binary r: BusBinaryReader, at offset: Int) throws {
        var redemptionId: UUID?, entitlementId: String?, expiresAt: Date?
        try r.fields(at: offset) { key, at in
            if r.key(key, is: "redemptionId") {
                redemptionId = try r.uuid(at: at)
            } else if r.key(key, is: "entitlement") {
                try r.fields(at: at) { key, at in
                    if r.key(key, is: "entitlementId") {
                        entitlementId = try r.string(at: at)
                    } else if r.key(key, is: "expiresAt") {
                        expiresAt = try r.date(at: at)
                    }
                }
            }
        }
        guard let redemptionId, let entitlementId, let expiresAt else { throw r.missing("a field of an item") }
        self.init(redemptionId: redemptionId, entitlement: .init(entitlementId: entitlementId, expiresAt: expiresAt))
    }
}

/// `completedAt` by redemption id, an object whose keys are the ids (as `Codable` writes a
/// dictionary with `String` keys); absent from a coupons of an earlier version.
extension Coupons.CompleteMany.Response: BusBinaryFields {
    func write(to w: BusBinaryWriter) {
        w.container(.object) {
            guard let completedAt else { return }
            w.name("completedAt")
            w.container(.object) {
                for (id, at) in completedAt {
                    w.name(id)
                    w.put(at)
                }
            }
        }
    }

    init(binary r: BusBinaryReader, at offset: Int) throws {
        var completedAt: [String: Date]?
        try r.fields(at: offset) { key, at in
            guard r.key(key, is: "completedAt"), try !r.isNil(at: at) else { return }
            var read: [String: Date] = [:]
            try r.fields(at: at) { key, at in
                read[String(decoding: r.bytes[key], as: UTF8.self)] = try r.date(at: at)
            }
            completedAt = read
        }
        self.init(completedAt: completedAt)
    }
}
