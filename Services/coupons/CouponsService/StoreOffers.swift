import Core
import Database
import Foundation

/// A coupon's offers in the stores (docs/stores.md): made with the coupon (a row per plan, state
/// `creating`, and a `grants.storeProvision` command in the same transaction), moved on by grants'
/// reports, read by validate and redeem on iOS, and switched off (`grants.storeSwitch`) when the
/// cap is full, the coupon is deactivated or it expires, and back on when it takes uses again.
enum StoreOffers {
    /// One `store_offers` row.
    struct Row: Sendable, Equatable {
        var couponId: UUID
        var store: Store
        var productId: String
        /// Google Play's base plan; empty for the App Store.
        var basePlanId = ""
        var stored: StoreOfferState
        var offerName: String
        var offerId: String?
        var customCodeId: String?
        var message: String?
        var codeCreatedAt: Date?
        var firstPurchaseAt: Date?
        var switchedOffAt: Date?
        /// App Store only: the custom code made for this plan (`AppStoreCodes`).
        var customCode: String?

        func state(now: Date, settle: TimeInterval) -> StoreOfferState {
            StoreOfferReadiness.state(
                stored: stored, codeCreatedAt: codeCreatedAt, firstPurchaseAt: firstPurchaseAt,
                switchedOff: switchedOffAt != nil, now: now, settle: settle)
        }

        func view(now: Date, settle: TimeInterval) -> StoreOfferView {
            StoreOfferView(
                store: store, productId: productId, basePlanId: basePlanId.isEmpty ? nil : basePlanId,
                state: state(now: now, settle: settle), offerId: offerId, message: message,
                switchedOffAt: switchedOffAt,
                customCode: customCode)
        }
    }

    static let columns = """
        o.coupon_id, o.store, o.product_id, o.state, o.offer_name, o.offer_id, o.custom_code_id, o.message, o.code_created_at,
        o.first_purchase_at, o.switched_off_at, o.base_plan_id, o.custom_code
        """

    static func row(_ r: PGRow) throws -> Row {
        guard let store = Store(rawValue: try r.decode("store")),
            let state = StoreOfferState(rawValue: try r.decode("state"))
        else {
            throw ServiceError(.internal, "a store offer row holds an unknown store or state")
        }
        return Row(
            couponId: try r.decode("coupon_id"), store: store, productId: try r.decode("product_id"),
            basePlanId: try r.decode("base_plan_id"), stored: state,
            offerName: try r.decode("offer_name"), offerId: try r.decodeIfPresent("offer_id"),
            customCodeId: try r.decodeIfPresent("custom_code_id"), message: try r.decodeIfPresent("message"),
            codeCreatedAt: try r.decodeIfPresent("code_created_at"),
            firstPurchaseAt: try r.decodeIfPresent("first_purchase_at"),
            switchedOffAt: try r.decodeIfPresent("switched_off_at"), customCode: try r.decodeIfPresent("custom_code"))
    }

    // MARK: - Made with the coupon

    /// The offers of a new coupon that needs them, one per plan (each plan's App Store subscription
    /// in `subscriptions`) with its own custom code (`AppStoreCodes`), and a provision command per
    /// offer in the outbox: the coupon's own transaction, so either all of it is there or none.
    static func provision(
        _ tx: PGConnection, couponId: UUID, _ d: CouponDefinition, mode: Mode, app: UUID,
        subscriptions: [String: String]
    ) throws {
        let products = d.productIds
        let names = products.map { StoreIds.offerName(coupon: couponId, store: .appStore, productId: $0) }
        let codes = AppStoreCodes.byProduct(code: d.code, productIds: products)
        try tx.query(
            """
            INSERT INTO coupons.store_offers (coupon_id, store, product_id, offer_name, custom_code)
            SELECT $1, 'appStore', p.product, p.name, p.code FROM unnest($2::text[], $3::text[], $4::text[]) AS p(product, name, code)
            """, [couponId, PGArray(products), PGArray(names), PGArray(products.map { codes[$0] ?? d.code })])
        for (product, name) in zip(products, names) {
            guard let subscription = subscriptions[product] else { throw ServiceError.internal }
            let command = StoreProvisionCommand(
                commandId: StoreIds.command(
                    StoreProvisionCommand.type, coupon: couponId, store: .appStore, productId: product),
                couponId: couponId, code: codes[product] ?? d.code, mode: mode, store: .appStore, productId: product,
                subscriptionId: subscription,
                offerName: name, offer: d.offerTerms, newCustomersOnly: d.newCustomersOnly,
                maxRedemptions: d.maxRedemptions,
                expiresAt: d.expiresAt, app: app == DefaultApp.id ? nil : app)
            try Outbox.add(tx, key: command.commandId, command)
        }
    }

