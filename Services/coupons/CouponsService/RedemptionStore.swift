import Core
import Database
import Foundation

/// Validation, reservation and the life of a redemption, in SQL. The cap is a
/// conditional update of the coupon's counter and the one-use rule a unique index: concurrent
/// redeemers can't pass either, whatever the Swift code in front of them does.
enum RedemptionStore {
    static let columns = """
        r.id, r.code, r.status, r.platform, r.product_id, r.price_amount, r.price_currency, r.sandbox, r.reserved_at,
        r.completed_at, r.failure_reason, r.entitlement_id, r.entitlement_expires_at, r.account_id, r.app_user_id,
        r.unique_code_last4, (extract(epoch FROM r.reserved_at) * 1000000)::bigint AS reserved_us
        """

    /// Lookups for a batch of accounts (a `uuid[]`), through the functions of migration 7: each
    /// account is joined to its redemptions laterally, one index probe per account, with plans
    /// that each connection keeps. Written as `account_id = ANY($1)`, PostgreSQL read the whole
    /// table for every batch until autovacuum first analyzed it: 28 % of its CPU in a flash sale.
    /// `RedemptionPlanTests` checks that no lookup reads the table sequentially once it has grown.
    enum BatchSQL {
        /// The redemptions of the accounts in `$1` that hold a use of a coupon of code `$2` in app
        /// `$3` (live or test: the caller matches the one it locked). An account is shared by every
        /// app, a coupon is one app's: one use per account and coupon.
        static let heldByAccount = """
            SELECT \(columns), r.coupon_id FROM coupons.held_by_account($1, ARRAY(SELECT id FROM coupons.coupons WHERE code = $2
                AND app_id = $3)) r
            """
        /// The same, of the coupon `$2` (by id: a unique code's).
        static let heldByAccountOfCoupon = """
            SELECT \(columns), r.coupon_id FROM coupons.held_by_account($1, ARRAY[$2::uuid]) r
            """
        /// The accounts of `$1` with a completed live redemption of a coupon of app `$2` (no longer
        /// its new customers: a redemption in another app does not count).
        static let veteransByAccount = "SELECT v AS account_id FROM coupons.veterans_by_account_in_app($1, $2) v"
        /// The coupon of code `$1` in app `$3` and mode `$2`, else in the other mode
        /// (`Coupons.preferredMode`), locked until the transaction ends, and the transaction's time.
        static let lockCoupon = readCoupon + " FOR UPDATE"
        /// The same coupon, not locked: an uncapped coupon's batch takes the lock only when its
        /// statement adds to the counter (`reserve`), next to its commit.
        static let readCoupon = """
            SELECT \(CouponStore.definitionColumns), now() AS tx_now FROM coupons.coupons c
            WHERE c.code = $1 AND c.app_id = $3
            ORDER BY c.mode = $2 DESC LIMIT 1
            """
        /// Locks the coupon `readCoupon` reads when what its batch decides hangs on the counter (a
        /// cap) or on store offers; any other coupon is left unlocked. Sent just before
        /// `readCoupon`, which then reads the locked row as the batch before committed it.
        static let lockCouponIfCapped = """
            SELECT c.id FROM coupons.coupons c
            WHERE c.id = (SELECT p.id FROM coupons.coupons p WHERE p.code = $1 AND p.app_id = $3
                          ORDER BY p.mode = $2 DESC LIMIT 1)
              AND (c.max_redemptions IS NOT NULL OR c.has_store_offers OR c.has_play_offers OR c.has_stripe_offers)
            FOR UPDATE
            """
        /// The coupon `$1` (by id: a unique code's), locked as `lockCoupon` locks it.
        static let lockCouponById = """
            SELECT \(CouponStore.definitionColumns), now() AS tx_now FROM coupons.coupons c WHERE c.id = $1 FOR UPDATE
            """
        /// A batch's new redemptions (`$1`, `$4`–`$9`, `$16`–`$18` by position: a reservation waits
        /// `$10` seconds for its purchase), `$11` uses taken from the coupon's counter, and the grant
        /// commands `$14` of redemptions `$13` in the outbox.
        static let reserve = """
            WITH inserted AS (
                INSERT INTO coupons.redemptions AS r (id, coupon_id, code, account_id, app_user_id, platform, product_id, sandbox, status,
                    reservation_expires_at, app_account_token, unique_code_id, unique_code_last4)
                SELECT u.id, $2, $3, u.account, u.app, u.platform, u.product, u.sandbox, u.status,
                       CASE WHEN u.status = 'reserved' THEN now() + make_interval(secs => $10) END, u.token, u.unique_code, u.last4
                FROM unnest($1::uuid[], $4::uuid[], $5::text[], $6::text[], $7::text[], $8::boolean[], $9::text[], $16::uuid[],
                            $17::bigint[], $18::text[])
                    AS u(id, account, app, platform, product, sandbox, status, token, unique_code, last4)
                RETURNING \(columns)
            ), taken AS (
                UPDATE coupons.coupons SET used_count = used_count + $11 WHERE id = $2 AND $11 > 0
            ), queued AS (
                INSERT INTO coupons.outbox (redemption_id, type, payload, next_attempt_at)
                SELECT o.id, $12, o.payload, now() + make_interval(secs => $15) FROM unnest($13::uuid[], $14::text[]) AS o(id, payload)
            )
            SELECT * FROM inserted
            """
        /// The coupon of code `$1` in app `$3` (of each mode that has one) and, per account of `$2`,
        /// whether it holds a live redemption of it and whether it is no longer a new customer
        /// (asked only of new-customer coupons).
        static let validate = """
            SELECT \(CouponStore.definitionColumns), v.account, v.already, v.not_new
            FROM coupons.validate_standing_in_app($1, $2, $3) v CROSS JOIN LATERAL (SELECT (v.coupon).*) c
            """
    }

