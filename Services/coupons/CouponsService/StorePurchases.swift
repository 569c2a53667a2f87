import Core
import Database
import Foundation

/// Completion from a verified store purchase (docs/stores.md, flow step 4), in one transaction:
///
/// 1. the notification is recorded; a repeat stops here and is answered the chain's redemption;
/// 2. the purchase chain (`store`, `originalTransactionId`) gets its one `store_purchases` row; a
///    chain already recorded (a renewal, the app's post after Apple's notification) changes
///    nothing, except that an unattributed one becomes the account now known (completing its
///    reservation, when it holds one);
/// 3. the offer is found by its name (`offerIdentifier`), and with it the coupon and the plan;
/// 4. the account is the posting one (its redemption's, or the one signed in), else the one whose
///    `appAccountToken` the transaction carries;
/// 5. that account's reservation of the coupon in the purchase's environment completes (a sandbox
///    purchase completes only a sandbox one, and leaves a live one as it is); without one, a
///    completed redemption is made, unattributed without an account, counted toward the cap, and
///    over the cap (never refused) when it is full;
/// 6. `coupon.redeemed` goes to the outbox, once per chain (the chain's row names one redemption).
///
/// Locks are taken in one order, the coupon's row first: purchases of one coupon (and its
/// reservation batches) run one after another, so two deliveries of one chain can't both record it.
enum StorePurchases {
    typealias Response = Coupons.StorePurchase.Response

    /// The request's fields a client or store could get wrong, checked before anything is read.
    static func check(_ req: Coupons.StorePurchase) throws {
        let t = req.transaction
        for (field, value) in [
            ("transactionId", t.transactionId), ("originalTransactionId", t.originalTransactionId),
            ("productId", t.productId)
        ]
        where !(1...200).contains(value.utf8.count) {
            throw ServiceError(.invalid, "\(field) must be 1 to 200 characters", field: field)
        }
        if let n = req.notificationUUID, !(1...100).contains(n.utf8.count) {
            throw ServiceError(.invalid, "notificationUUID must be 1 to 100 characters", field: "notificationUUID")
        }
        if req.accountId != nil, req.appUserId == nil {
            throw ServiceError(.invalid, "a posting account comes with its appUserId", field: "appUserId")
        }
    }

    /// What the transaction paid, as the redemption stores it: milliunits to a decimal amount
    /// (9990 → 9.99; the column keeps 2 decimals, the purchase row the exact milliunits), with
    /// its currency; nil when either is missing or not a currency code.
    static func price(_ t: VerifiedStoreTransaction) -> (amount: Decimal, currency: String)? {
        guard let milli = t.priceMilliunits, milli >= 0, let currency = t.currency, currency.count == 3,
            currency.unicodeScalars.allSatisfy({ ("A"..."Z").contains($0) })
        else { return nil }
        return (Decimal(milli) / 1000, currency)
    }

