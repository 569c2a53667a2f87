import Core
import Database
import Foundation

/// What the account's Google Play subscriptions say of a coupon's plans (docs/stores.md,
/// "`alreadyOwned`"). The gateway reads them from the store's view (RevenueCat's subscriber,
/// under `revenuecat`) and sends their Play product ids with the request (`playOwned`); a plan is
/// held when its Play product is one of them. A request through Play that sent none is asked for
/// them (`asksPlayOwnership`) before anything is reserved.
struct PlayOwnership {
    /// Plan → its Play product, read only when a request of the batch names Play products.
    let playProducts: [String: String]

    init(playProducts: [String: String]) { self.playProducts = playProducts }

    /// The plans of the coupon's `app` and `mode`.
    init(
        _ c: PGConnection, _ d: CouponDefinition, mode: Mode, app: UUID,
        _ requests: [(platform: Platform?, owned: [String]?)]
    ) throws {
        guard requests.contains(where: { d.store(through: $0.platform) == .playStore && !($0.owned ?? []).isEmpty }) else {
            playProducts = [:]
            return
        }
        playProducts = try PlanStore.playProducts(c, productIds: d.productIds, mode: mode, app: app)
    }

    /// The plans the account holds, for a request through Play that said what it holds; else nil.
    func plans(through store: Store?, _ owned: [String]?) -> Set<String>? {
        guard store == .playStore, let owned else { return nil }
        let held = Set(owned)
        return Set(playProducts.filter { held.contains($0.value) }.keys)
    }

    /// Whether a request goes through Play without saying what the account holds there.
    func asks(through store: Store?, _ owned: [String]?) -> Bool { store == .playStore && owned == nil }
}
