import Core
import Cryptography
import Foundation
import Synchronization

/// Plays the App Store sending App Store Server Notifications V2: builds a `signedPayload`
/// (the notification, its transaction signed on its own inside `data`), signed by the test
/// CA, and POSTs `{"signedPayload": …}` to a URL, as Apple does.
public struct AppleNotificationSender: Sendable {
    public let ca: TestAppleCA
    public let bundleId: String
    public let appAppleId: Int64?
    public let environment: AppStoreEnvironment

    public init(ca: TestAppleCA, bundleId: String, appAppleId: Int64?, environment: AppStoreEnvironment = .production) {
        self.ca = ca
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.environment = environment
    }

    /// The notification Apple would send about `transaction` (signed at `signedDate`, as is the
    /// transaction inside it). A retried delivery carries the same `notificationUUID`.
    public func notification(_ type: ResponseBodyV2DecodedPayload.NotificationType, subtype: ResponseBodyV2DecodedPayload.Subtype? = nil,
                             transaction: JWSTransactionDecodedPayload?, notificationUUID: String = UUID().uuidString.lowercased(),
                             signedDate: Date = Date()) -> ResponseBodyV2DecodedPayload {
        var signedTransaction: String?
        if var transaction {
            transaction.signedDate = signedDate
            signedTransaction = ca.sign(transaction)
        }
        let data = ResponseBodyV2DecodedPayload.NotificationData(appAppleId: appAppleId, bundleId: bundleId, environment: environment,
                                                                 signedTransactionInfo: signedTransaction)
        return ResponseBodyV2DecodedPayload(notificationType: type, subtype: subtype, notificationUUID: notificationUUID,
                                            signedDate: signedDate, data: data)
    }

    /// The `signedPayload` of a notification.
    public func signedPayload(_ notification: ResponseBodyV2DecodedPayload) -> String { ca.sign(notification) }

    /// POSTs `{"signedPayload": …}` to `url` as JSON.
    public func send(_ signedPayload: String, to url: URL) async throws -> HTTPClient.Response {
        let body = try JSONSerialization.data(withJSONObject: ["signedPayload": signedPayload])
        let client = Self.clients.withLock { clients in
            if let client = clients[url] { return client }
            let client = HTTPClient(base: url)
            clients[url] = client
            return client
        }
        return try await client.send("POST", url.absoluteString, body: body, headers: ["Content-Type": "application/json"])
    }

    /// One client per address: a URLSession keeps its connections until it is invalidated, so a
    /// client per notification left one open at the gateway for each.
    private static let clients = Mutex<[URL: HTTPClient]>([:])
}