    static func record(_ tx: PGConnection, _ request: Coupons.StorePurchase, now: Date) throws -> Response {
        try check(request)
        let req = try PlayPurchases.joiningItsChain(tx, request)
        let t = req.transaction
        if let uuid = req.notificationUUID {
            let fresh = try tx.query(
                "INSERT INTO coupons.store_notifications (notification_uuid) VALUES ($1) ON CONFLICT DO NOTHING", [uuid]
            )
            if fresh.affectedRows == 0 {
                guard let known = try chainRedemption(tx, t) else {
                    throw ServiceError(.notFound, "this notification's purchase is not recorded")
                }
                return Response(
                    redemption: try RedemptionStore.get(tx, id: known, account: nil, mode: nil, app: nil), created: false)
            }
        }
        // A chain already recorded names its coupon; a new one's offer does.
        let couponId: UUID, productId: String
        if let chain = try tx.query(
            "SELECT coupon_id, product_id FROM coupons.store_purchases WHERE store = $1 AND original_transaction_id = $2",
            [t.store.rawValue, t.originalTransactionId]
        ).first {
            (couponId, productId) = (try chain.decode("coupon_id"), try chain.decode("product_id"))
        } else {
            if let type = t.offerType, type != VerifiedStoreTransaction.offerCode {
                throw ServiceError(.invalid, "this purchase used no offer code (offerType \(type))", field: "offerType")
            }
            guard let name = t.offerIdentifier,
                let offer = try tx.query(
                    """
                    SELECT coupon_id, product_id FROM coupons.store_offers WHERE offer_name = $1 AND store = $2 AND base_plan_id = $3 LIMIT 1
                    """, [name, t.store.rawValue, t.basePlanId ?? ""]
                ).first
            else {
                throw ServiceError(.invalid, "this purchase used no offer of Redeem's", field: "offerIdentifier")
            }
            (couponId, productId) = (try offer.decode("coupon_id"), try offer.decode("product_id"))
        }
        guard
            let coupon = try tx.query(
                """
                SELECT \(CouponStore.definitionColumns) FROM coupons.coupons c WHERE c.id = $1 FOR UPDATE
                """, [couponId]
            ).first
        else { throw ServiceError.internal }
        let mode = Mode(rawValue: try coupon.decode("mode", as: String.self)) ?? .live
        guard completes(coupon: mode, simulated: req.simulated ?? false) else {
            let why =
                req.simulated == true
                ? "the simulated store completes test redemptions only"
                : "this purchase used no offer of Redeem's live mode (a test coupon's offers are simulated)"
            throw ServiceError(.invalid, why, field: "offerIdentifier")
        }
        try PlayPurchases.checkApp(t, read: req, coupon: try CouponStore.app(coupon))
        let account = try self.account(tx, req, coupon: couponId)
        try PlayPurchases.checkAccount(t, posted: req.accountId != nil ? account : nil)
        try checkToken(t, posted: req.accountId != nil ? account : nil)
        if let chain = try tx.query(
            """
            SELECT redemption_id, over_cap FROM coupons.store_purchases WHERE store = $1 AND original_transaction_id = $2 FOR UPDATE
            """, [t.store.rawValue, t.originalTransactionId]
        ).first {
            return try existing(tx, chain: chain, account: account, posted: req.accountId != nil)
        }
        return try recordChain(tx, t, coupon: coupon, productId: productId, account: account)
    }

    /// An App Store purchase the app posts must not name another account: its `appAccountToken`,
    /// when it has one, is the posting account's (422 on `signedTransaction` otherwise). Without
    /// this, someone holding another buyer's transaction id would complete their own reservation
    /// with it, and the buyer's own post would then be refused as `transactionInUse`.
    static func checkToken(_ t: VerifiedStoreTransaction, posted account: Account?) throws {
        guard t.store == .appStore, let account, let token = t.appAccountToken else { return }
        guard token == StoreIds.appAccountToken(account: account.id) else {
            throw ServiceError(
                .invalid, "this purchase was not made for this account (its appAccountToken is another's)",
                field: "signedTransaction")
        }
    }

    /// Which purchases complete which coupons' redemptions (docs/security.md, "Test mode"): what a
    /// store signed (Apple's JWS, a purchase read from Google) a live coupon's only, since a test
    /// coupon's offers are simulated and no store sold them; the simulated store of test mode (the
    /// test helper) a test coupon's only.
    static func completes(coupon mode: Mode, simulated: Bool) -> Bool {
        switch mode {
        case .live: !simulated
        case .test: simulated
        }
    }

    /// The redemption of a chain already recorded.
    static func chainRedemption(_ c: PGConnection, _ t: VerifiedStoreTransaction) throws -> UUID? {
        try c.query(
            "SELECT redemption_id FROM coupons.store_purchases WHERE store = $1 AND original_transaction_id = $2",
            [t.store.rawValue, t.originalTransactionId]
        ).first?.decode("redemption_id")
    }

    /// An account a purchase belongs to.
    struct Account {
        let id: UUID
        let appUserId: String
    }

