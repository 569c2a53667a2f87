import Core
import Database
import Foundation

/// Coupons in SQL: create (with the App Store per-product limit), read with counts, list, change.
/// A code is unique within a mode (migration 10): operators reach the coupon of their key's mode,
/// end users the one `Coupons.preferredMode` picks.
enum CouponStore {
    static let columns = """
        c.id, c.code, c.kind, c.percent_off, c.amount_off, c.currency, c.duration_unit, c.duration_count, c.period_count,
        c.entitlement_id, c.product_ids, c.platforms, c.starts_at, c.expires_at, c.max_redemptions, c.new_customers_only, c.allow_in_app,
        c.active, c.mode, c.used_count, c.has_store_offers, c.has_play_offers, c.has_stripe_offers, c.has_unique_codes, c.name,
        c.metadata, c.created_at, (extract(epoch FROM c.created_at) * 1000000)::bigint AS created_us,
        (SELECT count(*) FROM coupons.redemptions r WHERE r.coupon_id = c.id AND NOT r.sandbox AND r.status = 'completed') AS redeemed_count,
        (SELECT count(*) FROM coupons.redemptions r WHERE r.coupon_id = c.id AND NOT r.sandbox AND r.status IN ('reserved', 'granting')) AS reserved_count,
        (SELECT count(*) FROM coupons.store_purchases p WHERE p.coupon_id = c.id AND p.over_cap) AS over_cap_count
        """

    /// The coupon without its counts: what validate and redeem need (counting redemptions of a
    /// hot coupon on every request would cost more than the request).
    static let definitionColumns = """
        c.id, c.code, c.kind, c.percent_off, c.amount_off, c.currency, c.duration_unit, c.duration_count, c.period_count,
        c.entitlement_id, c.product_ids, c.platforms, c.starts_at, c.expires_at, c.max_redemptions, c.new_customers_only, c.allow_in_app,
        c.active, c.mode, c.used_count, c.has_store_offers, c.has_play_offers, c.has_stripe_offers, c.has_unique_codes,
        c.app_id
        """

    /// The app of a coupon's row (of `definitionColumns`): its events go to that app's endpoints.
    static func app(_ row: PGRow) throws -> UUID { try row.decode("app_id") }

    /// The coupon of `code` in `app` and `mode`.
    static func findDefinition(_ c: PGConnection, code: String, mode: Mode, app: UUID) throws -> PGRow? {
        try c.prepared(
            "coupon_definition_in_app_mode",
            "SELECT \(definitionColumns) FROM coupons.coupons c WHERE c.code = $1 AND c.mode = $2 AND c.app_id = $3",
            [CouponRules.normalizeCode(code), mode.rawValue, app]
        ).first
    }

    static func findDefinition(_ c: PGConnection, id: UUID) throws -> PGRow? {
        try c.query("SELECT \(definitionColumns) FROM coupons.coupons c WHERE c.id = $1", [id]).first
    }

    static func publicView(_ row: PGRow) throws -> PublicCoupon { publicView(try definition(row)) }

    static func publicView(_ d: CouponDefinition) -> PublicCoupon {
        PublicCoupon(
            code: d.code, kind: d.kind, percentOff: d.percentOff,
            amountOff: d.amountOff.map { Money(amount: MoneyText.format($0), currency: d.currency ?? "") },
            duration: d.duration, periodCount: d.periodCount, entitlementId: d.entitlementId)
    }

    /// Makes a coupon: its row and, when it needs App Store offers (`hasStoreOffers`), an offer per
    /// plan with its provision command (every product must then be a plan with an App Store
    /// subscription, else 422 on `productIds`). One transaction: the caller's.
    static func create(_ tx: PGConnection, _ d: CouponDefinition, mode: Mode, app: UUID, active: Bool,
        now: Date) throws -> UUID {
        let subscriptions =
            d.hasStoreOffers ? try PlanStore.appStoreSubscriptions(tx, productIds: d.productIds, mode: mode,
                app: app) : [:]
        let basePlans = d.hasPlayOffers ? try PlanStore.playBasePlans(tx, productIds: d.productIds, mode: mode,
            app: app) : [:]
        let prices = d.hasStripeOffers ? try PlanStore.stripePrices(tx, productIds: d.productIds, mode: mode,
            app: app) : [:]
        let id = try insert(tx, d, mode: mode, app: app, active: active, now: now)
        if d.hasStoreOffers {
            try StoreOffers.provision(tx, couponId: id, d, mode: mode, app: app, subscriptions: subscriptions)
        }
        if d.hasPlayOffers {
            try StoreOffers.provisionPlay(tx, couponId: id, d, mode: mode, app: app, basePlans: basePlans)
        }
        if d.hasStripeOffers {
            try StoreOffers.provisionStripe(tx, couponId: id, d, mode: mode, app: app, prices: prices)
        }
        return id
    }

