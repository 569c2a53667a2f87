import Core
import Database
import Foundation

/// Web redemptions sold through Stripe Checkout (docs/stripe.md): what a reservation sells, and
/// Stripe's verified Checkout Session events, each in one transaction with the event's id
/// remembered (`store_notifications`, as `stripe:<event id>`), so a replayed event changes nothing.
///
/// - `completed` completes the reservation the session names (`client_reference_id`): the amount
///   Stripe charged (`amount_total`) is the price paid, and the subscription id its transaction
///   id, unique among redemptions, so one subscription completes one redemption and
///   `coupon.redeemed` goes out once for it, with the receipt grants sends RevenueCat.
/// - `expired` releases the reservation and gives its use back.
///
/// An event changes only a redemption of the app whose endpoint took it (docs/apps.md): each
/// app's Stripe account signs with its own secret, so one app's event never reaches another's.
enum StripeCheckouts {
    typealias Terms = Coupons.StripeTerms.Response

    /// What a reserved web redemption of `account` sells through Stripe: the plan it names, else
    /// the coupon's only plan, when that plan has a Stripe price.
    static func terms(_ c: PGConnection, _ req: Coupons.StripeTerms) throws -> Terms {
        guard
            let row = try c.query(
                """
                SELECT r.coupon_id, r.status, r.platform, c.mode, c.app_id, c.has_stripe_offers, p.stripe_price_id
                FROM coupons.redemptions r JOIN coupons.coupons c ON c.id = r.coupon_id
                LEFT JOIN coupons.plans p ON p.mode = c.mode AND p.app_id = c.app_id AND p.product_id = COALESCE(r.product_id,
                    CASE WHEN cardinality(c.product_ids) = 1 THEN c.product_ids[1] END)
                WHERE r.id = $1 AND r.account_id = $2
                """, [req.redemptionId, req.accountId]
            ).first
        else { throw ServiceError(.notFound, "no such redemption") }
        guard try row.decode("status", as: RedemptionStatus.self) == .reserved,
            try row.decode("platform", as: Platform.self) == .web, try row.decode("has_stripe_offers", as: Bool.self),
            let price = try row.decodeIfPresent("stripe_price_id", as: String.self)
        else { return Terms(sellsThroughStripe: false) }
        let app: UUID = try row.decode("app_id")
        return Terms(
            sellsThroughStripe: true, couponId: try row.decode("coupon_id"),
            mode: Mode(rawValue: try row.decode("mode", as: String.self)) ?? .live, priceId: price,
            app: app == DefaultApp.id ? nil : app)
    }

    static func event(_ tx: PGConnection, _ req: Coupons.StripeEvent) throws -> Coupons.StripeEvent.Response {
        guard (1...90).contains(req.eventId.utf8.count) else {
            throw ServiceError(.invalid, "an event id is 1 to 90 characters", field: "id")
        }
        // Event ids are Stripe's, unique per Stripe account: another app's are its own account's
        // (remembered with the app's id, 44 characters, within the column's 100).
        let app = DefaultApp.of(req.app)
        guard app == DefaultApp.id || req.eventId.utf8.count <= 56 else {
            throw ServiceError(
                .invalid, "an event id of another app's Stripe account is 1 to 56 characters", field: "id")
        }
        let seen = app == DefaultApp.id ? "stripe:" + req.eventId : "stripe:\(app.lowercasedString):" + req.eventId
        let fresh = try tx.query(
            "INSERT INTO coupons.store_notifications (notification_uuid) VALUES ($1) ON CONFLICT DO NOTHING", [seen])
        guard fresh.affectedRows > 0 else {
            return .init(recorded: false, duplicate: true, redemptionId: req.redemptionId)
        }
        guard
            let row = try tx.query(
                """
                SELECT r.status, r.platform, r.account_id, r.app_user_id, r.coupon_id, c.mode, c.has_stripe_offers
                FROM coupons.redemptions r JOIN coupons.coupons c ON c.id = r.coupon_id
                WHERE r.id = $1 AND c.app_id = $2 FOR UPDATE OF r
                """, [req.redemptionId, app]
            ).first
        else { return .init(recorded: false, duplicate: false) }
        let mode = Mode(rawValue: try row.decode("mode", as: String.self)) ?? .live
        // A session of the other mode's key is not this coupon's: a live coupon's checkout is
        // made with the live key, a test coupon's with the test key (Stripe's sandbox).
        guard try row.decode("status", as: RedemptionStatus.self) == .reserved,
            try row.decode("platform", as: Platform.self) == .web, try row.decode("has_stripe_offers", as: Bool.self),
            req.livemode == (mode == .live)
        else { return .init(recorded: false, duplicate: false, redemptionId: req.redemptionId) }
        switch req.kind {
        case .expired:
            _ = try RedemptionStore.end(
                tx, id: req.redemptionId, status: .released, reason: "its Stripe Checkout Session expired")
            _ = try StoreOffers.switchOnIfOpen(tx, coupon: try row.decode("coupon_id"))
        case .completed:
            try complete(
                tx, req, coupon: try row.decode("coupon_id"), mode: mode, appUserId: row.decodeIfPresent("app_user_id"))
        }
        return .init(recorded: true, duplicate: false, redemptionId: req.redemptionId)
    }

    static func complete(
        _ tx: PGConnection, _ req: Coupons.StripeEvent, coupon couponId: UUID, mode: Mode, appUserId: String?
    ) throws {
        guard let subscription = req.subscriptionId, (1...200).contains(subscription.utf8.count) else {
            throw ServiceError(
                .invalid, "a completed subscription checkout names its subscription", field: "subscription")
        }
        let currency = req.currency?.uppercased()
        let amount = req.amountTotal.flatMap { total in
            currency.map { StripeAmount.decimal(minorUnits: total, currency: $0) }
        }
        do {
            try tx.query(
                """
                UPDATE coupons.redemptions SET status = 'completed', completed_at = now(), price_amount = $2::numeric,
                    price_currency = $3, store_transaction_id = $4, reservation_expires_at = NULL
                WHERE id = $1
                """, [req.redemptionId, amount.map { "\($0)" }, amount == nil ? nil : currency, subscription])
        } catch let e as PGError where e.isUniqueViolation {
            throw ServiceError(
                .transactionInUse, "this Stripe subscription completed another redemption", field: "subscription")
        }
        let done = try RedemptionStore.get(tx, id: req.redemptionId, account: nil, mode: nil, app: nil)
        guard let coupon = try CouponStore.findDefinition(tx, id: couponId) else { throw ServiceError.internal }
        try Outbox.add(
            tx, key: req.redemptionId,
            RedemptionCompletedNotice(
                redemption: done, coupon: try CouponStore.publicView(coupon), mode: mode,
                stripeReceipt: appUserId.map { StripeReceipt(subscriptionId: subscription, appUserId: $0) },
                app: try CouponStore.app(coupon)))
        _ = try StoreOffers.switchOffIfCapFull(tx, coupon: couponId)
    }
}
