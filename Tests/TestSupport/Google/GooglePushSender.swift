import Core
import Cryptography
import Foundation

/// Plays Pub/Sub pushing Google Play's real-time developer notifications, with signing keys of
/// its own: a JWKS file of its public key (`REDEEM_GOOGLE_JWKS`), OIDC tokens as Google signs
/// them for a push subscription (RS256, `iss` `https://accounts.google.com`, `aud`, `email`,
/// `email_verified`), and push bodies in Pub/Sub's shape with the notification base64 in `data`.
public final class GooglePushSender: Sendable {
    public let key: AsymmetricKey
    public let keyId: String
    public let serviceAccount: String
    public let audience: String
    /// The JWKS file with the public key.
    public let jwksFile: URL
    private let directory: URL

    public struct Claims: Codable, Sendable {
        public var iss: String
        public var aud: String
        public var azp: String
        public var email: String
        public var email_verified: Bool
        public var iat: Int
        public var exp: Int
        public var sub: String
    }

    public init(audience: String = "https://redeem.example.com/v1/stores/google/notifications",
                serviceAccount: String = "rtdn-push@redeem-tests.iam.gserviceaccount.com") throws {
        key = AsymmetricKey.generateRSA()!
        keyId = Crypto.randomBytes(20).hex
        self.audience = audience
        self.serviceAccount = serviceAccount
        directory = try Project.temporaryDirectory("google-jwks")
        jwksFile = directory.appendingPathComponent("certs.json")
        let (n, e) = key.rsaComponents!
        let jwks: [String: Any] = ["keys": [["kty": "RSA", "alg": "RS256", "use": "sig", "kid": keyId, "n": Base64URL.encode(n), "e": Base64URL.encode(e)]]]
        try JSONSerialization.data(withJSONObject: jwks).write(to: jwksFile)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// A token as Google signs one for the push subscription; each part can be made wrong.
    public func token(audience: String? = nil, email: String? = nil, issuer: String = "https://accounts.google.com",
                      expiresIn: Int = 3600, signer: AsymmetricKey? = nil) throws -> String {
        let now = Int(Date().timeIntervalSince1970)
        let claims = Claims(iss: issuer, aud: audience ?? self.audience, azp: "1000000000000000000001", email: email ?? serviceAccount,
                            email_verified: true, iat: now - 5, exp: now + expiresIn, sub: "1000000000000000000001")
        return try JWT.sign(claims, key: signer ?? key, kid: keyId)
    }

    /// A push body for a `subscriptionNotification` of `type` (4: SUBSCRIPTION_PURCHASED).
    public static func body(packageName: String, purchaseToken: String, type: Int = 4, messageId: String = UUID().uuidString) -> [String: Any] {
        let notification: [String: Any] = [
            "version": "1.0", "packageName": packageName, "eventTimeMillis": String(Int(Date().timeIntervalSince1970 * 1000)),
            "subscriptionNotification": ["version": "1.0", "notificationType": type, "purchaseToken": purchaseToken],
        ]
        let data = try! JSONSerialization.data(withJSONObject: notification)
        return ["message": ["data": data.base64EncodedString(), "messageId": messageId, "publishTime": Timestamp.iso8601(Date())],
                "subscription": "projects/redeem-tests/subscriptions/play-rtdn"]
    }

    /// A test notification, as the Play Console sends one.
    public static func testBody(packageName: String, messageId: String = UUID().uuidString) -> [String: Any] {
        let notification: [String: Any] = ["version": "1.0", "packageName": packageName, "eventTimeMillis": "1", "testNotification": ["version": "1.0"]]
        let data = try! JSONSerialization.data(withJSONObject: notification)
        return ["message": ["data": data.base64EncodedString(), "messageId": messageId], "subscription": "projects/redeem-tests/subscriptions/play-rtdn"]
    }
}