    static func insert(_ tx: PGConnection, _ d: CouponDefinition, mode: Mode, app: UUID, active: Bool,
        now: Date) throws -> UUID {
        if active { try checkActivePerProduct(tx, d, mode: mode, app: app, excluding: nil) }
        if d.hasStoreOffers { try checkAppStoreCodesFree(tx, d, mode: mode, app: app) }
        let id = UUID.random()
        do {
            try tx.query(
                """
                INSERT INTO coupons.coupons (id, code, kind, percent_off, amount_off, currency, duration_unit, duration_count, period_count,
                    entitlement_id, product_ids, platforms, starts_at, expires_at, max_redemptions, new_customers_only, mode, active,
                    has_store_offers, has_play_offers, allow_in_app, has_stripe_offers, name, metadata, app_id)
                VALUES ($1, $2, $3, $4, $5::numeric, $6, $7, $8, $9, $10, $11::text[], $12::text[], $13, $14, $15, $16, $17, $18, $19, $20, $21,
                    $22, $23, $24::jsonb, $25)
                """,
                [
                    id, d.code, d.kind, d.percentOff, d.amountOff, d.currency, d.duration.unit, d.duration.count,
                    d.periodCount,
                    d.entitlementId, PGArray(d.productIds), PGArray(d.platforms.map(\.rawValue)), d.startsAt,
                    d.expiresAt, d.maxRedemptions,
                    d.newCustomersOnly, mode.rawValue, active, d.hasStoreOffers, d.hasPlayOffers, d.allowInApp,
                    d.hasStripeOffers, d.name, try metadataJSON(d.metadata), app,
                ])
        } catch let e as PGError where e.isUniqueViolation {
            throw ServiceError(.codeInUse, "a coupon with this code exists in \(mode.rawValue) mode", field: "code")
        }
        return id
    }

    /// At most 10 active iOS discount coupons (and free periods that became App Store offers) per
    /// product, counted in each mode: a test key must
    /// not be able to stop live coupons from being made. Serialised per product and mode with an
    /// advisory lock, so two creations at once cannot both pass the count.
    static func checkActivePerProduct(_ tx: PGConnection, _ d: CouponDefinition, mode: Mode, app: UUID,
        excluding: UUID?) throws {
        guard d.hasStoreLimits else { return }
        for product in d.productIds.sorted() {
            try tx.query(
                "SELECT pg_advisory_xact_lock(hashtext($1))",
                    ["coupons.store-product.\(app.lowercasedString).\(mode.rawValue)." + product])
            let n = try tx.query(
                """
                SELECT count(*) AS n FROM coupons.coupons
                WHERE active AND (kind <> 'freePeriod' OR has_store_offers) AND 'ios' = ANY(platforms) AND $1 = ANY(product_ids) AND mode = $3 AND app_id = $4
                  AND (expires_at IS NULL OR expires_at > now()) AND ($2::uuid IS NULL OR id <> $2::uuid)
                """, [product, excluding, mode.rawValue, app]
            ).first!.decode("n", as: Int.self)
            guard n < CouponRules.storeMaxActivePerProduct else {
                throw CouponRules.storeLimit(
                    "productIds",
                    "the App Store allows at most \(CouponRules.storeMaxActivePerProduct) active offer-code coupons per product (\(product.prefix(60)))"
                )
            }
        }
    }

