import Core
import Foundation

/// Makes a coupon's offer on one base plan at Google Play and activates it, and deactivates it,
/// one call at a time (docs/stores.md, "Grants and Google's API"):
///
/// 1. The offer, looked for by its id (derived from the coupon, stable: a restart finds the offer
///    it made), else made from the base plan's regions (`PlayOfferRequest`). Made means `DRAFT`.
/// 2. `:activate`; the time it answers is when the settle time starts (`codeCreatedAt`).
///
/// `record` hears the progress after each step, before the next call, as for the App Store
/// (`OfferProvisioner`): `offerId` once the offer exists, `codeCreatedAt` once it is active. So a
/// crash between two calls never makes anything twice, and the next run goes on from there.
struct PlayOfferProvisioner: Sendable {
    let client: PlayDeveloperClient
    typealias Record = OfferProvisioner.Record

    /// What provisioning came to, and what it left out that the operator should know (regions of
    /// the base plan priced in another currency than an amount off's).
    struct Result: Sendable, Equatable {
        var outcome: AppStoreTaskOutcome
        var note: String?
    }

    func provision(_ command: StoreProvisionCommand, from start: AppStoreOfferProgress, record: Record) async -> Result {
        var progress = start
        var note: String?
        guard let basePlanId = command.basePlanId else { return Result(outcome: .failed("a Google Play offer needs a base plan", progress)) }
        if let expires = command.expiresAt, expires <= client.now() {
            return Result(outcome: .failed("the coupon expired before its Google Play offer was made", progress))
        }
        let product = command.subscriptionId, offerId = command.offerName
        do {
            if progress.offerId == nil {
                if let made = try await client.offer(productId: product, basePlanId: basePlanId, offerId: offerId) {
                    if made.state == "ACTIVE" { progress.codeCreatedAt = client.now() }
                } else {
                    guard let plan = try await client.basePlans(productId: product).first(where: { $0.basePlanId == basePlanId }) else {
                        return Result(outcome: .failed("Google Play has no base plan \(basePlanId) in subscription \(product)", progress))
                    }
                    let request = try PlayOfferRequest(productId: product, offerId: offerId, terms: command.offer, basePlan: plan)
                    if !request.omitted.isEmpty {
                        note = "regions priced in another currency than \(command.offer.amountOff?.currency ?? "the amount off's") are left out: "
                            + request.omitted.joined(separator: ", ")
                    }
                    try await create(request)
                }
                progress.offerId = offerId
                try await record(progress)
            }
            if progress.codeCreatedAt == nil {
                _ = try await client.setOffer(productId: product, basePlanId: basePlanId, offerId: offerId, active: true)
                progress.codeCreatedAt = client.now()
                try await record(progress)
            }
            return Result(outcome: .done(progress), note: note)
        } catch let e as AppleCallError {
            return Result(outcome: OfferProvisioner.outcome(e, progress), note: note)
        } catch let problem as OfferPricing.Problem {
            return Result(outcome: .failed(problem.message, progress), note: note)
        } catch {
            return Result(outcome: .retryLater(after: nil, reason: "progress not recorded: \(error)", progress), note: note)
        }
    }

    /// Activates or deactivates the offer of Play subscription `product` (the provisioning's; nil
    /// when no provisioning was stored, so nothing was made): a switch coupons asked for. One
    /// Google never made needs nothing.
    func switchTo(active: Bool, _ command: StoreSwitchCommand, product: String?, from start: AppStoreOfferProgress,
                  record: Record) async -> AppStoreTaskOutcome {
        var progress = start
        guard !progress.offerSwitched, let product else { return .done(progress) }
        guard let basePlanId = command.basePlanId else { return .failed("a Google Play offer needs a base plan", progress) }
        do {
            guard try await set(active: active, product: product, basePlanId: basePlanId, offerId: command.offerName) else { return .done(progress) }
            progress.offerSwitched = true
            try await record(progress)
            return .done(progress)
        } catch let e as AppleCallError {
            return OfferProvisioner.outcome(e, progress)
        } catch {
            return .retryLater(after: nil, reason: "progress not recorded: \(error)", progress)
        }
    }

    /// Makes the offer; a 409 means an earlier run made it and its answer was lost: it is there.
    private func create(_ request: PlayOfferRequest) async throws(AppleCallError) {
        do {
            _ = try await client.createOffer(productId: request.productId, basePlanId: request.basePlanId, offerId: request.offerId,
                                             document: request.document(packageName: client.packageName))
        } catch {
            guard case .refused(409, _) = error else { throw error }
        }
    }

    /// Activates or deactivates the offer; false when Google has no such offer (404).
    private func set(active: Bool, product: String, basePlanId: String, offerId: String) async throws(AppleCallError) -> Bool {
        do {
            _ = try await client.setOffer(productId: product, basePlanId: basePlanId, offerId: offerId, active: active)
            return true
        } catch {
            guard case .refused(404, _) = error else { throw error }
            return false
        }
    }
}