    /// The Google Play offers of a new coupon that needs them, one per base plan of each plan
    /// (`basePlans`: each plan's Play product and base plans), and a provision command per offer in
    /// the outbox, in the coupon's own transaction. The offer's id (`StoreIds.playOfferId`, one per
    /// coupon) is its `offer_name`: Google's purchases carry it back with the base plan.
    static func provisionPlay(
        _ tx: PGConnection, couponId: UUID, _ d: CouponDefinition, mode: Mode, app: UUID,
        basePlans: [String: (product: String, basePlans: [String])]
    ) throws {
        for product in d.productIds {
            guard let play = basePlans[product] else { throw ServiceError.internal }
            let offerId = StoreIds.playOfferId(coupon: couponId, code: d.code)
            for basePlan in play.basePlans {
                try tx.query(
                    """
                    INSERT INTO coupons.store_offers (coupon_id, store, product_id, base_plan_id, offer_name) VALUES ($1, 'playStore', $2, $3, $4)
                    """, [couponId, product, basePlan, offerId])
                let command = StoreProvisionCommand(
                    commandId: StoreIds.command(
                        StoreProvisionCommand.type, coupon: couponId, store: .playStore, productId: product,
                        basePlanId: basePlan),
                    couponId: couponId, code: d.code, mode: mode, store: .playStore, productId: product,
                    subscriptionId: play.product,
                    basePlanId: basePlan, offerName: offerId, offer: d.offerTerms, newCustomersOnly: d.newCustomersOnly,
                    maxRedemptions: d.maxRedemptions, expiresAt: d.expiresAt, app: app == DefaultApp.id ? nil : app)
                try Outbox.add(tx, key: command.commandId, command)
            }
        }
    }

    /// The Stripe coupon of a new coupon that covers the web (docs/stripe.md): one row for every
    /// plan (`product_id` ''), its offer name the Stripe coupon's id, and one provision command
    /// carrying the plans' Stripe prices (`prices`: plan → `price_…`), in the coupon's own
    /// transaction. Grants makes the Stripe coupon, then the promotion code with Redeem's code.
    static func provisionStripe(
        _ tx: PGConnection, couponId: UUID, _ d: CouponDefinition, mode: Mode, app: UUID = DefaultApp.id,
        prices: [String: String]
    ) throws {
        let name = StoreIds.offerName(coupon: couponId, store: .stripe, productId: "")
        try tx.query(
            "INSERT INTO coupons.store_offers (coupon_id, store, product_id, offer_name) VALUES ($1, 'stripe', '', $2)",
            [couponId, name])
        let priceIds = d.productIds.compactMap { prices[$0] }
        guard priceIds.count == d.productIds.count else { throw ServiceError.internal }
        let command = StoreProvisionCommand(
            commandId: StoreIds.command(StoreProvisionCommand.type, coupon: couponId, store: .stripe, productId: ""),
            couponId: couponId, code: d.code, mode: mode, store: .stripe, productId: "",
            subscriptionId: priceIds.joined(separator: ","), offerName: name, offer: d.offerTerms,
            newCustomersOnly: d.newCustomersOnly, maxRedemptions: d.maxRedemptions, expiresAt: d.expiresAt,
            app: app == DefaultApp.id ? nil : app)
        try Outbox.add(tx, key: command.commandId, command)
    }

