import Core
import Database
import Foundation

/// Test mode's helpers for the simulated stores (docs/stores.md, "Test mode"), in the spirit of
/// Stripe's `test_helpers`: what Apple or Google would do for a test coupon, which never reaches
/// them. A purchase goes through `StorePurchases.record`, as a verified one does, so it makes the
/// same redemption, purchase row, `coupon.redeemed` webhook and CSV row.
enum StoreSimulation {
    /// The store a reservation of `platform` buys in; nil for the web, which no store sells.
    static func store(of platform: Platform) -> Store? {
        switch platform {
        case .ios: .appStore
        case .android: .playStore
        case .web: nil
        }
    }

    /// The offer a simulated purchase of a reservation uses: of the reservation's store, on its
    /// plan when it names one, `ready` now; the first by plan and base plan.
    static func offer(
        _ offers: [StoreOffers.Row], store: Store, productId: String?, now: Date, settle: TimeInterval
    ) -> StoreOffers.Row? {
        offers.filter {
            $0.store == store && (productId == nil || $0.productId == productId)
                && $0.state(now: now, settle: settle) == .ready
        }
        .min { ($0.productId, $0.basePlanId) < ($1.productId, $1.basePlanId) }
    }

    /// `POST /v1/test_helpers/redemptions/{id}/purchase`: a test reservation on iOS or Android
    /// completes as if the store had sold its coupon's offer for `pricePaid`.
    static func purchase(
        _ tx: PGConnection, _ req: Coupons.SimulatedPurchase, now: Date, stores: StoreSettings
    ) throws -> StorePurchases.Response {
        guard req.mode == .test else { throw ServiceError(.invalidState, "the simulated stores serve test mode only") }
        let (amount, currency) = try CouponRules.checkMoney(req.pricePaid, field: "pricePaid", allowZero: true)
        guard
            let r = try tx.query(
                """
                SELECT r.status, r.platform, r.product_id, r.account_id, r.app_account_token, r.coupon_id FROM coupons.redemptions r
                JOIN coupons.coupons c ON c.id = r.coupon_id WHERE r.id = $1 AND c.mode = 'test' AND c.app_id = $2
                """, [req.redemptionId, DefaultApp.of(req.app)]
            ).first
        else { throw ServiceError(.notFound, "no such redemption") }
        let status = try r.decode("status", as: RedemptionStatus.self)
        guard status == .reserved else {
            throw ServiceError(
                .invalidState, "only a reservation is bought in a store; this redemption is \(status.rawValue)")
        }
        guard let platform = Platform(rawValue: try r.decode("platform")), let store = store(of: platform) else {
            throw ServiceError(
                .invalidState,
                "a web reservation is bought in no store; confirm it with POST /v1/redemptions/{id}/purchase")
        }
        let couponId = try r.decode("coupon_id", as: UUID.self)
        let offers = try StoreOffers.rows(tx, coupons: [couponId])[couponId] ?? []
        guard
            let offer = offer(
                offers, store: store, productId: try r.decodeIfPresent("product_id"), now: now,
                settle: stores.settle(store))
        else {
            throw ServiceError(
                .invalidState,
                "the coupon has no ready simulated \(store.rawValue) offer for this reservation; "
                    + "POST /v1/test_helpers/store_offers/{offerId}/ready skips an offer's settle time")
        }
        var storeProduct = offer.productId
        if store == .playStore {
            storeProduct =
                try tx.query(
                    "SELECT play_product_id FROM coupons.plans WHERE mode = 'test' AND product_id = $1 AND app_id = $2",
                    [offer.productId, DefaultApp.of(req.app)]
                )
                .first?.decodeIfPresent("play_product_id") ?? offer.productId
        }
        let transaction = "sim_" + UUID.random().lowercasedString.replacingOccurrences(of: "-", with: "")
        let account = try r.decodeIfPresent("account_id", as: UUID.self)
        let milliunits = NSDecimalNumber(decimal: amount * 1000).int64Value
        let t = VerifiedStoreTransaction(
            store: store, transactionId: transaction, originalTransactionId: transaction, productId: storeProduct,
            offerType: store == .appStore ? VerifiedStoreTransaction.offerCode : nil, offerIdentifier: offer.offerName,
            appAccountToken: try r.decodeIfPresent("app_account_token"), priceMilliunits: milliunits,
            currency: currency,
            sandbox: req.sandbox ?? false, purchaseDate: now,
            basePlanId: offer.basePlanId.isEmpty ? nil : offer.basePlanId,
            obfuscatedAccountId: store == .playStore ? account.map(StoreIds.obfuscatedAccountId(account:)) : nil)
        return try StorePurchases.record(
            tx, Coupons.StorePurchase(transaction: t, redemptionId: req.redemptionId, simulated: true), now: now)
    }

    /// `POST /v1/test_helpers/store_offers/{offerId}/ready`: a test coupon's simulated offer,
    /// waiting for its store, skips the rest of its settle time.
    static func ready(
        _ tx: PGConnection, _ req: Coupons.SimulatedOfferReady, now: Date, stores: StoreSettings
    ) throws -> StoreOfferView {
        guard req.mode == .test else { throw ServiceError(.invalidState, "the simulated stores serve test mode only") }
        guard
            let found = try tx.query(
                """
                SELECT \(StoreOffers.columns) FROM coupons.store_offers o JOIN coupons.coupons c ON c.id = o.coupon_id
                WHERE o.offer_id = $1 AND c.mode = 'test' AND c.app_id = $2 FOR UPDATE OF o
                """, [req.offerId, DefaultApp.of(req.app)]
            ).first
        else { throw ServiceError(.notFound, "no simulated store offer with this id") }
        var row = try StoreOffers.row(found)
        let settle = stores.settle(row.store)
        guard row.switchedOffAt == nil else {
            throw ServiceError(.invalidState, "this offer is switched off; only an offer on can be made ready")
        }
        switch row.state(now: now, settle: settle) {
        case .ready: return row.view(now: now, settle: settle)
        case let state where state.isWaiting:
            let settled = now.addingTimeInterval(-settle)
            try tx.query(
                """
                UPDATE coupons.store_offers SET code_created_at = $5, updated_at = now()
                WHERE coupon_id = $1 AND store = $2 AND product_id = $3 AND base_plan_id = $4
                """, [row.couponId, row.store.rawValue, row.productId, row.basePlanId, settled])
            row.codeCreatedAt = settled
            return row.view(now: now, settle: settle)
        case let state:
            throw ServiceError(
                .invalidState, "this offer is \(state.rawValue); only an offer waiting for its store can be made ready")
        }
    }
}
