import Foundation
#if canImport(StoreKit) && canImport(UIKit) && os(iOS)
import StoreKit
import UIKit
#endif

// The store hand-off of a discount (docs/stores.md): the redeem answer says what to give the
// store; the store charges the discount; the app posts the store's proof, which Redeem verifies
// with the store before it completes the redemption.

extension RedeemClient {
    /// Completes a discount with the App Store's signed transaction
    /// (`POST /v1/redemptions/{id}/purchase {signedTransaction}`): StoreKit 2's
    /// `VerificationResult.jwsRepresentation`. Redeem verifies Apple's signature; posting the same
    /// purchase again answers the same redemption.
    @discardableResult
    public func completeAppStorePurchase(redemptionId: UUID, signedTransaction: String) async throws -> Redemption {
        struct Body: Encodable { var signedTransaction: String }
        return try await purchase(redemptionId, try APIRequest("POST", purchasePath(redemptionId), json: Body(signedTransaction: signedTransaction)))
    }

    /// Completes a discount with the App Store transaction's id
    /// (`POST /v1/redemptions/{id}/purchase {transactionId}`), which Redeem fetches from Apple.
    @discardableResult
    public func completeAppStorePurchase(redemptionId: UUID, transactionId: String) async throws -> Redemption {
        struct Body: Encodable { var transactionId: String }
        return try await purchase(redemptionId, try APIRequest("POST", purchasePath(redemptionId), json: Body(transactionId: transactionId)))
    }

    /// Completes a discount with Google Play's purchase token
    /// (`POST /v1/redemptions/{id}/purchase {purchaseToken}`). On
    /// Android, pass the redeem answer's `playStore.obfuscatedAccountId` to
    /// `BillingFlowParams.Builder.setObfuscatedAccountId`, then post the token Play Billing gives
    /// back in `Purchase.getPurchaseToken()`.
    @discardableResult
    public func completePlayPurchase(redemptionId: UUID, purchaseToken: String) async throws -> Redemption {
        struct Body: Encodable { var purchaseToken: String }
        return try await purchase(redemptionId, try APIRequest("POST", purchasePath(redemptionId), json: Body(purchaseToken: purchaseToken)))
    }

    private func purchasePath(_ id: UUID) -> String { "/v1/redemptions/\(id.uuidString.lowercased())/purchase" }

    private func purchase(_ id: UUID, _ request: APIRequest) async throws -> Redemption {
        let redemption = try await authorized(request).decode(Redemption.self)
        if redemption.status.isSettled {
            try removePending(id)
            if redemption.status == .completed { _ = try? await entitlements() }
        }
        return redemption
    }

    #if canImport(StoreKit) && canImport(UIKit) && os(iOS)
    /// Presents the App Store's offer-code sheet for a discount redemption (whose `appStore`
    /// hand-off names the page), waits for the transaction the code makes, and posts its signed
    /// form. The user types or pastes the code shown to them in the sheet; apps that prefer
    /// Apple's page can open `redemption.appStore?.redemptionUrl` instead and call
    /// `completeAppStorePurchase(redemptionId:signedTransaction:)` from their `Transaction.updates`
    /// listener.
    @available(iOS 16.0, *)
    @MainActor
    public func redeemOfferCode(_ redemption: Redemption, in scene: UIWindowScene, timeout: TimeInterval = 600) async throws -> Redemption {
        guard redemption.appStore != nil else {
            throw RedeemError(kind: .server(status: 409), code: "invalidState", message: "this redemption has no App Store offer")
        }
        let productId = redemption.productId
        try await AppStore.presentOfferCodeRedeemSheet(in: scene)
        let signed = try await Transport.withTimeout(timeout) {
            for await result in Transaction.updates {
                guard case .verified(let transaction) = result, transaction.offerType == .code,
                      productId == nil || transaction.productID == productId else { continue }
                await transaction.finish()
                return result.jwsRepresentation
            }
            throw CancellationError()
        }
        return try await completeAppStorePurchase(redemptionId: redemption.redemptionId, signedTransaction: signed)
    }
    #endif
}