    static func view(_ row: PGRow) throws -> RedemptionView {
        let price: Money? = try row.decodeIfPresent("price_amount", as: Decimal.self).map {
            Money(amount: MoneyText.format($0), currency: (try? row.decode("price_currency", as: String.self)) ?? "")
        }
        var entitlement: RedemptionView.Entitlement?
        if let e = try row.decodeIfPresent("entitlement_id", as: String.self),
            let at = try row.decodeIfPresent("entitlement_expires_at", as: Date.self)
        {
            entitlement = .init(entitlementId: e, expiresAt: at)
        }
        var v = RedemptionView(
            redemptionId: try row.decode("id"), code: try row.decode("code"), status: try row.decode("status"),
            platform: try row.decode("platform"), productId: try row.decodeIfPresent("product_id"), pricePaid: price,
            sandbox: try row.decode("sandbox"), reservedAt: try row.decode("reserved_at"),
            completedAt: try row.decodeIfPresent("completed_at"),
            failureReason: try row.decodeIfPresent("failure_reason"),
            entitlement: entitlement, accountId: try row.decodeIfPresent("account_id"),
            appUserId: try row.decodeIfPresent("app_user_id"))
        // Rows of the store paths' own queries may not select it.
        v.uniqueCodeLast4 = (try? row.decodeIfPresent("unique_code_last4", as: String.self)) ?? nil
        return v
    }

    /// What a reservation request came to: its redemption (`created` tells a new one from the
    /// account's existing one) or a refusal. Encoded for the bus by `response()` once its
    /// transaction is over, not while the transaction holds the coupon's row.
    struct Outcome: Sendable {
        var redemption: RedemptionView?
        var created: Bool
        var refusal: RefusalReason?
        /// Nothing reserved: the request must say which Play subscriptions the account holds.
        var asksPlayOwnership = false

        func response() throws -> Coupons.Redeem.Response {
            try Coupons.Redeem.Response(
                redemption: redemption, created: created, refusal: refusal, asksPlayOwnership: asksPlayOwnership)
        }
    }

