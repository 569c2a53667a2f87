import Core
import Database
import Foundation

/// Plans in SQL: one per product id in each app and mode (the primary key), made, read, listed and
/// changed by operators of that app and mode.
enum PlanStore {
    static let columns = """
        p.id, p.mode, p.product_id, p.name, p.app_store_subscription_id, p.play_product_id, p.play_base_plan_ids, p.stripe_price_id, p.created_at,
        p.updated_at, (extract(epoch FROM p.created_at) * 1000000)::bigint AS created_us
        """

    static let notFound = ServiceError(.notFound, "no plan with this productId")

    static func create(_ tx: PGConnection, _ input: PlanInput, mode: Mode, app: UUID) throws -> PlanView {
        let d = try PlanRules.definition(input)
        do {
            let row = try tx.query("""
                INSERT INTO coupons.plans AS p (id, mode, product_id, name, app_store_subscription_id, play_product_id, play_base_plan_ids,
                    stripe_price_id, app_id)
                VALUES ($1, $2, $3, $4, $5, $6, $7::text[], $8, $9) RETURNING \(columns)
                """, [UUID.random(), mode.rawValue, d.productId, d.name, d.appStore?.subscriptionId, d.playStore?.productId,
                      d.playStore.map { PGArray($0.basePlanIds) }, d.stripe?.priceId, app]).first!
            return try view(row)
        } catch let e as PGError where e.isUniqueViolation {
            throw ServiceError(.productInUse, "a plan with this productId exists in \(mode.rawValue) mode", field: "productId")
        }
    }

    static func get(_ c: PGConnection, productId: String, mode: Mode, app: UUID, lock: Bool = false) throws -> PlanView {
        guard let row = try c.query("""
            SELECT \(columns) FROM coupons.plans p WHERE p.mode = $1 AND p.product_id = $2 AND p.app_id = $3\(lock ? " FOR UPDATE" : "")
            """, [mode.rawValue, productId, app]).first else { throw notFound }
        return try view(row)
    }

    static func list(_ c: PGConnection, _ req: Plans.List) throws -> Page<PlanView> {
        let keyset = try Keyset(limit: req.limit, cursor: req.cursor)
        let rows = try c.query("""
            SELECT \(columns) FROM coupons.plans p
            WHERE p.mode = $4 AND p.app_id = $5 AND \(Keyset.condition(time: "p.created_at", id: "p.id", parameter: 1))
            ORDER BY p.created_at DESC, p.id DESC LIMIT $3
            """, [keyset.afterMicros, keyset.afterId, keyset.fetch, req.mode.rawValue, DefaultApp.of(req.app)]).rows
        return try keyset.page(rows, micros: "created_us", view)
    }