    // MARK: - Read

    /// The offers of `coupons`, by coupon, each list in the order of its plans' product ids.
    static func rows(_ c: PGConnection, coupons: [UUID]) throws -> [UUID: [Row]] {
        guard !coupons.isEmpty else { return [:] }
        let all = try c.query(
            """
            SELECT \(columns) FROM coupons.store_offers o WHERE o.coupon_id = ANY($1::uuid[])
            ORDER BY o.coupon_id, o.store, o.product_id, o.base_plan_id
            """, [PGArray(coupons.map { $0.lowercasedString })]
        ).rows.map(row)
        return Dictionary(grouping: all, by: \.couponId)
    }

    /// The plans of a coupon whose App Store offer is `ready` now: what validate and redeem on iOS
    /// ask, for a coupon with offers only (`has_store_offers`), through `store_offers_of`.
    static func readyProducts(_ c: PGConnection, coupon: UUID, now: Date, settle: TimeInterval) throws -> Set<String> {
        Set(try ready(c, coupon: coupon, now: now, settle: { _ in settle }).plans[.appStore]?.keys ?? [:].keys)
    }

    /// A coupon's offers that are `ready` now, and its plans' App Store codes.
    struct Ready: Sendable {
        /// Per store: plan → its base plans with a ready offer (Google Play; `[""]` for the App Store).
        var plans: [Store: [String: [String]]] = [:]
        /// The App Store custom code of each plan, ready or not.
        var appStoreCodes: [String: String] = [:]
    }

    /// A coupon's offers that are `ready` now. One query, through `store_offers_of`.
    static func ready(_ c: PGConnection, coupon: UUID, now: Date, settle: (Store) -> TimeInterval) throws -> Ready {
        let rows = try c.prepared("store_offers_of", "SELECT \(columns) FROM coupons.store_offers_of($1) o", [coupon])
            .rows.map(row)
        var ready = Ready()
        for r in rows {
            if r.store == .appStore, let code = r.customCode { ready.appStoreCodes[r.productId] = code }
            guard r.state(now: now, settle: settle(r.store)) == .ready else { continue }
            ready.plans[r.store, default: [:]][r.productId, default: []].append(r.basePlanId)
        }
        ready.plans = ready.plans.mapValues { $0.mapValues { $0.sorted() } }
        return ready
    }

    /// The App Store code a client of `plan` is sent with: that plan's; without a plan, the first
    /// ready plan's (by product id); else the coupon's own.
    static func appStoreCode(_ offers: Ready, plan: String?, coupon code: String) -> String {
        if let plan, let own = offers.appStoreCodes[plan] { return own }
        let first = offers.plans[.appStore]?.keys.min()
        return first.flatMap { offers.appStoreCodes[$0] } ?? code
    }

    // MARK: - Grants' reports

    /// What a report makes of a row (nil: nothing changes). The state only moves forward
    /// (`StoreOfferState.rank`); ids and the code's time, once known, stay; a repeat changes nothing.
    static func applying(_ r: Coupons.StoreOfferReport, to row: Row, now: Date) -> Row? {
        var next = row
        if r.state.rank > row.stored.rank {
            next.stored = r.state
            next.message = r.state == .failed ? r.message.map { String($0.prefix(1000)) } : nil
        }
        if next.stored.isWaiting {
            next.offerId = row.offerId ?? r.offerId
            next.customCodeId = row.customCodeId ?? r.customCodeId
            next.codeCreatedAt = row.codeCreatedAt ?? r.codeCreatedAt ?? now
            // What the store left out of the offer (Google: regions in another currency).
            if row.stored != next.stored, let note = r.message { next.message = String(note.prefix(1000)) }
        }
        return next == row ? nil : next
    }