    /// Validates many requests for one code and environment in one round trip (the service
    /// coalesces concurrent validations by `Coupons.batchKey`): the coupon once, and per distinct
    /// account whether it holds a live redemption of it and whether it is still a new customer.
    /// Every answer comes from a query that started after its request arrived.
    ///
    /// A sandbox validation (or any of a test coupon, whose redemptions are all sandbox) is
    /// answered as a sandbox redemption is decided: no cap, and no live redemption standing in
    /// its way.
    ///
    /// On iOS, a coupon with App Store offers is also `notReady` until one of its plans' offers is
    /// ready, and a valid answer names the ready plans, the offer and Apple's offer-code page. Only
    /// such a coupon costs a query more (its offers, once per batch). A request that names its plan
    /// (`productId`) is refused as redeem would refuse that plan, and handed its page.
    static func validateBatch(
        _ c: PGConnection, _ reqs: [Coupons.Validate], stores: StoreSettings = .none, now: Date
    ) throws
        -> [Coupons.Validate.Response]
    {
        let accounts = PGBinaryArray.uuids(Array(Set(reqs.map(\.accountId))))
        let requestedSandbox = reqs[0].sandbox ?? false
        // Every request of a batch names the same app (`Coupons.batchKey`).
        let app = DefaultApp.of(reqs[0].app)
        let refusedAll = { (reason: RefusalReason) throws -> [Coupons.Validate.Response] in
            let refused = try Coupons.Validate.Response(
                .init(valid: false, reason: reason, coupon: nil, eligibleProductIds: []))
            return reqs.map { _ in refused }
        }
        // A unique code reaches its own coupon, whatever the environment; a coupon's own code, the
        // one of the preferred mode, unless it takes only unique codes.
        var unique: UniqueCodeStore.Found?
        var code = CouponRules.normalizeCode(reqs[0].code)
        switch UniqueCode.read(code) {
        case .mistyped: return try refusedAll(.mistyped)
        case .unique(let typed):
            guard let found = try UniqueCodeStore.find(c, code: typed, app: app) else {
                return try refusedAll(.notFound)
            }
            unique = found
            code = found.couponCode
        case .shared: break
        }
        let all = try c.prepared("validate_standing_in_app", BatchSQL.validate, [code, accounts, app]).rows
        let rows: [PGRow]
        if let unique {
            rows = try all.filter { try $0.decode("id", as: UUID.self) == unique.couponId }
        } else {
            let preferred = Coupons.preferredMode(sandbox: requestedSandbox).rawValue
            let mode =
                try all.contains { try $0.decode("mode", as: String.self) == preferred }
                ? preferred : all.first?.decode("mode", as: String.self)
            rows = try all.filter { try $0.decode("mode", as: String.self) == mode }
        }
        guard let coupon = rows.first else { return try refusedAll(.notFound) }
        let mode = try coupon.decode("mode", as: String.self) as String?
        let d = try CouponStore.definition(coupon)
        if unique == nil && d.hasUniqueCodes { return try refusedAll(.notFound) }
        let active = try coupon.decode("active", as: Bool.self)
        let used = try coupon.decode("used_count", as: Int.self)
        let sandbox = requestedSandbox || mode == Mode.test.rawValue
        let publicView = CouponStore.publicView(d)
        var already = Set<UUID>(), notNew = Set<UUID>()
        for row in rows {
            let account = try row.decode("account", as: UUID.self)
            if try row.decode("already", as: Bool.self) { already.insert(account) }
            if try row.decode("not_new", as: Bool.self) { notNew.insert(account) }
        }
        let couponId = try coupon.decode("id", as: UUID.self)
        // Another app's page names its own Apple id, of the coupon's mode.
        let stores =
            reqs.contains { d.store(through: $0.platform) == .appStore }
            ? try stores.forMode(mode.flatMap(Mode.init(rawValue:)) ?? .live) : stores
        let offers =
            try reqs.contains(where: { d.store(through: $0.platform) != nil })
            ? StoreOffers.ready(c, coupon: couponId, now: now, settle: stores.settle) : StoreOffers.Ready()
        let ready = offers.plans
        let owning = try PlayOwnership(
            c, d, mode: mode.flatMap(Mode.init(rawValue:)) ?? .live, app: app, reqs.map { ($0.platform, $0.playOwned) })
        // Answers differ only by reason (and, valid, by the store they hand off to and the plans
        // the account already holds there), so each is encoded once per batch.
        struct Key: Hashable {
            let reason: RefusalReason?
            let store: Store?
            let owned: Set<String>
            let asks: Bool
            let plan: String?
        }
        var answers: [Key: Coupons.Validate.Response] = [:]
        func answer(
            _ reason: RefusalReason?, store: Store?, owned: Set<String> = [], asks: Bool = false, plan: String? = nil
        ) throws -> Coupons.Validate.Response {
            let key = Key(
                reason: reason, store: reason == nil ? store : nil, owned: reason == nil ? owned : [],
                asks: reason == nil && asks, plan: reason == nil && store == .appStore ? plan : nil)
            if let known = answers[key] { return known }
            var a = Coupons.Validate.Answer(
                valid: reason == nil, reason: reason, coupon: publicView, eligibleProductIds: d.productIds)
            if let store = key.store {
                let plans = (ready[store] ?? [:]).filter { !key.owned.contains($0.key) }
                a.eligibleProductIds = d.productIds.filter { plans[$0] != nil }
                a.offer = d.offerTerms
                switch store {
                case .appStore:
                    a.appStore = stores.appStoreHandoff(
                        codes: offers.appStoreCodes.filter { plans[$0.key] != nil }, coupon: d.code, plan: key.plan)
                case .playStore:
                    a.basePlanIds = plans
                    a.playStore = PlayStoreHandoff(
                        offerId: StoreIds.playOfferId(coupon: couponId, code: d.code),
                        offerTags: [PlayStoreHandoff.couponTag])
                case .stripe: break  // the web's checkout is not a validate answer
                }
            }
            let new = try Coupons.Validate.Response(a, asksPlayOwnership: key.asks)
            answers[key] = new
            return new
        }
        return try reqs.map { req in
            // Held by another redemption: used, unless it is this account's own (then the rules
            // answer `alreadyRedeemed`, as for the coupon's own code).
            if let unique, unique.held, unique.holder != req.accountId {
                return try answer(.codeUsed, store: nil)
            }
            let store = d.store(through: req.platform)
            let owned = owning.plans(through: store, req.playOwned)
            switch try RedemptionRules.decide(
                .init(
                    coupon: d, active: active, platform: req.platform, productId: req.productId, resolveProduct: false,
                    holdsUse: !sandbox && already.contains(req.accountId), veteran: notNew.contains(req.accountId),
                    usesTaken: sandbox ? nil : used, readyProducts: store.map { Set((ready[$0] ?? [:]).keys) },
                    ownedProducts: owned, now: now))
            {
            case .refuse(let reason): return try answer(reason, store: store)
            case .reserve:
                return try answer(
                    nil, store: store, owned: owned ?? [], asks: owning.asks(through: store, req.playOwned),
                    plan: req.productId)
            }
        }
    }

