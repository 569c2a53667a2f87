import Core
import Cryptography
import Foundation
import HTTP

/// Completion of discount redemptions by store purchases (docs/stores.md, flow step 4): the app's
/// post of what StoreKit gave it, and Apple's notifications. Nothing unverified crosses the bus:
/// the gateway checks Apple's signature here (`AppleSignedData`) and sends coupons only the
/// verified fields (`VerifiedStoreTransaction`). A support key may still confirm by hand.
extension Gateway {
    /// The owner's app posts `signedTransaction` (or `transactionId`, which grants fetches from
    /// the App Store Server API); a support key posts the unverified `pricePaid` and
    /// `storeTransactionId`.
    struct PurchaseBody: APIBody {
        static let schemaName: String? = "PurchaseInput"
        static let fieldRules: [String: [JSONSchema.Rule]] = [
            "signedTransaction": [.maxLength(Gateway.maxSignedDocument),
                                  .note("the owner's app: the JWS StoreKit gave it (Transaction.jwsRepresentation); verified against Apple's roots")],
            "transactionId": [.note("the owner's app, instead of signedTransaction: fetched from the App Store Server API and verified")],
            "purchaseToken": [.maxLength(500), .note("the owner's Android app: Google Play's purchase token, read from Google and acknowledged there")],
            "pricePaid": [.note("support keys only, with storeTransactionId: confirmed by hand, unverified")],
            "storeTransactionId": [.note("support keys only, with pricePaid")],
        ]
        var signedTransaction: String?
        var transactionId: String?
        var purchaseToken: String?
        var pricePaid: Money?
        var storeTransactionId: String?
    }

    /// An App Store Server Notification V2.
    struct AppleNotificationBody: APIBody {
        static let schemaName: String? = "AppleNotification"
        static let fieldRules: [String: [JSONSchema.Rule]] = [
            "signedPayload": [.maxLength(Gateway.maxSignedDocument), .note("a JWS signed through Apple's certificate chain")],
        ]
        var signedPayload: String
    }

    /// What the gateway did with a notification Apple signed.
    struct AppleNotificationReceipt: Codable, Sendable, APIBody {
        static let schemaName: String? = "AppleNotificationReceipt"
        var notificationUUID: String
        /// A purchase with one of Redeem's offer codes, recorded (or recorded before); false: a
        /// notification of another kind, or about another offer, acknowledged and ignored.
        var recorded: Bool
        /// The redemption the purchase stands for, when recorded.
        var redemptionId: UUID?
    }

    /// Apple's notifications and transactions are a few KiB; a notification body may be at most
    /// `maxNotificationBytes`, refused before anything is parsed.
    static let maxSignedDocument = 32 * 1024
    static let maxNotificationBytes = 64 * 1024

    static let storeRoutes: [APIRoute] = [
        .route(.post, "/v1/redemptions/{id}/purchase",
               "Complete a discount by its store purchase: the owner's app with Apple's signed transaction, or a support key by hand",
               access: .userOr(.support), answers: [200: .json(RedemptionView.self)], errors: [401, 404, 409, 422, 503, 504],
               handle: Gateway.purchase),
        .route(.post, "/v1/stores/apple/notifications", "App Store Server Notifications V2 (public; Apple's signature is checked)",
               answers: [200: .json(AppleNotificationReceipt.self)], errors: [401, 422, 429], handle: Gateway.appleNotification),
    ]

    func purchase(_ req: HTTPRequest, _ caller: Principal, _ body: Incoming<PurchaseBody>) async throws -> HTTPResponse {
        let id = try req.id(or: "no such redemption")
        let b = try body.read()
        // A support member confirms by hand as a support key does.
        var caller = caller
        var member: AuditActor?
        if case .user(let account, _, let session, let claimed) = caller,
            b.pricePaid != nil || b.storeTransactionId != nil,
            case (let role?, let app) = try await auth.memberRole(
                req, account: account, session: session, claimed: claimed)
        {
            // Its role in the app it names (`Redeem-App`); without one there, none.
            guard role >= .support else { throw Authenticator.forbidden }
            caller = .apiKey(id: account, role: role, mode: try Authenticator.memberMode(req), app: app)
            member = AuditActor(type: .member, id: account)
        }
        switch caller {
        case .apiKey(let keyId, _, let mode, let app):
            guard b.signedTransaction == nil, b.transactionId == nil, b.purchaseToken == nil else {
                throw HTTPError.invalid("signedTransaction", "an API key confirms by hand, with pricePaid and storeTransactionId")
            }
            guard let price = b.pricePaid else { throw HTTPError.invalid("pricePaid", "pricePaid is required") }
            guard let transaction = b.storeTransactionId else { throw HTTPError.invalid("storeTransactionId", "storeTransactionId is required") }
            return .json(200, try await coupons.request(Coupons.Purchase(id: id, mode: mode, app: app,
                pricePaid: price, storeTransactionId: transaction)
                .by(member ?? AuditActor(type: .apiKey, id: keyId))))
        case .user(let account, let appUserId, _, _):
            // A user's word on what was paid is not proof; only a support key may confirm by hand.
            guard b.pricePaid == nil, b.storeTransactionId == nil else { throw Authenticator.forbidden }
            if let token = b.purchaseToken {
                guard b.signedTransaction == nil, b.transactionId == nil else {
                    throw HTTPError.invalid("purchaseToken", "send purchaseToken (Google Play) or signedTransaction (the App Store), not both")
                }
                return try await playPurchase(
                    redemption: id, token: token, account: account, appUserId: appUserId,
                    app: try await auth.endUserApp(req))
            }
            let signed: String
            switch (b.signedTransaction, b.transactionId) {
            case (let s?, nil):
                signed = try Self.document(s, field: "signedTransaction")
            case (nil, let t?):
                _ = try appleVerifier()
                // The redemption first: someone else's, or none, is 404 before Apple is asked.
                _ = try await coupons.request(Coupons.GetRedemption(id: id, accountId: account))
                signed = try await grants.request(Grants.AppleTransaction(transactionId: t)).signedTransaction
            default:
                throw HTTPError.invalid("signedTransaction", "send signedTransaction or transactionId (one of them)")
            }
            let transaction = try verifiedTransaction(signed)
            let answer = try await coupons.request(Coupons.StorePurchase(transaction: transaction, redemptionId: id, accountId: account,
                                                                         appUserId: appUserId))
            return .json(200, answer.redemption)
        }
    }

