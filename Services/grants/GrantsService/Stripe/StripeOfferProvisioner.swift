import Core
import Foundation

/// Makes a coupon's Stripe coupon and promotion code, and switches the code off and on, one call
/// at a time (docs/stripe.md), as `OfferProvisioner` does at Apple:
///
/// 1. The products of the plans' prices (`GET /v1/prices/{id}`): a coupon applies to products.
/// 2. The coupon, with the offer's name as its id: a restarted run that made it finds it
///    (Stripe answers "already exists"), so it is never made twice.
/// 3. The promotion code with Redeem's code, after looking for one made by an earlier run.
///
/// `record` hears the progress after each step, before the next call: `offerId` is the Stripe
/// coupon's id, `customCodeId` the promotion code's, and `codeCreatedAt` when it was made.
struct StripeOfferProvisioner: Sendable {
    let client: StripeClient
    typealias Record = OfferProvisioner.Record

    func provision(
        _ command: StoreProvisionCommand, from start: AppStoreOfferProgress, record: Record
    ) async -> AppStoreTaskOutcome {
        var progress = start
        if let expires = command.expiresAt, expires <= client.now() {
            return .failed("the coupon expired before its Stripe promotion code was made", progress)
        }
        let prices = command.subscriptionId.split(separator: ",").map(String.init)
        guard !prices.isEmpty else { return .failed("a Stripe coupon needs the plans' Stripe prices", progress) }
        do {
            if progress.offerId == nil {
                var products: [String] = []
                for price in prices {
                    let product = try await client.price(price).product
                    if !products.contains(product) { products.append(product) }
                }
                switch StripeCouponRequest.coupon(command, products: products) {
                case .failure(let problem): return .failed(problem.message, progress)
                case .success(let form): _ = try await client.createCoupon(form)
                }
                progress.offerId = command.offerName
                try await record(progress)
            }
            if progress.customCodeId == nil, let coupon = progress.offerId {
                var code = try await client.promotionCodes(code: command.code, coupon: coupon).first
                if code == nil {
                    code = try await client.createPromotionCode(
                        StripeCouponRequest.promotionCode(command, couponId: coupon))
                }
                progress.customCodeId = code?.id
                progress.codeCreatedAt = client.now()
                try await record(progress)
            }
            return .done(progress)
        } catch let e as AppleCallError {
            return OfferProvisioner.outcome(e, progress)
        } catch {
            return .retryLater(after: nil, reason: "progress not recorded: \(error)", progress)
        }
    }

    /// Switches the promotion code off or on (`active`). One never made needs nothing; the
    /// Stripe coupon itself stays, as a coupon Stripe customers already hold keeps applying.
    func switchTo(active: Bool, from start: AppStoreOfferProgress, record: Record) async -> AppStoreTaskOutcome {
        var progress = start
        guard !progress.codeSwitched, let code = progress.customCodeId else { return .done(progress) }
        do {
            _ = try await client.setPromotionCode(code, active: active)
            progress.codeSwitched = true
            try await record(progress)
            return .done(progress)
        } catch let e as AppleCallError {
            return OfferProvisioner.outcome(e, progress)
        } catch {
            return .retryLater(after: nil, reason: "progress not recorded: \(error)", progress)
        }
    }
}