    // MARK: - After the reservation

    /// A redemption, if `account` (when given) owns it and its coupon is of `mode` and `app` (when
    /// given: an operator's read).
    static func get(_ c: PGConnection, id: UUID, account: UUID?, mode: Mode?, app: UUID?) throws -> RedemptionView {
        guard
            let row = try c.query(
                """
                SELECT \(columns) FROM coupons.redemptions r
                WHERE r.id = $1 AND ($2::uuid IS NULL OR r.account_id = $2::uuid)
                  AND ($3::text IS NULL OR EXISTS (SELECT 1 FROM coupons.coupons c WHERE c.id = r.coupon_id AND c.mode = $3::text
                                                   AND c.app_id = $4::uuid))
                """, [id, account, mode?.rawValue, app]
            ).first
        else {
            throw ServiceError(.notFound, "no such redemption")
        }
        return try view(row)
    }

    static func forAccount(_ c: PGConnection, _ req: Coupons.MyRedemptions) throws -> Coupons.MyRedemptions.Response {
        let keyset = try Keyset(limit: req.limit, cursor: req.cursor)
        let rows = try c.query(
            """
            SELECT \(columns) FROM coupons.redemptions r
            WHERE r.account_id = $1 AND \(Keyset.condition(time: "r.reserved_at", id: "r.id", parameter: 2))
              AND EXISTS (SELECT 1 FROM coupons.coupons c WHERE c.id = r.coupon_id AND c.app_id = $6::uuid
                          AND ($5::text IS NULL OR c.mode = $5::text))
            ORDER BY r.reserved_at DESC, r.id DESC LIMIT $4
            """,
            [
                req.accountId, keyset.afterMicros, keyset.afterId, keyset.fetch, req.mode?.rawValue,
                DefaultApp.of(req.app)
            ]
        ).rows
        return try keyset.page(rows, micros: "reserved_us", view)
    }

    static func page(_ c: PGConnection, _ req: Coupons.Redemptions) throws -> Coupons.Redemptions.Response {
        let keyset = try Keyset(limit: req.limit, cursor: req.cursor, maxLimit: Coupons.Redemptions.maxLimit)
        guard let coupon = try CouponStore.findDefinition(c, code: req.code, mode: Mode.of(req.mode),
            app: DefaultApp.of(req.app)) else {
            throw CouponStore.notFound
        }
        let order = req.oldestFirst ? "ASC" : "DESC"
        let rows = try c.query(
            """
            SELECT \(columns) FROM coupons.redemptions r
            WHERE r.coupon_id = $1 AND \(Keyset.condition(time: "r.reserved_at", id: "r.id", parameter: 2, ascending: req.oldestFirst))
            ORDER BY r.reserved_at \(order), r.id \(order) LIMIT $4
            """, [try coupon.decode("id", as: UUID.self), keyset.afterMicros, keyset.afterId, keyset.fetch]
        ).rows
        return try keyset.page(rows, micros: "reserved_us", view)
    }

    /// Ends a held redemption and gives its use back (live only), in one statement.
    @discardableResult
    static func end(_ c: PGConnection, id: UUID, status: RedemptionStatus, reason: String?) throws -> Bool {
        try c.query(
            """
            WITH ended AS (
                UPDATE coupons.redemptions SET status = $2, failure_reason = $3, ended_at = now(), reservation_expires_at = NULL
                WHERE id = $1 AND status IN ('reserved', 'granting') RETURNING coupon_id, sandbox
            )
            UPDATE coupons.coupons c SET used_count = c.used_count - 1 FROM ended
            WHERE c.id = ended.coupon_id AND NOT ended.sandbox RETURNING c.id
            """, [id, status, reason]
        ).first != nil
    }

    /// The owner's app gives its reservation back (`Coupons.GiveBack`): it ends `released` with the
    /// reason, and its use goes back to the coupon, which may switch its offers back on.
    static func giveBack(_ tx: PGConnection, _ req: Coupons.GiveBack) throws -> RedemptionView {
        let current = try get(tx, id: req.id, account: req.accountId, mode: nil, app: nil)
        guard current.status == .reserved else {
            throw ServiceError(
                .invalidState, "only a reserved redemption can be given back; this one is \(current.status.rawValue)")
        }
        let why =
            switch req.reason {
            case .alreadyOwned: "alreadyOwned: the store account already owns the plan"
            }
        guard try end(tx, id: req.id, status: .released, reason: why) || current.sandbox else {
            throw ServiceError(.invalidState, "the redemption ended meanwhile")
        }
        if let coupon = try tx.query("SELECT coupon_id FROM coupons.redemptions WHERE id = $1", [req.id]).first?.decode(
            "coupon_id", as: UUID.self)
        {
            try StoreOffers.switchOnIfOpen(tx, coupon: coupon)
        }
        try CouponEvents.released(tx, [req.id])
        return try get(tx, id: req.id, account: req.accountId, mode: nil, app: nil)
    }