    /// Changes a plan. Its App Store subscription can't change (or go) while a coupon has an offer
    /// on it that is not switched off: that offer lives under the old subscription at Apple. Its
    /// Google Play product can't change (or go), nor can a base plan be dropped, while a coupon has
    /// a Play offer on it (on that base plan) that is not switched off: the offer lives under that
    /// product and base plan at Google. Adding a base plan is always allowed (coupons made before
    /// it have no offer there).
    static func patch(_ tx: PGConnection, _ p: Plans.Patch) throws -> PlanView {
        let app = DefaultApp.of(p.app)
        let current = try get(tx, productId: p.productId, mode: p.mode, app: app, lock: true)
        let before = PlanDefinition(
            productId: current.productId, name: current.name, appStore: current.appStore, playStore: current.playStore,
            stripe: current.stripe)
        let after = try PlanRules.patched(before, p)
        if after.appStore != before.appStore, before.appStore != nil {
            let inUse = try tx.query("""
                SELECT EXISTS (SELECT 1 FROM coupons.store_offers o JOIN coupons.coupons c ON c.id = o.coupon_id
                               WHERE o.store = 'appStore' AND o.product_id = $1 AND c.mode = $2 AND c.app_id = $3
                               AND o.switched_off_at IS NULL) AS yes
                """, [p.productId, p.mode.rawValue, app]).first!.decode("yes", as: Bool.self)
            if inUse {
                throw ServiceError(.invalidState, "coupons have App Store offers on this plan's subscription; it can't change until they are switched off",
                                   field: "appStore")
            }
        }
        if let play = before.playStore, after.playStore != play {
            let kept = after.playStore?.productId == play.productId ? after.playStore?.basePlanIds ?? [] : []
            let live = try tx.query("""
                SELECT DISTINCT o.base_plan_id FROM coupons.store_offers o JOIN coupons.coupons c ON c.id = o.coupon_id
                WHERE o.store = 'playStore' AND o.product_id = $1 AND c.mode = $2 AND c.app_id = $4 AND o.switched_off_at IS NULL
                  AND NOT (o.base_plan_id = ANY($3::text[]))
                ORDER BY 1
                """, [p.productId, p.mode.rawValue, PGArray(kept), app]
            ).rows.map { try $0.decode("base_plan_id", as: String.self) }
            if !live.isEmpty {
                throw ServiceError(.invalidState, "coupons have Google Play offers on this plan's base plans \(live.joined(separator: ", ")) of "
                                   + "\(play.productId); its product and those base plans can't change until the offers are switched off",
                                   field: "playStore")
            }
        }
        let row = try tx.query("""
            UPDATE coupons.plans p SET name = $3, app_store_subscription_id = $4, play_product_id = $5, play_base_plan_ids = $6::text[],
                stripe_price_id = $7, updated_at = now()
            WHERE p.mode = $1 AND p.product_id = $2 AND p.app_id = $8 RETURNING \(columns)
            """, [p.mode.rawValue, p.productId, after.name, after.appStore?.subscriptionId, after.playStore?.productId,
                  after.playStore.map { PGArray($0.basePlanIds) }, after.stripe?.priceId, app]).first!
        return try view(row)
    }

    /// The App Store subscription of each of `productIds` in `mode`, for a coupon that needs App
    /// Store offers: every product must be a plan of the mode with one, else 422 on `productIds`.
    /// Read with a share lock, so a plan can't lose its subscription before the coupon commits.
    static func appStoreSubscriptions(_ tx: PGConnection, productIds: [String], mode: Mode,
        app: UUID) throws -> [String: String] {
        let rows = try tx.query("""
            SELECT p.product_id, p.app_store_subscription_id FROM coupons.plans p
            WHERE p.mode = $1 AND p.app_id = $3 AND p.product_id = ANY($2::text[]) FOR SHARE
            """, [mode.rawValue, PGArray(productIds), app]).rows
        var found: [String: String?] = [:]
        for row in rows { found[try row.decode("product_id")] = try row.decodeIfPresent("app_store_subscription_id", as: String.self) }
        var subscriptions: [String: String] = [:]
        for product in productIds {
            guard let plan = found[product] else {
                throw ServiceError(.invalid, "productIds must name plans (POST /v1/plans): \(product.prefix(60)) is not one", field: "productIds")
            }
            guard let subscription = plan else {
                throw ServiceError(.invalid, "the plan \(product.prefix(60)) has no App Store subscription (appStore.subscriptionId)", field: "productIds")
            }
            subscriptions[product] = subscription
        }
        return subscriptions
    }