    /// Apple takes a custom code once per app: none of a new coupon's plans' codes (`AppStoreCodes`)
    /// may be one that another coupon's App Store offer has in this mode (`SPRING25-2` of a coupon
    /// `SPRING25` on two plans, or a coupon `SPRING25-2` made before), else 409 `codeInUse`.
    /// Serialised per mode with an advisory lock, so two coupons made at once can't both pass.
    static func checkAppStoreCodesFree(_ tx: PGConnection, _ d: CouponDefinition, mode: Mode, app: UUID) throws {
        try tx.query("SELECT pg_advisory_xact_lock(hashtext($1))",
            ["coupons.app-store-codes.\(app.lowercasedString)." + mode.rawValue])
        let codes = Array(AppStoreCodes.byProduct(code: d.code, productIds: d.productIds).values)
        if let taken = try tx.query(
            """
            SELECT o.custom_code FROM coupons.store_offers o JOIN coupons.coupons c ON c.id = o.coupon_id
            WHERE c.mode = $1 AND c.app_id = $3 AND o.store = 'appStore' AND o.custom_code = ANY($2::text[]) LIMIT 1
            """, [mode.rawValue, PGArray(codes), app]
        ).first {
            let code = try taken.decode("custom_code", as: String.self)
            throw ServiceError(
                .codeInUse, "the App Store code \(code) is another coupon's offer code in \(mode.rawValue) mode",
                field: "code")
        }
    }

    static func find(_ c: PGConnection, code: String, mode: Mode, app: UUID, lock: Bool = false) throws -> PGRow? {
        try c.query(
            "SELECT \(columns) FROM coupons.coupons c WHERE c.code = $1 AND c.mode = $2 AND c.app_id = $3\(lock ? " FOR UPDATE" : "")",
            [CouponRules.normalizeCode(code), mode.rawValue, app]
        ).first
    }

    /// The coupon of `code` in `app` and `mode`; `notFound` also when only another app or mode has one.
    static func get(_ c: PGConnection, code: String, mode: Mode, app: UUID, stores: StoreSettings,
        now: Date) throws -> CouponView
    {
        guard let row = try find(c, code: code, mode: mode, app: app) else { throw notFound }
        return try withStoreOffers(c, [row], stores: stores, now: now)[0]
    }

    /// The views of `rows`, each with its store offers (one query for those of the coupons that have any).
    static func withStoreOffers(
        _ c: PGConnection, _ rows: [PGRow], stores: StoreSettings, now: Date
    ) throws -> [CouponView] {
        var views = try rows.map(view)
        let withOffers = try rows.filter {
            try $0.decode("has_store_offers", as: Bool.self) || $0.decode("has_play_offers", as: Bool.self)
                || $0.decode("has_stripe_offers", as: Bool.self)
        }
        .map { try $0.decode("id", as: UUID.self) }
        guard !withOffers.isEmpty else { return views }
        let offers = try StoreOffers.rows(c, coupons: withOffers)
        for (i, row) in rows.enumerated() {
            guard let mine = offers[try row.decode("id", as: UUID.self)] else { continue }
            views[i].storeOffers = mine.map { $0.view(now: now, settle: stores.settle($0.store)) }
        }
        return views
    }

    static let notFound = ServiceError(.notFound, "no coupon with this code")

    static func list(
        _ c: PGConnection, mode: Mode, app: UUID, active: Bool?, limit: Int, cursor: String?, stores: StoreSettings, now: Date
    ) throws
        -> Coupons.List.Response
    {
        let keyset = try Keyset(limit: limit, cursor: cursor)
        let rows = try c.query(
            """
            SELECT \(columns) FROM coupons.coupons c
            WHERE c.mode = $5 AND c.app_id = $6 AND ($1::boolean IS NULL OR c.active = $1::boolean) AND \(Keyset.condition(time: "c.created_at", id: "c.id", parameter: 2))
            ORDER BY c.created_at DESC, c.id DESC LIMIT $4
            """, [active, keyset.afterMicros, keyset.afterId, keyset.fetch, mode.rawValue, app]
        ).rows
        let page = try keyset.page(rows, micros: "created_us", view)
        return Page(
            data: try withStoreOffers(c, Array(rows.prefix(keyset.limit)), stores: stores, now: now),
            nextCursor: page.nextCursor)
    }