    /// A deleted account's redemptions stay, so caps still count their uses, but name no account
    /// and no appUserId. Its reservations still waiting for a store purchase end first (`released`),
    /// giving their uses back: nobody is left to buy. A free period being granted keeps its use and
    /// completes. Idempotent; answers how many redemptions it took the account off.
    static func forget(_ tx: PGConnection, account: UUID) throws -> Int {
        let released = try tx.query(
            """
            UPDATE coupons.redemptions SET status = 'released', ended_at = now(), reservation_expires_at = NULL,
                failure_reason = 'its account was deleted'
            WHERE account_id = $1 AND status = 'reserved' RETURNING id, coupon_id, sandbox
            """, [account]
        ).rows
        for row in released where !(try row.decode("sandbox", as: Bool.self)) {
            let coupon = try row.decode("coupon_id", as: UUID.self)
            try tx.query("UPDATE coupons.coupons SET used_count = used_count - 1 WHERE id = $1", [coupon])
            _ = try StoreOffers.switchOnIfOpen(tx, coupon: coupon)
        }
        let forgotten = try tx.query(
            """
            UPDATE coupons.redemptions SET account_id = NULL, app_user_id = NULL WHERE account_id = $1 RETURNING id
            """, [account]
        ).rows.count
        // Announced once they name nobody.
        try CouponEvents.released(tx, try released.map { try $0.decode("id", as: UUID.self) })
        return forgotten
    }

    /// Releases discount reservations whose purchase did not come in time, with their
    /// `redemption.released` events. Answers how many.
    static func releaseExpired(_ c: PGConnection) throws -> Int {
        try c.transaction { tx in
            let ids = try tx.query(
                """
                WITH released AS (
                    UPDATE coupons.redemptions SET status = 'released', ended_at = now(), failure_reason = 'purchase not confirmed in time',
                        reservation_expires_at = NULL
                    WHERE status = 'reserved' AND reservation_expires_at <= now() RETURNING id, coupon_id, sandbox
                ), counts AS (
                    SELECT coupon_id, count(*) AS n FROM released WHERE NOT sandbox GROUP BY coupon_id
                ), given_back AS (
                    UPDATE coupons.coupons c SET used_count = c.used_count - counts.n FROM counts WHERE c.id = counts.coupon_id
                )
                SELECT id FROM released
                """
            ).rows.map { try $0.decode("id", as: UUID.self) }
            try CouponEvents.released(tx, ids)
            return ids.count
        }
    }

    /// Completes granted redemptions (a repeat changes nothing), through `complete_many_at`
    /// (migrations 8 and 9). The rows are found by primary key alone: a status condition would let the
    /// planner read the whole one-use index instead, which statistics lagging behind a burst of
    /// inserts make look tiny. No indexed column changes, so each row is updated in place on its
    /// page (migration 6).
    /// Answers when each completed redemption was completed (by id, as JSON writes ids).
    static func completeMany(_ c: PGConnection, _ items: [Coupons.CompleteMany.Item]) throws -> [String: Date] {
        guard !items.isEmpty else { return [:] }
        let rows = try c.prepared(
            "complete_many_at", "SELECT id, completed_at FROM coupons.complete_many_at($1, $2, $3)",
            [
                PGBinaryArray.uuids(items.map(\.redemptionId)),
                PGBinaryArray.texts(items.map(\.entitlement.entitlementId)),
                PGBinaryArray.timestamps(items.map(\.entitlement.expiresAt))
            ]
        ).rows
        var times: [String: Date] = [:]
        for row in rows {
            guard let at = try row.decodeIfPresent("completed_at", as: Date.self) else { continue }
            times[try row.decode("id", as: UUID.self).uppercasedString] = at
        }
        return times
    }