    /// The Google Play subscription and base plans of each of `productIds` (plans of `mode`),
    /// locked against a change while the coupon that offers them is made; 422 on `productIds` when
    /// one is not a plan or has no Play product.
    static func playBasePlans(_ tx: PGConnection, productIds: [String], mode: Mode,
        app: UUID) throws -> [String: (product: String, basePlans: [String])] {
        let rows = try tx.query("""
            SELECT p.product_id, p.play_product_id, p.play_base_plan_ids FROM coupons.plans p
            WHERE p.mode = $1 AND p.app_id = $3 AND p.product_id = ANY($2::text[]) FOR SHARE
            """, [mode.rawValue, PGArray(productIds), app]).rows
        var found: [String: (product: String, basePlans: [String])?] = [:]
        for row in rows {
            let product: String? = try row.decodeIfPresent("play_product_id")
            let basePlans: String? = try row.decodeIfPresent("play_base_plan_ids")
            found[try row.decode("product_id")] = product.flatMap { p in basePlans.map { (p, PGArray.parse($0)) } }
        }
        var plans: [String: (product: String, basePlans: [String])] = [:]
        for product in productIds {
            guard let plan = found[product] else {
                throw ServiceError(.invalid, "productIds must name plans (POST /v1/plans): \(product.prefix(60)) is not one", field: "productIds")
            }
            guard let play = plan, !play.basePlans.isEmpty else {
                throw ServiceError(.invalid, "the plan \(product.prefix(60)) has no Google Play product (playStore.productId, basePlanIds)", field: "productIds")
            }
            plans[product] = play
        }
        return plans
    }

    /// The Stripe recurring price of each of `productIds` (plans of `mode`), for a coupon that
    /// becomes a Stripe coupon, locked against a change while the coupon is made; 422 on
    /// `productIds` when none is named, or one is not a plan or has no Stripe price.
    static func stripePrices(_ tx: PGConnection, productIds: [String], mode: Mode, app: UUID) throws -> [String: String] {
        guard !productIds.isEmpty else {
            throw ServiceError(
                .invalid, "a coupon sold through Stripe names the plans it covers (plans with stripe.priceId)",
                field: "productIds")
        }
        let rows = try tx.query("""
            SELECT p.product_id, p.stripe_price_id FROM coupons.plans p
            WHERE p.mode = $1 AND p.app_id = $3 AND p.product_id = ANY($2::text[]) FOR SHARE
            """, [mode.rawValue, PGArray(productIds), app]).rows
        var found: [String: String?] = [:]
        for row in rows {
            found[try row.decode("product_id")] = try row.decodeIfPresent("stripe_price_id", as: String.self)
        }
        var prices: [String: String] = [:]
        for product in productIds {
            guard let plan = found[product] else {
                throw ServiceError(
                    .invalid, "productIds must name plans (POST /v1/plans): \(product.prefix(60)) is not one",
                    field: "productIds")
            }
            guard let price = plan else {
                throw ServiceError(
                    .invalid, "the plan \(product.prefix(60)) has no Stripe price (stripe.priceId)", field: "productIds")
            }
            prices[product] = price
        }
        return prices
    }

    /// The Google Play product of each of `productIds` that has one (plans of `mode`).
    static func playProducts(_ c: PGConnection, productIds: [String], mode: Mode, app: UUID) throws -> [String: String] {
        let rows = try c.query("""
            SELECT p.product_id, p.play_product_id FROM coupons.plans p
            WHERE p.mode = $1 AND p.app_id = $3 AND p.product_id = ANY($2::text[]) AND p.play_product_id IS NOT NULL
            """, [mode.rawValue, PGArray(productIds), app]).rows
        var products: [String: String] = [:]
        for row in rows { products[try row.decode("product_id")] = try row.decode("play_product_id", as: String.self) }
        return products
    }

    static func view(_ row: PGRow) throws -> PlanView {
        let subscription = try row.decodeIfPresent("app_store_subscription_id", as: String.self)
        let play = try row.decodeIfPresent("play_product_id", as: String.self)
        let bases = try row.decodeIfPresent("play_base_plan_ids", as: String.self).map(PGArray.parse) ?? []
        var plan = PlanView(
            productId: try row.decode("product_id"), name: try row.decode("name"),
            appStore: subscription.map(AppStorePlan.init(subscriptionId:)),
            playStore: play.map { PlayStorePlan(productId: $0, basePlanIds: bases) },
            mode: Mode(rawValue: try row.decode("mode")) ?? .live, createdAt: try row.decode("created_at"),
            updatedAt: try row.decode("updated_at"))
        plan.stripe = try row.decodeIfPresent("stripe_price_id", as: String.self).map(StripePlan.init(priceId:))
        return plan
    }
}