    /// Whose purchase it is: the account of the redemption the app posted to (which must be of
    /// this coupon, and the posting account's), else the posting account, else the one whose
    /// `appAccountToken` the transaction carries (any redemption made with it names the account:
    /// the token is derived from it). Nil: nobody known yet.
    static func account(_ tx: PGConnection, _ req: Coupons.StorePurchase, coupon: UUID) throws -> Account? {
        if let id = req.redemptionId {
            guard
                let row = try tx.query(
                    """
                    SELECT account_id, app_user_id, coupon_id FROM coupons.redemptions WHERE id = $1 AND ($2::uuid IS NULL OR account_id = $2::uuid)
                    """, [id, req.accountId]
                ).first, let account = try row.decodeIfPresent("account_id", as: UUID.self)
            else {
                throw ServiceError(.notFound, "no such redemption")
            }
            guard try row.decode("coupon_id", as: UUID.self) == coupon else {
                throw ServiceError(
                    .invalid, "this purchase used an offer of another coupon than this redemption's",
                    field: "redemptionId")
            }
            return Account(id: account, appUserId: try row.decode("app_user_id"))
        }
        if let id = req.accountId, let app = req.appUserId { return Account(id: id, appUserId: app) }
        if req.transaction.store == .playStore { return try PlayPurchases.account(tx, req.transaction, coupon: coupon) }
        guard let token = req.transaction.appAccountToken,
            let row = try tx.query(
                """
                SELECT account_id, app_user_id FROM coupons.redemptions WHERE app_account_token = $1 AND account_id IS NOT NULL LIMIT 1
                """, [token]
            ).first
        else { return nil }
        return Account(id: try row.decode("account_id"), appUserId: try row.decode("app_user_id"))
    }

    /// A chain already recorded: answered as it is, with the account attached when its redemption
    /// had none (still one redemption, and no second webhook). A chain that completed another
    /// account's redemption is refused to the account that posts it.
    static func existing(_ tx: PGConnection, chain: PGRow, account: Account?, posted: Bool) throws -> Response {
        var id = try chain.decode("redemption_id", as: UUID.self)
        guard
            let row = try tx.query(
                "SELECT account_id, sandbox, coupon_id FROM coupons.redemptions WHERE id = $1 FOR UPDATE", [id]
            ).first
        else {
            throw ServiceError.internal
        }
        let owner = try row.decodeIfPresent("account_id", as: UUID.self)
        if let owner, let account, owner != account.id, posted {
            throw ServiceError(.transactionInUse, "this purchase completed another account's redemption")
        }
        if owner == nil, let account {
            id = try attach(
                tx, redemption: id, coupon: try row.decode("coupon_id"), sandbox: try row.decode("sandbox"),
                overCap: try chain.decode("over_cap"), account: account)
        }
        return Response(redemption: try RedemptionStore.get(tx, id: id, account: nil, mode: nil, app: nil),
            created: false)
    }

