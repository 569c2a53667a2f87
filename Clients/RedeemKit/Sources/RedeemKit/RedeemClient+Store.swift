import Foundation

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
        return try await purchase(
            redemptionId,
            try APIRequest("POST", purchasePath(redemptionId), json: Body(signedTransaction: signedTransaction)))
    }

    /// Completes a discount with the App Store transaction's id
    /// (`POST /v1/redemptions/{id}/purchase {transactionId}`), which Redeem fetches from Apple.
    @discardableResult
    public func completeAppStorePurchase(redemptionId: UUID, transactionId: String) async throws -> Redemption {
        struct Body: Encodable { var transactionId: String }
        return try await purchase(
            redemptionId, try APIRequest("POST", purchasePath(redemptionId), json: Body(transactionId: transactionId)))
    }

    /// Completes a discount with Google Play's purchase token
    /// (`POST /v1/redemptions/{id}/purchase {purchaseToken}`). On
    /// Android, pass the redeem answer's `playStore.obfuscatedAccountId` to
    /// `BillingFlowParams.Builder.setObfuscatedAccountId`, then post the token Play Billing gives
    /// back in `Purchase.getPurchaseToken()`.
    @discardableResult
    public func completePlayPurchase(redemptionId: UUID, purchaseToken: String) async throws -> Redemption {
        struct Body: Encodable { var purchaseToken: String }
        return try await purchase(
            redemptionId, try APIRequest("POST", purchasePath(redemptionId), json: Body(purchaseToken: purchaseToken)))
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

    /// Gives a reserved use back because the store account already owns the plan
    /// (`POST /v1/redemptions/{id}/release {reason}`): Play Billing answered `ITEM_ALREADY_OWNED`,
    /// so nothing was bought and the coupon is not used. The redemption ends `released` and leaves
    /// `pendingRedemptions()`. `.invalidState` once it ended otherwise; `.notFound` for another's.
    @discardableResult
    public func release(_ redemptionId: UUID, reason: ReleaseReason = .alreadyOwned) async throws -> Redemption {
        struct Body: Encodable { var reason: ReleaseReason }
        let path = "/v1/redemptions/\(redemptionId.uuidString.lowercased())/release"
        let request = try APIRequest("POST", path, json: Body(reason: reason))
        let redemption = try await authorized(request).decode(Redemption.self)
        try removePending(redemptionId)
        return redemption
    }

    // MARK: - The offer-code page

    /// Sends the user to Apple's offer-code page for a discount, with the code filled in: the
    /// chosen plan's page from validate's `appStore.redemptionUrls` when it has one, else the
    /// redemption's `redemptionUrl` (which carries the code of the plan redeemed). Apple's blank
    /// sheet, where the user types the code, is only the fallback: when there is no page, or the
    /// system could not open it. Purchases come back through the listener (`start()`).
    ///
    /// - Parameter check: the validate answer the redemption came from, if the app kept it.
    @discardableResult
    public func presentOfferCode(
        for redemption: Redemption, check: CouponValidation? = nil
    ) async throws -> OfferCodePresentation {
        guard let page = configuration.offerCodePage else {
            throw RedeemError(
                kind: .unsupported, code: .invalidState, message: "this platform has no App Store offer-code page")
        }
        if let url = Self.offerCodePageURL(for: redemption, check: check), await page.open(url) {
            return .page(url)
        }
        try await page.presentSheet()
        return .sheet
    }

    /// The chosen plan's page from validate, else the redemption's own, else validate's one page.
    static func offerCodePageURL(for redemption: Redemption, check: CouponValidation?) -> URL? {
        let plan = redemption.productId
        if let plan, let url = check?.appStore?.redemptionUrls?[plan] { return url }
        return redemption.appStore?.redemptionUrl(for: plan) ?? check?.appStore?.redemptionUrl(for: plan)
    }

    /// The whole App Store hand-off of a reserved discount: starts the purchase listener (if the
    /// app has not), opens the offer-code page (`presentOfferCode`), and waits until the purchase
    /// completes the redemption, it is released, or `timeout` passes (`.timedOut`: it stays in
    /// `pendingRedemptions()`, and the listener still posts the purchase when it comes, even after
    /// a relaunch).
    public func redeemOfferCode(
        _ redemption: Redemption, check: CouponValidation? = nil, timeout: TimeInterval = 600
    ) async throws -> CouponCompletion {
        start()
        try await presentOfferCode(for: redemption, check: check)
        return try await awaitCouponCompletion(redemptionId: redemption.redemptionId, timeout: timeout)
    }
}

/// Why the app gives a reserved use back (`release(_:reason:)`).
public enum ReleaseReason: String, Codable, Sendable, CaseIterable {
    /// The store account already owns the plan (Play Billing's `ITEM_ALREADY_OWNED`): nothing was
    /// charged, and the coupon is not used.
    case alreadyOwned
}

/// How `presentOfferCode(for:check:)` sent the user to the App Store.
public enum OfferCodePresentation: Sendable, Equatable {
    /// Apple's offer-code page, with the code in this URL filled in.
    case page(URL)
    /// Apple's offer-code sheet, where the user types the code.
    case sheet
}

/// Opens Apple's offer-code page (`SystemOfferCodePage` on iOS and macOS). Behind a protocol so
/// which page is opened, and when the sheet is the fallback, is tested on Linux with a fake.
public protocol OfferCodePage: Sendable {
    /// Opens `url` with the system (the App Store takes it); false when it could not.
    func open(_ url: URL) async -> Bool
    /// Presents Apple's offer-code sheet, where the user types the code.
    func presentSheet() async throws
}
