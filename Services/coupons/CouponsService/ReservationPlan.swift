import Core
import Foundation

/// What one batch of reservations of one coupon comes to, before any row is written: per request
/// its existing redemption, a refusal, or a new use (or a double tap of one in the same batch),
/// in the order the requests came, counting each new live use against the cap as it goes. Pure:
/// `RedemptionStore.redeemBatch` looks up its inputs (under the coupon's row lock when the coupon has
/// a cap or store offers) and writes the new uses; `ReservationPlanTests` holds its table.
struct ReservationPlan {
    /// An account's use, live or sandbox (each may hold one).
    struct Key: Hashable {
        let account: UUID
        let sandbox: Bool
    }

    /// What the batch looked up, under the coupon's row lock.
    struct Inputs {
        var coupon: CouponDefinition
        var active: Bool
        /// A test coupon's uses are all sandbox.
        var testCoupon: Bool
        /// Live uses taken before the batch.
        var used: Int
        /// The redemptions that hold a use of this coupon, by account.
        var existing: [Key: RedemptionView] = [:]
        /// Accounts that are no longer new customers (asked only of new-customer coupons).
        var veterans: Set<UUID> = []
        /// Per store, the plans whose offer is ready (asked only when a request goes through one).
        var ready: [Store: [String: [String]]] = [:]
        var owning = PlayOwnership(playProducts: [:])
        var now: Date
        /// The unique code the batch's requests name, if they name one.
        var uniqueCode: UniqueCodeUse? = nil
    }

    /// A unique code as the batch found it: `held` when a redemption holds it already.
    struct UniqueCodeUse: Equatable {
        let id: Int64
        let last4: String
        var held: Bool
    }

    /// A new use to write.
    struct New {
        let index: Int
        let id: UUID
        let request: Coupons.Redeem
        let sandbox: Bool
        let productId: String?
        /// `reserved` for a discount or a use through a store (it waits for its purchase);
        /// `granting` for a free period Redeem grants.
        let status: RedemptionStatus
        /// The unique code it uses.
        var uniqueCode: UniqueCodeUse? = nil
    }

    /// What became of one request.
    enum Step {
        case existing(RedemptionView)
        case refused(RefusalReason)
        /// Nothing reserved: the request goes through Play without saying what the account holds.
        case asksPlayOwnership
        case failed(any Error)
        /// The new use `fresh[n]`.
        case new(Int)
        /// A second request of the same account in the batch: it gets `fresh[n]`, not created.
        case twin(of: Int)
    }

    private(set) var steps: [Step] = []
    private(set) var fresh: [New] = []
    /// Live uses taken once the batch is written.
    private(set) var used: Int

    init(_ inputs: Inputs, requests: [Coupons.Redeem], newId: () -> UUID = { UUID.timeOrdered() }) {
        let d = inputs.coupon
        used = inputs.used
        var freshByKey: [Key: Int] = [:]
        var uniqueCode = inputs.uniqueCode
        for (i, req) in requests.enumerated() {
            let sandbox = req.sandbox || inputs.testCoupon
            let key = Key(account: req.accountId, sandbox: sandbox)
            if let e = inputs.existing[key] { steps.append(.existing(e)); continue }
            if let j = freshByKey[key] { steps.append(.twin(of: j)); continue }
            // A unique code is used once: by a redemption before the batch, or the first new one in it.
            if uniqueCode?.held == true {
                steps.append(.refused(.codeUsed))
                continue
            }
            do {
                let store = d.store(through: req.platform)
                let request = RedemptionRules.Request(
                    coupon: d, active: inputs.active, platform: req.platform, productId: req.productId, resolveProduct: true,
                    holdsUse: false, veteran: inputs.veterans.contains(req.accountId), usesTaken: sandbox ? nil : used,
                    readyProducts: store.map { Set((inputs.ready[$0] ?? [:]).keys) },
                    ownedProducts: inputs.owning.plans(through: store, req.playOwned), now: inputs.now)
                switch try RedemptionRules.decide(request) {
                case .refuse(let reason):
                    steps.append(.refused(reason))
                case .reserve where inputs.owning.asks(through: store, req.playOwned):
                    steps.append(.asksPlayOwnership)
                case .reserve(let productId):
                    if !sandbox { used += 1 }
                    freshByKey[key] = fresh.count
                    steps.append(.new(fresh.count))
                    let status: RedemptionStatus = d.isDiscount || store != nil ? .reserved : .granting
                    fresh.append(
                        New(
                            index: i, id: newId(), request: req, sandbox: sandbox, productId: productId, status: status,
                            uniqueCode: uniqueCode))
                    uniqueCode?.held = true
                }
            } catch {
                steps.append(.failed(error))
            }
        }
    }

    /// The new uses that count against the cap.
    var live: [New] { fresh.filter { !$0.sandbox } }
}