    /// An unattributed purchase becomes `account`'s; answers the redemption that now stands for
    /// its chain.
    ///
    /// The account's own reservation of the coupon (in that environment) is what the purchase was
    /// made for, when the app was away while Apple's notification came first: the reservation
    /// completes with the purchase, takes over the chain, and the stand-in made for the
    /// notification ends (`released`, naming the reservation), so the app that posts the purchase
    /// later, or waits on its reservation, sees it complete. One use stays taken: a stand-in over
    /// the cap leaves the chain within it, else the stand-in's use goes back to the counter. The
    /// chain's one `coupon.redeemed` event, sent for the stand-in, is not sent again.
    ///
    /// Without a reservation, the stand-in itself becomes the account's. An account that already
    /// holds a use of the coupon otherwise (completed, or granted) keeps it, and the purchase stays
    /// unattributed.
    static func attach(
        _ tx: PGConnection, redemption standIn: UUID, coupon: UUID, sandbox: Bool, overCap: Bool, account: Account
    ) throws -> UUID {
        let held = try tx.query(
            """
            SELECT id, status FROM coupons.redemptions WHERE account_id = $1 AND coupon_id = $2 AND sandbox = $3 AND holds_use FOR UPDATE
            """, [account.id, coupon, sandbox]
        ).first
        guard let held else {
            try tx.query(
                """
                UPDATE coupons.redemptions SET account_id = $2, app_user_id = $3, app_account_token = COALESCE(app_account_token, $4) WHERE id = $1
                """, [standIn, account.id, account.appUserId, StoreIds.appAccountToken(account: account.id)])
            try tx.query(
                "UPDATE coupons.store_purchases SET account_id = $2 WHERE redemption_id = $1", [standIn, account.id])
            return standIn
        }
        guard try held.decode("status", as: RedemptionStatus.self) == .reserved else { return standIn }
        let reservation = try held.decode("id", as: UUID.self)
        // The stand-in gives up the chain's transaction id first: it is unique among redemptions.
        guard
            let purchase = try tx.query(
                """
                UPDATE coupons.redemptions s SET status = 'released', ended_at = now(), completed_at = NULL, store_transaction_id = NULL,
                    failure_reason = 'its App Store purchase completed redemption ' || upper($2::text)
                FROM (SELECT product_id, price_amount, price_currency, store_transaction_id, completed_at FROM coupons.redemptions WHERE id = $1) o
                WHERE s.id = $1
                RETURNING o.product_id, o.price_amount::text AS price_amount, o.price_currency, o.store_transaction_id, o.completed_at
                """, [standIn, reservation.lowercasedString]
            ).first
        else { throw ServiceError.internal }
        try tx.query(
            """
            UPDATE coupons.redemptions SET status = 'completed', completed_at = $2, product_id = $3, price_amount = $4::numeric,
                price_currency = $5, store_transaction_id = $6, reservation_expires_at = NULL
            WHERE id = $1
            """,
            [
                reservation, try purchase.decode("completed_at", as: Date.self),
                try purchase.decodeIfPresent("product_id", as: String.self),
                try purchase.decodeIfPresent("price_amount", as: String.self),
                try purchase.decodeIfPresent("price_currency", as: String.self),
                try purchase.decodeIfPresent("store_transaction_id", as: String.self)
            ])
        try tx.query(
            "UPDATE coupons.store_purchases SET redemption_id = $2, account_id = $3, over_cap = false WHERE redemption_id = $1",
            [standIn, reservation, account.id])
        if !sandbox && !overCap {
            try tx.query("UPDATE coupons.coupons SET used_count = used_count - 1 WHERE id = $1", [coupon])
        }
        // The stand-in may have been the last use waiting for Apple on a full cap.
        if !sandbox { try StoreOffers.switchOffIfCapFull(tx, coupon: coupon) }
        return reservation
    }