    /// Records grants' report on one offer, and answers the offer as it is now.
    static func report(
        _ tx: PGConnection, _ r: Coupons.StoreOfferReport, now: Date, settle: TimeInterval
    ) throws -> StoreOfferView {
        guard r.state == r.store.waiting || r.state == .failed else {
            throw ServiceError(.invalid, "a report's state is \(r.store.waiting.rawValue) or failed", field: "state")
        }
        guard
            let found = try tx.query(
                """
                SELECT \(columns) FROM coupons.store_offers o
                WHERE o.coupon_id = $1 AND o.store = $2 AND o.product_id = $3 AND o.base_plan_id = $4 FOR UPDATE
                """, [r.couponId, r.store.rawValue, r.productId, r.basePlanId ?? ""]
            ).first
        else {
            throw ServiceError(.notFound, "no store offer of this coupon, store and plan")
        }
        let current = try row(found)
        guard let next = applying(r, to: current, now: now) else { return current.view(now: now, settle: settle) }
        try tx.query(
            """
            UPDATE coupons.store_offers SET state = $4, offer_id = $5, custom_code_id = $6, code_created_at = $7, message = $8, updated_at = now()
            WHERE coupon_id = $1 AND store = $2 AND product_id = $3 AND base_plan_id = $9
            """,
            [
                r.couponId, r.store.rawValue, r.productId, next.stored.rawValue, next.offerId, next.customCodeId,
                next.codeCreatedAt, next.message,
                r.basePlanId ?? ""
            ])
        if next.stored != current.stored { try CouponEvents.storeOffer(tx, next) }
        return next.view(now: now, settle: settle)
    }

    // MARK: - Switching off and on

    /// Asks grants to switch off every offer of the coupon not yet switched off (one command per
    /// offer, in the caller's transaction). Answers how many.
    @discardableResult
    static func switchOff(_ tx: PGConnection, coupon: UUID, reason: StoreSwitchCommand.Reason) throws -> Int {
        let rows = try tx.query(
            """
            UPDATE coupons.store_offers o SET switched_off_at = now(), switch_generation = o.switch_generation + 1, updated_at = now()
            FROM coupons.coupons c
            WHERE o.coupon_id = $1 AND c.id = o.coupon_id AND o.switched_off_at IS NULL
            RETURNING \(columns), o.switch_generation, c.code, c.mode
            """, [coupon]
        ).rows
        try rows.forEach { try command($0, coupon: coupon, active: false, reason: reason, tx) }
        return rows.count
    }

    /// Asks grants to switch back on the offers of a coupon that takes uses again (activated again,
    /// its cap raised or a use given back, its expiry moved): active, started or not, not expired,
    /// with a use left. Only offers whose code was made (not `failed`) switch on; until grants
    /// reports that Apple has them on again they are `creating`, so iOS waits (`notReady`), and if
    /// Apple refuses they are `failed` with Apple's message. Answers how many.
    @discardableResult
    static func switchOnIfOpen(_ tx: PGConnection, coupon: UUID) throws -> Int {
        let rows = try tx.query(
            """
            UPDATE coupons.store_offers o SET switched_off_at = NULL, switch_generation = o.switch_generation + 1, state = 'creating',
                message = NULL, updated_at = now()
            FROM coupons.coupons c
            WHERE o.coupon_id = $1 AND c.id = o.coupon_id AND o.switched_off_at IS NOT NULL AND o.state <> 'failed'
              AND c.active AND (c.expires_at IS NULL OR c.expires_at > now())
              AND (c.max_redemptions IS NULL OR c.used_count < c.max_redemptions)
            RETURNING \(columns), o.switch_generation, c.code, c.mode
            """, [coupon]
        ).rows
        try rows.forEach { try command($0, coupon: coupon, active: true, reason: .reopened, tx) }
        return rows.count
    }