    /// Changes a coupon. Deactivating it switches its store offers off; a cap lowered to the uses
    /// already made does too (`StoreOffers.switchOffIfCapFull`). Activating it again, raising a
    /// full cap or moving the expiry of an expired coupon switches them back on
    /// (`StoreOffers.switchOnIfOpen`).
    static func patch(_ tx: PGConnection, _ p: Coupons.Patch, stores: StoreSettings, now: Date) throws -> CouponView {
        let mode = Mode.of(p.mode)
        let app = DefaultApp.of(p.app)
        guard let row = try find(tx, code: p.code, mode: mode, app: app, lock: true) else { throw notFound }
        var d = try definition(row)
        let id = try row.decode("id", as: UUID.self)
        let used = try row.decode("used_count", as: Int.self)
        var active = try row.decode("active", as: Bool.self)
        if let max = p.maxRedemptions {
            try CouponRules.checkCap(max)
            guard max >= used else {
                throw CouponRules.invalid(
                    "maxRedemptions", "maxRedemptions can't go below the \(used) uses already made")
            }
            d.maxRedemptions = max
        }
        if let expires = p.expiresAt {
            guard expires > now else { throw CouponRules.invalid("expiresAt", "expiresAt is in the past") }
            if let starts = d.startsAt, expires <= starts {
                throw CouponRules.invalid("expiresAt", "expiresAt must be after startsAt")
            }
            d.expiresAt = expires
        }
        // Sent as null: removed (the store limits below still require both on an iOS discount).
        let removing = Set(p.removing ?? [])
        if removing.contains("maxRedemptions") { d.maxRedemptions = nil }
        if removing.contains("expiresAt") { d.expiresAt = nil }
        if let name = p.name { try CouponRules.checkName(name) }
        let name = removing.contains("name") ? nil : p.name ?? d.name
        let metadata = try CouponRules.merged(removing.contains("metadata") ? [:] : d.metadata, p.metadata ?? [:])
        // A coupon with offers has its App Store code already, made with Apple's longest expiry
        // after the coupon was (OfferProvisioner.codeTerms): its expiry may move within that.
        try CouponRules.checkStoreLimits(d, now: d.hasStoreOffers ? try row.decode("created_at", as: Date.self) : now)
        if let a = p.active {
            if a && !active { try checkActivePerProduct(tx, d, mode: mode, app: app, excluding: id) }
            active = a
        }
        try tx.query(
            """
            UPDATE coupons.coupons SET max_redemptions = $2, expires_at = $3, active = $4, name = $5, metadata = $6::jsonb
            WHERE id = $1
            """,
            [id, d.maxRedemptions, d.expiresAt, active, name, try metadataJSON(metadata)])
        if d.hasAnyStoreOffers {
            if p.active == false {
                try StoreOffers.switchOff(tx, coupon: id, reason: .deactivated)
            } else {
                try StoreOffers.switchOffIfCapFull(tx, coupon: id)
                try StoreOffers.switchOnIfOpen(tx, coupon: id)
            }
        }
        return try get(tx, code: d.code, mode: mode, app: app, stores: stores, now: now)
    }

    /// A stored platform; the column holds only what the rules let in, so anything else is a fault.
    static func platform(_ text: String) throws -> Platform {
        guard let p = Platform(rawValue: text) else {
            throw ServiceError(.internal, "a coupon stores an unknown platform")
        }
        return p
    }
    static func definition(_ row: PGRow) throws -> CouponDefinition {
        CouponDefinition(
            code: try row.decode("code"), kind: try row.decode("kind"),
            percentOff: try row.decodeIfPresent("percent_off"),
            amountOff: try row.decodeIfPresent("amount_off"), currency: try row.decodeIfPresent("currency"),
            duration: CouponDuration(unit: try row.decode("duration_unit"), count: try row.decode("duration_count")),
            periodCount: try row.decodeIfPresent("period_count"),
            entitlementId: try row.decodeIfPresent("entitlement_id"),
            productIds: PGArray.parse(try row.decode("product_ids")),
            platforms: try PGArray.parse(try row.decode("platforms")).map(platform),
            startsAt: try row.decodeIfPresent("starts_at"), expiresAt: try row.decodeIfPresent("expires_at"),
            maxRedemptions: try row.decodeIfPresent("max_redemptions"),
            newCustomersOnly: try row.decode("new_customers_only"),
            allowInApp: try row.decode("allow_in_app"), hasStoreOffers: try row.decode("has_store_offers"),
            hasPlayOffers: try row.decode("has_play_offers"), hasStripeOffers: try row.decode("has_stripe_offers"),
            // Not every row that holds a definition selects it (store offers' own queries).
            hasUniqueCodes: (try? row.decode("has_unique_codes", as: Bool.self)) ?? false,
            // Only the operator's view selects these (`columns`, not `definitionColumns`).
            name: try? row.decodeIfPresent("name", as: String.self),
            metadata: (try? row.decode("metadata", as: String.self)).map(metadata) ?? [:])
    }