    /// Confirms the store purchase of a discount redemption: idempotent per `storeTransactionId`.
    static func purchase(_ tx: PGConnection, _ req: Coupons.Purchase) throws -> RedemptionView {
        let (amount, currency) = try CouponRules.checkMoney(req.pricePaid, field: "pricePaid", allowZero: true)
        let txn = req.storeTransactionId.trimmingCharacters(in: .whitespaces)
        guard (1...200).contains(txn.count) else {
            throw ServiceError(.invalid, "storeTransactionId must be 1 to 200 characters", field: "storeTransactionId")
        }
        let mode = Mode.of(req.mode)
        guard
            let row = try tx.query(
                """
                SELECT r.status, r.store_transaction_id, r.coupon_id, c.kind FROM coupons.redemptions r JOIN coupons.coupons c ON c.id = r.coupon_id
                WHERE r.id = $1 AND c.mode = $2 AND c.app_id = $3 FOR UPDATE OF r
                """, [req.id, mode.rawValue, DefaultApp.of(req.app)]
            ).first
        else { throw ServiceError(.notFound, "no such redemption") }
        let status = try row.decode("status", as: RedemptionStatus.self)
        let existing = try row.decodeIfPresent("store_transaction_id", as: String.self)
        // A repeat.
        if status == .completed, existing == txn { return try get(tx, id: req.id, account: nil, mode: nil, app: nil) }
        guard try row.decode("kind", as: CouponKind.self).isDiscount, status == .reserved else {
            throw ServiceError(
                .invalidState, "only a reserved discount redemption can be confirmed (this one is \(status.rawValue))")
        }
        do {
            try tx.query(
                """
                UPDATE coupons.redemptions SET status = 'completed', completed_at = now(), price_amount = $2::numeric,
                    price_currency = $3, store_transaction_id = $4, reservation_expires_at = NULL
                WHERE id = $1
                """, [req.id, amount, currency, txn])
        } catch let e as PGError where e.isUniqueViolation {
            throw ServiceError(
                .transactionInUse, "this store transaction confirmed another redemption", field: "storeTransactionId")
        }
        let done = try get(tx, id: req.id, account: nil, mode: nil, app: nil)
        // coupon.redeemed goes out for discounts too: grants sends it, reached through the outbox.
        // The definition only: counting the coupon's redemptions would cost a scan of them all.
        guard let coupon = try CouponStore.findDefinition(tx, id: try row.decode("coupon_id")) else {
            throw ServiceError.internal
        }
        try Outbox.add(
            tx, key: req.id,
            RedemptionCompletedNotice(
                redemption: done, coupon: try CouponStore.publicView(coupon), mode: mode,
                app: try CouponStore.app(coupon)))
        if try coupon.decode("has_store_offers", as: Bool.self) || coupon.decode("has_play_offers", as: Bool.self)
            || coupon.decode("has_stripe_offers", as: Bool.self)
        {
            try StoreOffers.switchOffIfCapFull(tx, coupon: try row.decode("coupon_id"))
        }
        return done
    }
}

// MARK: - Group commit