    /// Apple's notification: verified (401 otherwise), then, for a purchase with an offer code,
    /// recorded by coupons, which de-duplicates by `notificationUUID`. Apple retries anything
    /// but a 2xx for days, so a notification that is Apple's but not about one of Redeem's
    /// offers is acknowledged, and only a failure on our side (coupons unreachable) is not.
    func appleNotification(_ req: HTTPRequest, _ body: Incoming<AppleNotificationBody>) async throws -> HTTPResponse {
        // Cheap refusals first: an address that keeps sending what is not Apple's, an oversized body.
        try abuse.checkStoreNotifications(ip: req.clientAddress)
        guard req.body.count <= Self.maxNotificationBytes else {
            // 422 rather than 413: the described limit is signedPayload's length.
            throw HTTPError.invalid("signedPayload", "a notification is at most \(Self.maxNotificationBytes / 1024) KiB")
        }
        let b = try body.read()
        let payload = try Self.document(b.signedPayload, field: "signedPayload")
        let notification: ResponseBodyV2DecodedPayload
        let transaction: VerifiedStoreTransaction
        do {
            let verifier = try appleVerifier()
            notification = try refusingUnsigned(ip: req.clientAddress) { try verifier.verifyNotification(payload) }
            guard Self.completesOffer(notification.notificationType), let info = notification.data?.signedTransactionInfo else {
                return .json(200, AppleNotificationReceipt(notificationUUID: notification.notificationUUID, recorded: false))
            }
            transaction = try refusingUnsigned(ip: req.clientAddress) { try Self.verified(verifier.verifyTransaction(info)) }
        }
        guard transaction.offerType == VerifiedStoreTransaction.offerCode, transaction.offerIdentifier != nil else {
            return .json(200, AppleNotificationReceipt(notificationUUID: notification.notificationUUID, recorded: false))
        }
        do {
            let answer = try await coupons.request(Coupons.StorePurchase(transaction: transaction, notificationUUID: notification.notificationUUID))
            return .json(200, AppleNotificationReceipt(notificationUUID: notification.notificationUUID, recorded: true,
                                                       redemptionId: answer.redemption.redemptionId))
        } catch let e as ServiceError where [.invalid, .transactionInUse, .notFound].contains(e.code) {
            // Apple's, but not ours to complete (another offer, a purchase a support key already
            // confirmed): sending it again would change nothing.
            logger.info("apple notification ignored", ["notification.id": notification.notificationUUID, "error.code": e.code.rawValue,
                                                        "error.field": e.field ?? ""])
            return .json(200, AppleNotificationReceipt(notificationUUID: notification.notificationUUID, recorded: false))
        }
    }

    /// A signed document no longer than Apple's ever are (422 naming the field otherwise).
    static func document(_ text: String, field: String) throws -> String {
        guard text.utf8.count <= maxSignedDocument else {
            throw HTTPError.invalid(field, "\(field) is at most \(maxSignedDocument) bytes")
        }
        return text
    }

    /// `OFFER_REDEEMED`, and `SUBSCRIBED` (whose transaction then must carry offer type 3).
    static func completesOffer(_ type: ResponseBodyV2DecodedPayload.NotificationType) -> Bool {
        type == .offerRedeemed || type == .subscribed
    }

    /// The verifier, or 401 when the gateway has no Apple roots configured.
    func appleVerifier() throws -> AppleSignedData {
        guard let appleSignedData else {
            throw ServiceError(.invalidSignedData, "this server is not set up to verify the App Store's signed data")
        }
        return appleSignedData
    }

    /// A transaction the app sent or grants fetched, verified (401 otherwise).
    func verifiedTransaction(_ signed: String) throws -> VerifiedStoreTransaction {
        let verifier = try appleVerifier()
        do {
            return Self.verified(try verifier.verifyTransaction(signed))
        } catch {
            throw Self.refusal(error)
        }
    }

    /// Runs a verification; a refusal counts against the sending address.
    private func refusingUnsigned<T>(ip: String, _ verify: () throws -> T) throws -> T {
        do {
            return try verify()
        } catch let failure as AppleSignedData.Failure {
            abuse.storeNotificationRefused(ip: ip)
            throw Self.refusal(failure)
        }
    }

    static func refusal(_ failure: AppleSignedData.Failure) -> ServiceError {
        ServiceError(.invalidSignedData, "not signed by the App Store for this app (\(failure))")
    }

    /// The fields coupons needs, from what Apple signed: the environment comes from Apple's
    /// payload (any but Production is sandbox), never from the client.
    static func verified(_ t: JWSTransactionDecodedPayload) -> VerifiedStoreTransaction {
        VerifiedStoreTransaction(store: .appStore, transactionId: t.transactionId, originalTransactionId: t.originalTransactionId,
                                 productId: t.productId, offerType: t.offerType?.rawValue, offerIdentifier: t.offerIdentifier,
                                 appAccountToken: t.appAccountToken, priceMilliunits: t.price, currency: t.currency,
                                 sandbox: t.environment != .production, purchaseDate: t.purchaseDate)
    }
}