    /// A chain seen for the first time: its redemption completes (the account's reservation, or
    /// a new one), its row is written, its offer has had its first purchase, and `coupon.redeemed`
    /// is queued.
    static func recordChain(
        _ tx: PGConnection, _ t: VerifiedStoreTransaction, coupon: PGRow, productId: String, account: Account?
    ) throws -> Response {
        let d = try CouponStore.definition(coupon)
        let couponId = try coupon.decode("id", as: UUID.self)
        let mode = Mode(rawValue: try coupon.decode("mode", as: String.self)) ?? .live
        // A test coupon's redemptions are all sandbox, whatever the store says.
        let sandbox = t.sandbox || mode == .test
        let paid = price(t)

        var reserved: UUID?
        var holder = account
        if let account {
            if let held = try tx.query(
                """
                SELECT id, status FROM coupons.redemptions WHERE account_id = $1 AND coupon_id = $2 AND sandbox = $3 AND holds_use FOR UPDATE
                """, [account.id, couponId, sandbox]
            ).first {
                // The account's use of the coupon: this purchase completes it when it waits for
                // one; an account whose use is spent otherwise can't hold a second (one use per
                // account), so the purchase is recorded without it.
                if try held.decode("status", as: RedemptionStatus.self) == .reserved {
                    reserved = try held.decode("id")
                } else {
                    holder = nil
                }
            }
        }

        let redemption = reserved ?? UUID.timeOrdered()
        var overCap = false
        do {
            if let reserved {
                try tx.query(
                    """
                    UPDATE coupons.redemptions SET status = 'completed', completed_at = date_trunc('milliseconds', now()), product_id = $2,
                        price_amount = $3::numeric, price_currency = $4, store_transaction_id = $5, reservation_expires_at = NULL
                    WHERE id = $1
                    """, [reserved, productId, paid?.amount, paid?.currency, t.originalTransactionId])
            } else {
                if !sandbox {
                    // Take a use of the cap; with none left, the purchase is still recorded, over it.
                    let used = try coupon.decode("used_count", as: Int.self)
                    overCap = d.maxRedemptions.map { used >= $0 } ?? false
                    if !overCap {
                        try tx.query("UPDATE coupons.coupons SET used_count = used_count + 1 WHERE id = $1", [couponId])
                        try CouponEvents.exhaustedIfFull(tx, coupon: couponId)
                    }
                }
                try tx.query(
                    """
                    INSERT INTO coupons.redemptions (id, coupon_id, code, account_id, app_user_id, platform, product_id, price_amount,
                        price_currency, store_transaction_id, sandbox, status, completed_at, app_account_token)
                    VALUES ($1, $2, $3, $4, $5, $12, $6, $7::numeric, $8, $9, $10, 'completed', date_trunc('milliseconds', now()), $11)
                    """,
                    [
                        redemption, couponId, d.code, holder?.id, holder?.appUserId, productId, paid?.amount,
                        paid?.currency,
                        t.originalTransactionId, sandbox,
                        t.appAccountToken ?? holder.map { StoreIds.appAccountToken(account: $0.id) },
                        t.store == .playStore ? Platform.android.rawValue : Platform.ios.rawValue
                    ])
            }
        } catch let e as PGError where e.isUniqueViolation && e.constraint == "redemptions_store_transaction_id_key" {
            // A support key confirmed another redemption by hand with this transaction id.
            throw ServiceError(
                .transactionInUse, "this store transaction confirmed another redemption", field: "originalTransactionId"
            )
        }
        try tx.query(
            """
            INSERT INTO coupons.store_purchases (store, original_transaction_id, transaction_id, coupon_id, redemption_id, account_id,
                app_account_token, product_id, store_product_id, offer_name, price_milliunits, currency, sandbox, over_cap, purchase_date)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
            """,
            [
                t.store.rawValue, t.originalTransactionId, t.transactionId, couponId, redemption, account?.id,
                t.appAccountToken, productId,
                t.productId, t.offerIdentifier ?? "", paid == nil ? nil : t.priceMilliunits, paid?.currency, sandbox,
                overCap, t.purchaseDate
            ])
        try tx.query(
            """
            UPDATE coupons.store_offers SET first_purchase_at = now(), updated_at = now()
            WHERE coupon_id = $1 AND store = $2 AND product_id = $3 AND first_purchase_at IS NULL
            """, [couponId, t.store.rawValue, productId])
        let done = try RedemptionStore.get(tx, id: redemption, account: nil, mode: nil, app: nil)
        try Outbox.add(
            tx, key: redemption,
            RedemptionCompletedNotice(
                redemption: done, coupon: CouponStore.publicView(d), mode: mode, app: try CouponStore.app(coupon)))
        if !sandbox && d.hasAnyStoreOffers { try StoreOffers.switchOffIfCapFull(tx, coupon: couponId) }
        return Response(redemption: done, created: true)
    }
}

extension StorePurchases {
    /// How long a notification id is remembered: Apple retries a notification for about a week
    /// (at 1, 12, 24, 48 and 72 hours after the one before), so a month covers every repeat.
    static let notificationMemory: TimeInterval = 30 * 86_400

    /// Forgets notification ids older than `notificationMemory` (the reservation sweep calls it).
    @discardableResult
    static func forgetOldNotifications(_ c: PGConnection) throws -> Int {
        try c.query(
            "DELETE FROM coupons.store_notifications WHERE received_at < now() - make_interval(secs => $1)",
            [notificationMemory]
        ).affectedRows
    }
}
