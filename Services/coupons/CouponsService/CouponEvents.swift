import Core
import Cryptography
import Database
import Foundation

/// The operator webhook events coupons commits, each written to the outbox (`WebhookEventNotice`)
/// in the transaction that makes it true, and queued by grants once per subject: a repeat of the
/// same change (a message sent twice, a statement retried) adds nothing.
enum CouponEvents {
    /// `coupon.exhausted` when the coupon's cap is reached: once per coupon and cap (raising the cap
    /// and filling it again is another event; giving a use back and taking it again is not).
    static func exhaustedIfFull(_ tx: PGConnection, coupon: UUID) throws {
        guard let row = try CouponStore.findDefinition(tx, id: coupon) else { return }
        let d = try CouponStore.definition(row)
        let used = try row.decode("used_count", as: Int.self)
        guard let cap = d.maxRedemptions, used >= cap else { return }
        let subject = Self.subject("coupon.exhausted|\(coupon.lowercasedString)|\(cap)")
        let data = CouponExhaustedData(coupon: CouponStore.publicView(d), maxRedemptions: cap, redemptionCount: used)
        try Outbox.add(
            tx, key: subject,
            try WebhookEventNotice(
                event: .couponExhausted, subject: subject, mode: try mode(row), app: try CouponStore.app(row), data: data))
    }

    /// `redemption.released` for each of `ids`, released in the caller's transaction: the
    /// redemption as the API now shows it, with its coupon. Its subject is its id (a redemption is
    /// released once).
    static func released(_ tx: PGConnection, _ ids: [UUID]) throws {
        for id in ids {
            let view = try RedemptionStore.get(tx, id: id, account: nil, mode: nil, app: nil)
            guard
                let couponId = try tx.query("SELECT coupon_id FROM coupons.redemptions WHERE id = $1", [id]).first?
                    .decode(
                        "coupon_id", as: UUID.self),
                let coupon = try CouponStore.findDefinition(tx, id: couponId)
            else { throw ServiceError.internal }
            let data = RedemptionEventData(view, coupon: try CouponStore.publicView(coupon))
            try Outbox.add(
                tx, key: id,
                try WebhookEventNotice(
                    event: .redemptionReleased, subject: id, mode: try mode(coupon), app: try CouponStore.app(coupon),
                    data: data))
        }
    }

    /// `storeOffer.ready` when a store reports it made the offer, `storeOffer.failed` when it
    /// refused it: once per offer, state and switch of the offer (`switch_generation`), so an offer
    /// switched back on and made again is announced again.
    static func storeOffer(_ tx: PGConnection, _ offer: StoreOffers.Row) throws {
        let event: WebhookEventType
        if offer.stored.isWaiting {
            event = .storeOfferReady
        } else if offer.stored == .failed {
            event = .storeOfferFailed
        } else {
            return
        }
        guard
            let row = try tx.query(
                """
                SELECT c.code, c.mode, c.app_id, o.switch_generation FROM coupons.store_offers o
                JOIN coupons.coupons c ON c.id = o.coupon_id
                WHERE o.coupon_id = $1 AND o.store = $2 AND o.product_id = $3 AND o.base_plan_id = $4
                """, [offer.couponId, offer.store.rawValue, offer.productId, offer.basePlanId]
            ).first
        else { throw ServiceError.internal }
        let generation = try row.decode("switch_generation", as: Int.self)
        let subject = Self.subject(
            "\(event.rawValue)|\(offer.couponId.lowercasedString)|\(offer.store.rawValue)|\(offer.productId)|"
                + "\(offer.basePlanId)|\(generation)")
        let data = StoreOfferEventData(
            code: try row.decode("code"), store: offer.store, productId: offer.productId,
            basePlanId: offer.basePlanId.isEmpty ? nil : offer.basePlanId, offerId: offer.offerId,
            message: offer.message)
        try Outbox.add(
            tx, key: subject,
            try WebhookEventNotice(
                event: event, subject: subject, mode: try mode(row), app: try CouponStore.app(row), data: data))
    }

    /// The outbox key (and event subject) of an event named by `text`.
    static func subject(_ text: String) -> UUID {
        StoreIds.version8(Crypto.sha256(Array("redeem.webhookEvent|\(text)".utf8)))
    }

    private static func mode(_ row: PGRow) throws -> Mode {
        Mode(rawValue: try row.decode("mode", as: String.self)) ?? .live
    }
}