    /// Coupons with offers switched off that take uses again, found by the reservation sweep (a
    /// released reservation gave a use back): switched on, each in its own transaction. Answers
    /// how many offers.
    static func switchOnReopened(_ c: PGConnection) throws -> Int {
        let coupons = try c.query(
            """
            SELECT DISTINCT o.coupon_id FROM coupons.store_offers o JOIN coupons.coupons c ON c.id = o.coupon_id
            WHERE o.switched_off_at IS NOT NULL AND o.state <> 'failed' AND c.active AND (c.expires_at IS NULL OR c.expires_at > now())
              AND (c.max_redemptions IS NULL OR c.used_count < c.max_redemptions) LIMIT 100
            """
        ).rows.map { try $0.decode("coupon_id", as: UUID.self) }
        var n = 0
        for coupon in coupons {
            n += try c.transaction { tx in try switchOnIfOpen(tx, coupon: coupon) }
        }
        return n
    }

    /// The outbox command for one switched row (with `switch_generation`, `code` and `mode`): an
    /// App Store offer names its own custom code.
    private static func command(
        _ r: PGRow, coupon: UUID, active: Bool, reason: StoreSwitchCommand.Reason, _ tx: PGConnection
    ) throws {
        let offer = try row(r)
        let generation = try r.decode("switch_generation", as: Int.self)
        let basePlan = offer.basePlanId.isEmpty ? nil : offer.basePlanId
        let command = StoreSwitchCommand(
            commandId: StoreIds.command(
                StoreSwitchCommand.type, coupon: coupon, store: offer.store, productId: offer.productId,
                basePlanId: basePlan,
                generation: generation),
            couponId: coupon, code: try offer.customCode ?? r.decode("code"),
            mode: Mode(rawValue: try r.decode("mode")) ?? .live, store: offer.store,
            productId: offer.productId, basePlanId: basePlan, offerName: offer.offerName, offerId: offer.offerId,
            customCodeId: offer.customCodeId,
            active: active, generation: generation, reason: reason)
        try Outbox.add(tx, key: command.commandId, command)
    }

    /// The cap is full: switch the offers off, unless a live reservation still waits for its App
    /// Store purchase. Apple refuses a code that is off, so switching it off while reservations
    /// hold the last uses would refuse the very purchases they were made for; the last of them to
    /// complete (or a purchase over the cap) switches the offers off instead, and one released
    /// gives its use back, so the cap is no longer full. Only for a coupon with offers still on.
    /// Answers whether it switched them off.
    @discardableResult
    static func switchOffIfCapFull(_ tx: PGConnection, coupon: UUID) throws -> Bool {
        let full =
            try tx.query(
                """
                SELECT c.max_redemptions IS NOT NULL AND c.used_count >= c.max_redemptions
                       AND EXISTS (SELECT 1 FROM coupons.store_offers o WHERE o.coupon_id = c.id AND o.switched_off_at IS NULL)
                       AND NOT EXISTS (SELECT 1 FROM coupons.redemptions r WHERE r.coupon_id = c.id AND r.app_account_token IS NOT NULL
                                       AND r.status = 'reserved' AND NOT r.sandbox) AS yes
                FROM coupons.coupons c WHERE c.id = $1
                """, [coupon]
            ).first?.decode("yes", as: Bool.self) ?? false
        guard full else { return false }
        return try switchOff(tx, coupon: coupon, reason: .capReached) > 0
    }

    /// Expired coupons whose offers are still on: switched off, each coupon in a transaction of its
    /// own (the reservation sweep calls this). Answers how many offers.
    static func switchOffExpired(_ c: PGConnection) throws -> Int {
        let coupons = try c.query(
            """
            SELECT DISTINCT o.coupon_id FROM coupons.store_offers o JOIN coupons.coupons c ON c.id = o.coupon_id
            WHERE o.switched_off_at IS NULL AND c.expires_at <= now() LIMIT 100
            """
        ).rows.map { try $0.decode("coupon_id", as: UUID.self) }
        var n = 0
        for coupon in coupons {
            n += try c.transaction { tx in try switchOff(tx, coupon: coupon, reason: .expired) }
        }
        return n
    }
}