    static func metadataJSON(_ metadata: [String: String]) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(metadata), as: UTF8.self)
    }

    /// The stored metadata; the column holds only an object of strings.
    static func metadata(_ json: String) -> [String: String] {
        (try? JSONDecoder().decode([String: String].self, from: Data(json.utf8))) ?? [:]
    }

    static func view(_ row: PGRow) throws -> CouponView {
        let d = try definition(row)
        let used = try row.decode("used_count", as: Int.self)
        return CouponView(
            code: d.code, kind: d.kind, percentOff: d.percentOff,
            amountOff: d.amountOff.map { Money(amount: MoneyText.format($0), currency: d.currency ?? "") },
            duration: d.duration, periodCount: d.periodCount, entitlementId: d.entitlementId, productIds: d.productIds,
            platforms: d.platforms, startsAt: d.startsAt, expiresAt: d.expiresAt, maxRedemptions: d.maxRedemptions,
            newCustomersOnly: d.newCustomersOnly, active: try row.decode("active"),
            mode: Mode(rawValue: try row.decode("mode")) ?? .live, redeemedCount: try row.decode("redeemed_count"),
            reservedCount: try row.decode("reserved_count"), remaining: d.maxRedemptions.map { max(0, $0 - used) },
            createdAt: try row.decode("created_at"), storeLimits: CouponRules.storeLimits(d),
            overCapCount: try row.decode("over_cap_count"), allowInApp: d.allowInApp, name: d.name, metadata: d.metadata)
    }

    /// A preview of what `insert` would store (dry run).
    /// The coupon a dry run would make, with the store offers it would get, each `creating`: one
    /// App Store offer per plan, and one Google Play offer per base plan of each plan
    /// (`playBasePlans`, plan → its base plans, listed as a made coupon lists them).
    static func preview(
        _ d: CouponDefinition, mode: Mode, active: Bool, now: Date, playBasePlans: [String: [String]] = [:]
    ) -> CouponView {
        var offers: [StoreOfferView] = []
        if d.hasStoreOffers {
            let codes = AppStoreCodes.byProduct(code: d.code, productIds: d.productIds)
            offers += d.productIds.map {
                StoreOfferView(
                    store: .appStore, productId: $0, state: .creating, offerId: nil, message: nil, switchedOffAt: nil,
                    customCode: codes[$0])
            }
        }
        if d.hasPlayOffers {
            offers += d.productIds.sorted().flatMap { product in
                (playBasePlans[product] ?? []).sorted().map {
                    StoreOfferView(
                        store: .playStore, productId: product, basePlanId: $0, state: .creating, offerId: nil,
                        message: nil, switchedOffAt: nil)
                }
            }
        }
        if d.hasStripeOffers {
            offers.append(
                StoreOfferView(
                    store: .stripe, productId: "", state: .creating, offerId: nil, message: nil, switchedOffAt: nil))
        }
        return CouponView(
            code: d.code, kind: d.kind, percentOff: d.percentOff,
            amountOff: d.amountOff.map { Money(amount: MoneyText.format($0), currency: d.currency ?? "") },
            duration: d.duration, periodCount: d.periodCount, entitlementId: d.entitlementId, productIds: d.productIds,
            platforms: d.platforms, startsAt: d.startsAt, expiresAt: d.expiresAt, maxRedemptions: d.maxRedemptions,
            newCustomersOnly: d.newCustomersOnly, active: active, mode: mode, redeemedCount: 0, reservedCount: 0,
            remaining: d.maxRedemptions, createdAt: now, storeLimits: CouponRules.storeLimits(d),
            storeOffers: d.hasAnyStoreOffers ? offers : nil, allowInApp: d.allowInApp, name: d.name,
            metadata: d.metadata)
    }
}

/// Decimal money as its wire text with two decimals ("4.90").
enum MoneyText {
    static func format(_ d: Decimal) -> String {
        var v = d
        var rounded = Decimal()
        NSDecimalRound(&rounded, &v, 2, .plain)
        let s = "\(rounded)"
        let parts = s.split(separator: ".")
        if parts.count == 1 { return s + ".00" }
        return parts[1].count == 1 ? s + "0" : s
    }
}
