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

    /// How long a rotated-out secret still signs deliveries, beside the new one.
    static let secretOverlap: TimeInterval = 24 * 3600

    /// The secrets a delivery is signed with at `now`: the endpoint's secret, and the one a rotation
    /// replaced while its overlap lasts (until `expiresAt`, not at it).
    static func signingSecrets(current: String, previous: (secret: String, expiresAt: Date)?, now: Date) -> [String] {
        guard let previous, now < previous.expiresAt else { return [current] }
        return [current, previous.secret]
    }

    /// The `webhook-signature` header's value: one `v1,<signature>` per secret, space-separated,
    /// the current secret's first (Standard Webhooks: a receiver accepts any one that verifies).
    static func signatureHeader(secrets: [String], id: String, timestamp: Int, body: Data) -> String {
        secrets.map { signature(secret: $0, id: id, timestamp: timestamp, body: body) }.joined(separator: " ")
    }

    /// The events of an endpoint, checked (`events` names the field): a non-empty list of events
    /// an endpoint may take, each once, in order.
    static func checkEvents(_ names: [String]) throws -> [WebhookEventType] {
        let events = names.compactMap(WebhookEventType.init(rawValue:)).filter(WebhookEventType.subscribable.contains)
        guard !events.isEmpty, events.count == names.count else {
            throw ServiceError(
                .invalid, "events must be a non-empty list of \(WebhookEventType.listed)", field: "events")
        }
        return Set(events).sorted { $0.rawValue < $1.rawValue }
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
