import Core
import Cryptography
import Foundation
import HTTP

/// Completion of discount redemptions by Google Play purchases (docs/stores.md, "Completion on
/// Android"): the app's post of the purchase token, and Google's real-time developer
/// notifications pushed by Pub/Sub. Either way grants reads the purchase from Google and
/// acknowledges it (`grants.playPurchase`), and coupons gets only what Google said.
extension Gateway {
    /// A Pub/Sub push: `{message: {data, messageId, publishTime, attributes}, subscription}`.
    struct GooglePushBody: APIBody {
        static let schemaName: String? = "GooglePush"
        static let fieldRules: [String: [JSONSchema.Rule]] = [
            "message": [.note("data: base64 of the DeveloperNotification; messageId: Pub/Sub's id, by which repeats are recognised")],
        ]
        struct Message: Decodable {
            var data: String?
            var messageId: String
            var publishTime: String?
        }
        var message: Message
        var subscription: String?
    }

    /// What the gateway did with a push Google signed.
    struct GooglePushReceipt: Codable, Sendable, APIBody {
        static let schemaName: String? = "GooglePushReceipt"
        var messageId: String
        /// A purchase of one of Redeem's offers, recorded (or recorded before); false: another
        /// notification, a test notification, or a purchase of no offer of Redeem's.
        var recorded: Bool
        var redemptionId: UUID?
    }

    /// The decoded `data` of a push (Google's `DeveloperNotification`).
    struct DeveloperNotification: Decodable {
        struct Subscription: Decodable {
            var notificationType: Int
            var purchaseToken: String
        }
        var packageName: String
        var subscriptionNotification: Subscription?
    }

    /// The owner's app gives its reservation back: `{reason: "alreadyOwned"}`.
    struct ReleaseBody: APIBody {
        static let schemaName: String? = "ReleaseInput"
        static let fieldRules: [String: [JSONSchema.Rule]] = [
            "reason": [.note("alreadyOwned: Play Billing answered ITEM_ALREADY_OWNED; nothing was charged and the coupon is not used")],
        ]
        var reason: Coupons.GiveBack.Reason
    }

    /// `SUBSCRIPTION_PURCHASED`: a new subscription was bought.
    static let subscriptionPurchased = 4

    static let googleRoutes: [APIRoute] = [
        .route(.post, "/v1/redemptions/{id}/release",
               "Give a reserved use back: the store account already owns the plan (the owner's app)", access: .user,
               answers: [200: .json(RedemptionView.self)], errors: [404, 409, 422], handle: Gateway.releaseRedemption),
        .route(.post, "/v1/stores/google/notifications",
               "Google Play real-time developer notifications, pushed by Pub/Sub (public; Google's OIDC token is checked)",
               answers: [200: .json(GooglePushReceipt.self)], errors: [401, 422, 429, 503], handle: Gateway.googleNotification),
    ]

    /// The owner's app gives its reserved use back (`alreadyOwned`): coupons ends it `released`.
    func releaseRedemption(_ req: HTTPRequest, _ user: Authenticator.User, _ body: Incoming<ReleaseBody>) async throws -> HTTPResponse {
        let id = try req.id(or: "no such redemption")
        let b = try body.read()
        return .json(200, try await coupons.request(Coupons.GiveBack(id: id, accountId: user.account, reason: b.reason)))
    }

    /// The app's post of a Play purchase token, after its redemption is found to be the caller's.
    /// The purchase is read with the Google Play settings of the app the request names
    /// (`Redeem-App`, docs/apps.md), and completes only that app's coupons.
    func playPurchase(
        redemption id: UUID, token: String, account: UUID, appUserId: String, app: UUID
    ) async throws -> HTTPResponse {
        _ = try await coupons.request(Coupons.GetRedemption(id: id, accountId: account))
        let storeApp = app == DefaultApp.id ? nil : app
        let transaction = try await grants.request(Grants.PlayPurchase(purchaseToken: token, app: storeApp)).transaction
        let answer = try await coupons.request(
            Coupons.StorePurchase(
                transaction: transaction, redemptionId: id, accountId: account, appUserId: appUserId, storeApp: storeApp))
        return .json(200, answer.redemption)
    }

    /// Google's push: the bearer token verified (401 otherwise, counted against the address), then
    /// a purchase recorded by coupons, which de-duplicates by `messageId`. Pub/Sub retries anything
    /// but a 2xx, so a push that is Google's but about nothing of Redeem's is acknowledged, and only
    /// a failure on our side (Google or coupons not answering) is not.
    func googleNotification(_ req: HTTPRequest, _ body: Incoming<GooglePushBody>) async throws -> HTTPResponse {
        try abuse.checkStoreNotifications(ip: req.clientAddress)
        guard req.body.count <= Self.maxNotificationBytes else {
            throw HTTPError.invalid("message", "a push is at most \(Self.maxNotificationBytes / 1024) KiB")
        }
        // The body's shape first (422), as for Apple's notifications; then whose it is (401).
        let b = try body.read()
        guard let verifier = googlePush else {
            abuse.storeNotificationRefused(ip: req.clientAddress)
            throw ServiceError(.invalidSignedData, "this server is not set up to take Google's pushes")
        }
        do {
            try await verifier.verify(authorization: req.header("authorization"))
        } catch let e as ServiceError where e.code == .invalidSignedData {
            abuse.storeNotificationRefused(ip: req.clientAddress)
            throw e
        }
        let messageId = b.message.messageId
        let ignored = GooglePushReceipt(messageId: messageId, recorded: false)
        guard let data = b.message.data.flatMap({ Data(base64Encoded: $0) }),
              let notification = try? JSONDecoder().decode(DeveloperNotification.self, from: data) else {
            throw HTTPError.invalid("message", "message.data must be base64 of a developer notification")
        }
        guard let sub = notification.subscriptionNotification, sub.notificationType == Self.subscriptionPurchased else {
            return .json(200, ignored)
        }
        // Another package than the environment's: another app's, read with that app's own Google
        // Play settings (docs/apps.md); grants answers which app, and it completes only its coupons.
        let package = notification.packageName == verifier.settings.packageName ? nil : notification.packageName
        do {
            let read = try await grants.request(
                Grants.PlayPurchase(purchaseToken: sub.purchaseToken, packageName: package))
            let transaction = read.transaction
            guard transaction.offerIdentifier != nil else { return .json(200, ignored) }
            let answer = try await coupons.request(
                Coupons.StorePurchase(
                    transaction: transaction, notificationUUID: "google:\(messageId)", storeApp: read.app))
            return .json(200, GooglePushReceipt(messageId: messageId, recorded: true, redemptionId: answer.redemption.redemptionId))
        } catch let e as ServiceError where [.invalid, .transactionInUse, .notFound].contains(e.code) {
            logger.info("google notification ignored", ["notification.id": messageId, "error.code": e.code.rawValue, "error.field": e.field ?? ""])
            return .json(200, ignored)
        }
    }
}
