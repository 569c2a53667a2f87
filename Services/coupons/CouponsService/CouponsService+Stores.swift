import Bus
import Core
import Database
import Foundation

/// The bus requests of plans, store offers and store purchases (docs/stores.md).
extension CouponsService {
    func addStoreRoutes(to r: inout BusRouter) {
        let stores = config.stores
        r.on(Plans.Create.self) { [self] req, context in
            try await pool.transaction { tx in
                let plan = try PlanStore.create(tx, req.input, mode: req.mode, app: DefaultApp.of(req.app))
                try Self.audit(
                    tx, req.actor, .planCreate, plan.productId, before: nil, after: plan, context,
                    req.mode, app: req.app)
                return plan
            }
        }
        r.on(Plans.List.self) { [self] req, _ in try await pool.withConnection { try PlanStore.list($0, req) } }
        r.on(Plans.Get.self) { [self] req, _ in
            try await pool.withConnection { try PlanStore.get($0, productId: req.productId, mode: req.mode,
                app: DefaultApp.of(req.app)) }
        }
        r.on(Plans.Patch.self) { [self] req, context in
            try await pool.transaction { tx in
                let before = try PlanStore.get(tx, productId: req.productId, mode: req.mode,
                    app: DefaultApp.of(req.app), lock: true)
                let after = try PlanStore.patch(tx, req)
                try Self.audit(
                    tx, req.actor, .planUpdate, after.productId, before: before, after: after, context,
                    req.mode, app: req.app)
                return after
            }
        }
        r.on(Coupons.StoreOfferReport.self) { [self] req, _ in
            try await pool.transaction { try StoreOffers.report($0, req, now: Date(), settle: stores.settle(req.store)) }
        }
        r.on(Coupons.StripeTerms.self) { [self] req, _ in
            try await pool.withConnection { try StripeCheckouts.terms($0, req) }
        }
        r.on(Coupons.StripeEvent.self) { [self] req, _ in
            let answer = try await Self.retryingConflicts { [pool] in
                try await pool.transaction { try StripeCheckouts.event($0, req) }
            }
            relay.nudge()  // its coupon.redeemed notice (with the receipt), or offers switched back on
            return answer
        }
        r.on(Coupons.StorePurchase.self) { [self] req, _ in
            let answer = try await Self.retryingConflicts { [pool] in
                try await pool.transaction { try StorePurchases.record($0, req, now: Date()) }
            }
            relay.nudge()  // its coupon.redeemed notice, and switch-off commands if the cap is full
            return answer
        }
        r.on(Coupons.SimulatedPurchase.self) { [self] req, context in
            let done = try await Self.retryingConflicts { [pool] in
                try await pool.transaction { tx in
                    let before = try RedemptionStore.get(
                        tx, id: req.redemptionId, account: nil, mode: req.mode,
                        app: DefaultApp.of(req.app))
                    let after = try StoreSimulation.purchase(tx, req, now: Date(), stores: stores).redemption
                    try Self.audit(
                        tx, req.actor, .redemptionSimulatePurchase, after.redemptionId.uppercasedString, before: before,
                        after: after, context, req.mode, app: req.app)
                    return after
                }
            }
            relay.nudge()
            return done
        }
        r.on(Coupons.SimulatedOfferReady.self) { [self] req, context in
            try await pool.transaction { tx in
                let after = try StoreSimulation.ready(tx, req, now: Date(), stores: stores)
                try Self.audit(
                    tx, req.actor, .storeOfferSimulateReady, req.offerId, before: nil, after: after, context, req.mode, app: req.app)
                return after
            }
        }
    }

    /// Runs `work` again (up to three times in all) when PostgreSQL ended it to break a deadlock or
    /// a serialization conflict: a store purchase locks the coupon, then redemptions, while the
    /// reservation sweep releases redemptions, then gives their uses back to the coupon. The
    /// transaction was rolled back whole, so running it again is safe.
    static func retryingConflicts<T: Sendable>(_ work: @Sendable () async throws -> T) async throws -> T {
        var attempt = 1
        while true {
            do {
                return try await work()
            } catch let e as PGError where e.isSerializationFailure && attempt < 3 {
                attempt += 1
            }
        }
    }
}
