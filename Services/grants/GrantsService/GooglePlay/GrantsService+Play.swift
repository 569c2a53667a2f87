import Core
import Foundation

extension GrantsService {
    /// `grants.playPurchase`: the purchase as Google reports it, acknowledged before the answer
    /// (docs/stores.md, "Completion on Android"). An acknowledgement Google did not take leaves the
    /// request `unavailable`, so the caller (the app's post, Pub/Sub's retry of a push) sends it
    /// again: a purchase is never answered unacknowledged, whatever dies in between.
    ///
    /// Another app's purchase is read with its own live `googleplay` settings (docs/apps.md): its
    /// service account and package name, so Google knows only that package's tokens.
    func playPurchase(_ req: Grants.PlayPurchase, deadline: Date?) async throws -> Grants.PlayPurchase.Response {
        let client: PlayDeveloperClient
        var app = req.app.flatMap { $0 == DefaultApp.id ? nil : $0 }
        if app == nil, let package = req.packageName, package != play?.packageName {
            // A push naming another package than the environment's: the app whose settings name it.
            app = try await pool.withConnection { c in try AppCredentials.app(c, packageName: package, mode: .live) }
            guard app != nil else {
                throw ServiceError(
                    .notFound, "no app's live Google Play settings name this package", field: "packageName")
            }
        }
        if let app {
            // Real purchases complete live coupons only; test mode's are simulated.
            let own = try await pool.withConnection { [appPlay] c in try appPlay.client(c, app: app, mode: .live) }
            guard let own else {
                throw ServiceError(
                    .invalid, "this app has no Google Play settings in live mode (PUT /v1/apps/{id}/stores/googleplay)",
                    field: "purchaseToken")
            }
            client = own
        } else {
            guard let play else {
                throw ServiceError(.unavailable, "Google Play is not connected (REDEEM_PLAY_SERVICE_ACCOUNT)")
            }
            client = play
        }
        let token = req.purchaseToken
        guard (1...500).contains(token.utf8.count), token.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else {
            throw ServiceError(.invalid, "purchaseToken must be the token Google Play gave the app", field: "purchaseToken")
        }
        let purchase: PlaySubscriptionPurchase
        do { purchase = try await client.purchase(token: token) } catch { throw Self.serviceError(error, field: "purchaseToken") }
        guard let item = purchase.lineItems.first else { throw ServiceError(.invalid, "the purchase has no subscription", field: "purchaseToken") }
        if !purchase.isAcknowledged {
            do { try await client.acknowledge(productId: item.productId, token: token) } catch { throw Self.serviceError(error, field: "purchaseToken") }
        }
        let (price, fallback) = try await PlayPhasePrice.read(purchase, item, client: client)
        if let fallback {
            logger.warning("the Play offer's price could not be had; the recurring price is recorded",
                           ["play.offer": item.offerDetails?.offerId ?? "", "play.region": purchase.regionCode ?? "", "reason": fallback])
        }
        return .init(transaction: VerifiedStoreTransaction(
            store: .playStore, transactionId: token, originalTransactionId: token, productId: item.productId, offerType: nil,
            offerIdentifier: item.offerDetails?.offerId, appAccountToken: nil, priceMilliunits: price?.milliunits, currency: price?.currency,
            sandbox: purchase.testPurchase != nil, purchaseDate: purchase.startTime.flatMap(Timestamp.parse) ?? Date(),
            basePlanId: item.offerDetails?.basePlanId, obfuscatedAccountId: purchase.externalAccountIdentifiers?.obfuscatedExternalAccountId,
            linkedPurchaseToken: purchase.linkedPurchaseToken), app: app)
    }

    /// Google's answer as Redeem's error: a token Google refuses is `notFound`, anything else it
    /// refuses or did not answer is `unavailable`.
    static func serviceError(_ e: AppleCallError, field: String) -> ServiceError {
        switch e {
        case .refused(400, let message), .refused(404, let message), .refused(410, let message): ServiceError(.notFound, message)
        case .refused(_, let message): ServiceError(.unavailable, "Google Play refused: \(message)")
        case .retryLater(_, let reason): ServiceError(.unavailable, "Google Play did not answer: \(reason)")
        }
    }
}
