import Core
import Cryptography
import Foundation

/// Operator webhooks, signed per Standard Webhooks. The rules are pure and tested without a
/// server: signing here, where a delivery may go in `WebhookDestinations.swift`. The SQL is in
/// `WebhookStore.swift` and `Webhooks+Lists.swift`, the delivery in `WebhookDeliverer.swift`.
enum Webhooks {
    /// `whsec_` + base64 of 24 random bytes; the HMAC key is the decoded bytes.
    static func newSecret() -> String { "whsec_" + Data(Crypto.randomBytes(24)).base64EncodedString() }

    static func key(fromSecret secret: String) -> [UInt8] {
        Array(Data(base64Encoded: String(secret.dropFirst("whsec_".count))) ?? Data())
    }

    /// `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`.
    static func signature(secret: String, id: String, timestamp: Int, body: Data) -> String {
        let signed = Array("\(id).\(timestamp).".utf8) + Array(body)
        return "v1," + Data(Crypto.hmacSHA256(key: key(fromSecret: secret), signed)).base64EncodedString()
    }

    /// The `webhook-id` of an event: one per event, the same on every endpoint and every retry.
    static func eventId(type: WebhookEventType, redemption: UUID) -> String {
        "msg_" + Crypto.sha256(Array("\(type.rawValue)|\(redemption.lowercasedString)".utf8)).hex.prefix(32)
    }
}

/// `{type, timestamp, data}`.
struct WebhookBody<D: Encodable>: Encodable {
    var type: WebhookEventType
    var timestamp: Date
    var data: D
}