extension RedemptionStore {
    /// Reserves for many requests of one coupon in one transaction (`RedemptionRules`, in order, per
    /// request). With `lockFirst`, or for a coupon with a cap or store offers, the coupon row is
    /// locked first, so batches of one coupon — from any instance — run one after another and each
    /// sees the uses the one before took; the counter's CHECK and the unique index still stand
    /// behind every decision.
    ///
    /// Otherwise (a shared code of a coupon with neither: the flash sale's usual coupon), the coupon
    /// and the held uses are read without the lock, and only the statement that writes takes it, as
    /// it adds to the counter, to the commit: the next batch reads and plans while this one
    /// commits, instead of after. Nothing it decides hangs on the counter, and a use another batch
    /// took for one of its accounts meanwhile fails the write on the one-use index
    /// (`PGError.isUniqueViolation`): the caller then commits the batch again with `lockFirst`,
    /// which answers that use (`ReservationBatcher`).
    ///
    /// Grant commands go to the outbox due `resendAfter` seconds from now and are answered too:
    /// the caller pushes them once the transaction commits, and the relay's sweep re-sends any
    /// grants has not acknowledged by then (after a crash, say).
    ///
    /// A batch makes two round trips: BEGIN, the coupon (locked or not) and the held uses in one;
    /// one statement that writes the redemptions, the counter and the outbox, with the COMMIT, in
    /// the other (and one more for new-customer coupons).
    /// Commands are encoded before that statement, with the transaction's `now()`, which is the
    /// new rows' `reserved_at`.
    ///
    /// On iOS, a coupon with App Store offers costs one more round trip (its offers' states), is
    /// `notReady` until the product's offer is ready, and reserves a use that waits for a verified
    /// App Store purchase (`reserved`, with the account's `appAccountToken`, no grant), answered
    /// with the hand-off to Apple's offer-code page. A batch that fills such a coupon's cap may
    /// switch its offers off (`StoreOffers.switchOffIfCapFull`), before its commit.
    static func redeemBatch(
        _ tx: PGConnection, _ reqs: [Coupons.Redeem], reservationTTL: TimeInterval, resendAfter: TimeInterval,
        stores: StoreSettings = .none, lockFirst: Bool = true, now: Date
    ) throws -> (results: [Result<Outcome, any Error>], commands: [OutboxMessage]) {
        let refused = { (reason: RefusalReason) -> Result<Outcome, any Error> in
            .success(.init(redemption: nil, created: false, refusal: reason))
        }
        let accounts = PGBinaryArray.uuids(Array(Set(reqs.map(\.accountId))))
        // One probe per account of the one-use index, by account and the batch's coupon, in a
        // function whose plan cannot turn into a scan of every redemption of the coupon
        // (statistics lag behind a flash sale's inserts: `RedemptionPlanTests`), nor read every
        // earlier redemption of the account (a customer's history costs nothing). With the lock
        // first, the lookup runs after the lock is granted, so it sees every use the batch before
        // took.
        // Every request of a batch has the same code, environment and app (`Coupons.batchKey`), so
        // they reach the same coupon.
        // A unique code reaches its own coupon (by id), and whether a redemption holds the code is
        // read after the lock, with the rest.
        var unique: UniqueCodeStore.Found?
        let app = DefaultApp.of(reqs[0].app)
        var statements: [PGConnection.PreparedStatement] = [
            (
                lockFirst ? "coupon_lock_preferred" : "coupon_read_preferred",
                lockFirst ? BatchSQL.lockCoupon : BatchSQL.readCoupon,
                [
                    CouponRules.normalizeCode(reqs[0].code), Coupons.preferredMode(sandbox: reqs[0].sandbox).rawValue,
                    app
                ]
            ),
            ("held_by_account", BatchSQL.heldByAccount, [accounts, CouponRules.normalizeCode(reqs[0].code), app])
        ]
        switch UniqueCode.read(reqs[0].code) {
        case .mistyped: return (reqs.map { _ in refused(.mistyped) }, [])
        case .unique(let typed):
            guard let found = try UniqueCodeStore.find(tx, code: typed, app: app) else {
                return (reqs.map { _ in refused(.notFound) }, [])
            }
            unique = found
            statements[0] = ("coupon_lock_by_id", BatchSQL.lockCouponById, [found.couponId])
            statements[1] = ("held_by_account_of_coupon", BatchSQL.heldByAccountOfCoupon, [accounts, found.couponId])
            statements.append(("unique_code_holder", UniqueCodeStore.holderSQL, [found.id]))
        case .shared: break
        }
        // A cap, or store offers (whose cap waits for their purchases), is decided under the lock,
        // taken in the same round trip before the coupon is read.
        let locksIfCapped = !lockFirst && unique == nil
        if locksIfCapped {
            statements.insert(("coupon_lock_if_capped", BatchSQL.lockCouponIfCapped, statements[0].params), at: 0)
        }
        var lookups = try tx.prepared(statements)
        if locksIfCapped { lookups.removeFirst() }
        guard let coupon = lookups[0].first else {
            return (reqs.map { _ in refused(.notFound) }, [])
        }
        let reservedAt = try coupon.decode("tx_now", as: Date.self)  // now() in the transaction: every new row's reserved_at
        let d = try CouponStore.definition(coupon)
        let couponId = try coupon.decode("id", as: UUID.self)
        let mode = Mode(rawValue: try coupon.decode("mode", as: String.self)) ?? .live
        let active = try coupon.decode("active", as: Bool.self)
        // A coupon with unique codes is redeemed only with one of them.
        if unique == nil && d.hasUniqueCodes { return (reqs.map { _ in refused(.notFound) }, []) }
        var inputs = ReservationPlan.Inputs(
            coupon: d, active: active, testCoupon: mode == .test, used: try coupon.decode("used_count"), now: now)
        if let unique {
            inputs.uniqueCode = .init(id: unique.id, last4: unique.last4, held: !lookups[2].rows.isEmpty)
        }
        for row in lookups[1].rows where try row.decode("coupon_id", as: UUID.self) == couponId {
            let v = try view(row)
            guard let account = v.accountId else { continue }
            inputs.existing[.init(account: account, sandbox: v.sandbox)] = v
        }
        // Another app's page names its own Apple id, of the coupon's mode.
        let stores = reqs.contains { d.store(through: $0.platform) == .appStore } ? try stores.forMode(mode) : stores
        var offers = StoreOffers.Ready()
        if reqs.contains(where: { d.store(through: $0.platform) != nil }) {
            offers = try StoreOffers.ready(tx, coupon: couponId, now: now, settle: stores.settle)
            inputs.ready = offers.plans
        }
        /// What a client of a coupon with store offers is handed with its redemption: on iOS Apple's
        /// offer-code page with the plan's code and the account's token, on Android the offer and
        /// the account's obfuscated id.
        func handingOff(_ v: RedemptionView) -> RedemptionView {
            guard let account = v.accountId else { return v }
            var v = v
            switch d.store(through: v.platform) {
            case .appStore?:
                guard
                    let url = stores.redemptionURL(
                        code: StoreOffers.appStoreCode(offers, plan: v.productId, coupon: d.code))
                else { return v }
                v.appStore = AppStoreHandoff(
                    redemptionUrl: url, appAccountToken: StoreIds.appAccountToken(account: account))
            case .playStore?:
                v.playStore = PlayStoreHandoff(
                    offerId: StoreIds.playOfferId(coupon: couponId, code: d.code),
                    offerTags: [PlayStoreHandoff.couponTag],
                    obfuscatedAccountId: StoreIds.obfuscatedAccountId(account: account))
            case .stripe?, nil: break
            }
            return v
        }
        inputs.owning = try PlayOwnership(tx, d, mode: mode, app: app, reqs.map { ($0.platform, $0.playOwned) })
        if d.newCustomersOnly {
            let veterans = try tx.prepared(
                "veterans_by_account_in_app", BatchSQL.veteransByAccount, [accounts, try CouponStore.app(coupon)])
            for row in veterans.rows {
                inputs.veterans.insert(try row.decode("account_id"))
            }
        }

        let plan = ReservationPlan(inputs, requests: reqs)
        let fresh = plan.fresh
        func results(_ views: [UUID: RedemptionView]) -> [Result<Outcome, any Error>] {
            plan.steps.map { step in
                switch step {
                case .existing(let e): .success(.init(redemption: handingOff(e), created: false))
                case .refused(let reason): refused(reason)
                case .asksPlayOwnership: .success(.init(redemption: nil, created: false, asksPlayOwnership: true))
                case .failed(let error): .failure(error)
                case .new(let n):
                    views[fresh[n].id].map { .success(.init(redemption: handingOff($0), created: true)) }
                        ?? .failure(ServiceError.internal)
                case .twin(let n): .success(.init(redemption: views[fresh[n].id].map(handingOff), created: false))
                }
            }
        }
        guard !fresh.isEmpty else { return (results([:]), []) }

        var ids: [UUID] = [], payloads: [String] = [], envelopes: [Envelope<GrantCommand>] = []
        if let entitlement = d.entitlementId {
            let publicCoupon = CouponStore.publicView(d)
            for n in fresh where n.status == .granting {
                let command = GrantCommand(
                    redemptionId: n.id, accountId: n.request.accountId, appUserId: n.request.appUserId,
                    entitlementId: entitlement,
                    duration: d.duration, sandbox: n.sandbox, coupon: publicCoupon, platform: n.request.platform,
                    productId: n.productId, reservedAt: reservedAt, mode: mode, app: app)
                let envelope = Envelope(
                    id: UUID.random().lowercasedString, type: GrantCommand.type,
                    traceparent: n.request.traceparent ?? LogContext.trace?.traceparent, body: command)
                ids.append(n.id)
                payloads.append(String(decoding: try JSONEncoder.bus.encode(envelope), as: UTF8.self))
                envelopes.append(envelope)
            }
        }
        let live = plan.live
        // Every use that goes through a store carries the account's token: Apple's notification
        // finds its reservation by it, and a full cap waits for every reservation that has one.
        let tokens = fresh.map {
            d.store(through: $0.request.platform) != nil
                ? StoreIds.appAccountToken(account: $0.request.accountId) : nil
        }
        let statement: PGConnection.PreparedStatement = (
            "reserve_batch", BatchSQL.reserve,
            [
                PGBinaryArray.uuids(fresh.map(\.id)), couponId, d.code,
                PGBinaryArray.uuids(fresh.map(\.request.accountId)),
                PGBinaryArray.texts(fresh.map(\.request.appUserId)),
                PGBinaryArray.texts(fresh.map(\.request.platform.rawValue)),
                PGBinaryArray.texts(fresh.map(\.productId)),
                PGBinaryArray.bools(fresh.map(\.sandbox)), PGBinaryArray.texts(fresh.map(\.status.rawValue)), reservationTTL,
                live.count, GrantCommand.type, PGBinaryArray.uuids(ids), PGBinaryArray.texts(payloads), resendAfter,
                PGBinaryArray.uuids(tokens), PGBinaryArray.int8s(fresh.map { $0.uniqueCode.map(\.id) }),
                PGBinaryArray.texts(fresh.map { $0.uniqueCode?.last4 })
            ]
        )
        // The cap fills with this batch, and none of its uses waits for the App Store (those keep
        // the offers on until they end): the offers may go off, in this transaction. Rare, so the
        // commit travels with the statement otherwise.
        let mayFillCap =
            d.hasAnyStoreOffers && !live.isEmpty && d.maxRedemptions.map { plan.used >= $0 } == true
            && !live.contains { d.store(through: $0.request.platform) != nil }
        // This batch takes the cap's last use: `coupon.exhausted` goes in the same transaction.
        let fillsCap = !live.isEmpty && d.maxRedemptions.map { plan.used >= $0 && inputs.used < $0 } == true
        let rows: [PGRow]
        if mayFillCap || fillsCap {
            rows = try tx.prepared([statement])[0].rows
            if mayFillCap { try StoreOffers.switchOffIfCapFull(tx, coupon: couponId) }
            if fillsCap { try CouponEvents.exhaustedIfFull(tx, coupon: couponId) }
        } else {
            rows = try tx.preparedThenCommit([statement])[0].rows
        }
        var views: [UUID: RedemptionView] = [:]
        for row in rows {
            let v = try view(row)
            views[v.redemptionId] = v
        }
        guard fresh.allSatisfy({ views[$0.id] != nil }) else { throw ServiceError.internal }
        return (results(views), zip(payloads, envelopes).map { OutboxMessage(json: $0, envelope: $1) })
    }
}
