import Core
import Cryptography
import Database
import Foundation

/// The webhook tables: endpoints, their sealed secrets, and the deliveries the deliverer claims.
/// SQL only; the rules it stores are in `Webhooks.swift` and `WebhookDestinations.swift`.
extension Webhooks {
    static func event(_ text: String) throws -> WebhookEventType {
        guard let e = WebhookEventType(rawValue: text) else {
            throw ServiceError(.internal, "an endpoint stores an unknown event type")
        }
        return e
    }

    static func endpointView(_ row: PGRow) throws -> WebhookEndpointView {
        WebhookEndpointView(
            id: try row.decode("id"), url: try row.decode("url"),
            events: try PGArray.parse(try row.decode("events")).map(event),
            active: try row.decode("active"), mode: Mode(rawValue: try row.decode("mode")) ?? .live,
            createdAt: try row.decode("created_at"))
    }

    /// Queues one delivery of an event to every active endpoint of `app` and `mode` (those of the
    /// redemption's coupon) that takes it, in the caller's transaction; a repeat of the same event
    /// adds nothing. A test coupon's event never reaches a live endpoint, nor a live one a test
    /// endpoint, and one app's event never reaches another app's endpoint. An account's own event
    /// (`appUserId.changed`: accounts are shared by every app) goes to the default app's (docs/apps.md).
    static func enqueue(
        _ tx: PGConnection, type: WebhookEventType, redemption: UUID, data: some Encodable, mode: Mode, app: UUID
    ) throws {
        let payload = String(
            decoding: try JSONEncoder.wire().encode(WebhookBody(type: type, timestamp: Date(), data: data)),
            as: UTF8.self)
        try tx.query(
            """
            INSERT INTO grants.webhook_deliveries (id, endpoint_id, webhook_id, type, payload)
            SELECT gen_random_uuid(), e.id, $1, $2, $3 FROM grants.webhook_endpoints e
            WHERE e.active AND $2 = ANY(e.events) AND e.mode = $4 AND e.app_id = $5
            ON CONFLICT (endpoint_id, webhook_id) DO NOTHING
            """, [eventId(type: type, redemption: redemption), type, payload, mode.rawValue, app])
    }

    /// Queues a `webhook.test` event to the active endpoint `endpoint` of `app` and `mode`: `data`
    /// names the endpoint. Its `webhook-id` is new each time (each test is its own event).
    static func enqueueTest(_ c: PGConnection, endpoint: UUID, mode: Mode, app: UUID) throws -> WebhookDeliveryView {
        let body = WebhookBody(
            type: .webhookTest, timestamp: Date(),
            data: WebhookTestData(endpointId: endpoint, message: "A test event from Redeem: this endpoint is reached."))
        let payload = String(decoding: try JSONEncoder.wire().encode(body), as: UTF8.self)
        guard
            let row = try c.query(
                """
                INSERT INTO grants.webhook_deliveries (id, endpoint_id, webhook_id, type, payload)
                SELECT gen_random_uuid(), e.id, $2, $3, $4 FROM grants.webhook_endpoints e WHERE e.id = $1 AND e.mode = $5 AND e.app_id = $6
                    AND e.active
                RETURNING id, webhook_id, type, status, attempts, last_status_code, last_error, last_response, created_at, delivered_at, next_attempt_at
                """,
                [
                    endpoint, "msg_test_" + UUID.random().lowercasedString.replacingOccurrences(of: "-", with: ""),
                    WebhookEventType.webhookTest,
                    payload, mode.rawValue, app,
                ]
            ).first
        else { throw ServiceError(.notFound, "no such active webhook") }
        return try deliveryView(row)
    }

    /// Whether any active endpoint takes `type` (so a batch with none skips the inserts).
    static func anyEndpoint(_ c: PGConnection, type: WebhookEventType) throws -> Bool {
        try c.prepared(
            "any_endpoint",
            "SELECT EXISTS (SELECT 1 FROM grants.webhook_endpoints WHERE active AND $1 = ANY(events)) AS yes",
            [type]
        ).first!.decode("yes", as: Bool.self)
    }

    struct Due: Sendable {
        let id: UUID
        let endpoint: UUID
        let url: String
        /// As stored: sealed (base64) under the key `secretKeyId` names, or plain when that is nil.
        let secret: String
        let secretKeyId: String?
        /// The secret a rotation replaced (stored as `secret` is), while it still signs.
        let previousSecret: (text: String, keyId: String?, expiresAt: Date)?
        let webhookId: String
        let payload: String
        let attempts: Int
    }

    /// Deletes (deactivates) an endpoint of `app` and `mode`, and its queue with it in the same
    /// statement: a deleted endpoint is sent nothing more. Answers whether there was such an endpoint.
    static func delete(_ c: PGConnection, id: UUID, mode: Mode, app: UUID) throws -> Bool {
        try c.query(
            """
            WITH gone AS (
                UPDATE grants.webhook_endpoints SET active = false, disabled_at = now(), disabled_reason = 'deleted'
                WHERE id = $1 AND mode = $2 AND app_id = $3 AND disabled_reason IS DISTINCT FROM 'deleted' RETURNING id
            ), dropped AS (
                UPDATE grants.webhook_deliveries d SET status = 'failed', last_error = 'endpoint deleted'
                FROM gone WHERE d.endpoint_id = gone.id AND d.status = 'pending'
            )
            SELECT id FROM gone
            """, [id, mode.rawValue, app]
        ).first != nil
    }

    /// What an endpoint's sealed secret is bound to: its row.
    static func secretContext(_ endpoint: UUID) -> String { "grants.webhook_endpoints/" + endpoint.lowercasedString }

    /// An endpoint's secret sealed for storing: the text of the `secret` column and its key id.
    static func seal(secret: String, endpoint: UUID, keyring: SecretKeyring) -> (text: String, keyId: String) {
        let sealed = keyring.seal(Array(secret.utf8), context: secretContext(endpoint))
        return (Data(sealed.sealed).base64EncodedString(), sealed.keyId)
    }

    /// The secret of an endpoint as stored (`secret`, `secret_key_id`).
    static func openSecret(_ stored: String, keyId: String?, endpoint: UUID, keyring: SecretKeyring) throws -> String {
        guard keyId != nil else { return stored }
        guard let bytes = Data(base64Encoded: stored) else {
            throw SecretKeyring.Failure.altered(secretContext(endpoint))
        }
        let plain = try keyring.open(Array(bytes), keyId: keyId, context: secretContext(endpoint))
        guard let text = String(bytes: plain, encoding: .utf8) else {
            throw SecretKeyring.Failure.altered(secretContext(endpoint))
        }
        return text
    }

    /// Seals under the current key every endpoint secret that is plain (stored before secrets were
    /// sealed) or sealed under another key (before a rotation), a page at a time. Instances
    /// starting together reseal each row once: the rows are locked, and one resealed no longer
    /// matches. Answers how many it sealed.
    static func resealSecrets(_ pool: PGPool, keyring: SecretKeyring) async throws -> Int {
        var total = 0
        while true {
            let sealed = try await pool.transaction { tx in
                let rows = try tx.query(
                    """
                    SELECT id, secret, secret_key_id, previous_secret, previous_secret_key_id FROM grants.webhook_endpoints
                    WHERE secret_key_id IS DISTINCT FROM $1 OR (previous_secret IS NOT NULL AND previous_secret_key_id IS DISTINCT FROM $1)
                    LIMIT 500 FOR UPDATE
                    """, [keyring.current.id]
                ).rows
                for row in rows {
                    let id: UUID = try row.decode("id")
                    let plain = try openSecret(
                        try row.decode("secret"), keyId: try row.decodeIfPresent("secret_key_id", as: String.self),
                        endpoint: id, keyring: keyring)
                    let again = seal(secret: plain, endpoint: id, keyring: keyring)
                    // A rotated-out secret still signing is sealed again too.
                    var previous: (text: String, keyId: String)?
                    if let stored = try row.decodeIfPresent("previous_secret", as: String.self) {
                        let plain = try openSecret(
                            stored, keyId: try row.decodeIfPresent("previous_secret_key_id", as: String.self), endpoint: id,
                            keyring: keyring)
                        previous = seal(secret: plain, endpoint: id, keyring: keyring)
                    }
                    try tx.query(
                        """
                        UPDATE grants.webhook_endpoints SET secret = $2, secret_key_id = $3,
                            previous_secret = coalesce($4, previous_secret), previous_secret_key_id = coalesce($5, previous_secret_key_id)
                        WHERE id = $1
                        """, [id, again.text, again.keyId, previous?.text, previous?.keyId])
                }
                return rows.count
            }
            total += sealed
            if sealed < 500 { return total }
        }
    }

    static func claimDue(_ c: PGConnection, limit: Int, lease: TimeInterval) throws -> [Due] {
        try c.query(
            """
            UPDATE grants.webhook_deliveries d SET attempts = d.attempts + 1, next_attempt_at = now() + make_interval(secs => $2)
            FROM grants.webhook_endpoints e
            WHERE e.id = d.endpoint_id AND d.id IN (
                SELECT id FROM grants.webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= now()
                ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED
            )
            RETURNING d.id, d.endpoint_id, e.url, e.secret, e.secret_key_id, e.active, d.webhook_id, d.payload, d.attempts,
                e.previous_secret, e.previous_secret_key_id, e.previous_secret_expires_at
            """, [limit, lease]
        ).rows.map {
            var previous: (text: String, keyId: String?, expiresAt: Date)?
            if let text = try $0.decodeIfPresent("previous_secret", as: String.self),
                let until = try $0.decodeIfPresent("previous_secret_expires_at", as: Date.self)
            {
                previous = (text, try $0.decodeIfPresent("previous_secret_key_id", as: String.self), until)
            }
            return Due(
                id: try $0.decode("id"), endpoint: try $0.decode("endpoint_id"), url: try $0.decode("url"),
                secret: try $0.decode("secret"),
                secretKeyId: try $0.decodeIfPresent("secret_key_id", as: String.self),
                previousSecret: previous,
                webhookId: try $0.decode("webhook_id"), payload: try $0.decode("payload"),
                attempts: try $0.decode("attempts"))
        }
    }

    /// Keeps deliveries under way (`claimed`: each id with the attempt it was claimed for) from
    /// other instances for `lease` more seconds. A delivery claimed again since (its attempt
    /// counted again) or no longer pending is not touched, and one whose retry was recorded
    /// meanwhile keeps its own time if later: a renewal that meets a recorded outcome delays the
    /// retry by at most the lease.
    static func renewLeases(_ c: PGConnection, _ claimed: [UUID: Int], lease: TimeInterval) throws {
        let (ids, attempts) = (Array(claimed.keys), Array(claimed.values))
        try c.query(
            """
            UPDATE grants.webhook_deliveries d SET next_attempt_at = greatest(d.next_attempt_at, now() + make_interval(secs => $3))
            FROM unnest($1::uuid[], $2::int[]) AS h(id, attempts)
            WHERE d.id = h.id AND d.attempts = h.attempts AND d.status = 'pending'
            """, [PGArray(ids.map(\.lowercasedString)), PGArray(attempts.map(String.init)), lease])
    }

    static func deliveryView(_ row: PGRow) throws -> WebhookDeliveryView {
        let status = try row.decode("status", as: WebhookDeliveryStatus.self)
        return WebhookDeliveryView(
            id: try row.decode("id"), webhookId: try row.decode("webhook_id"), type: try row.decode("type"),
            status: status, attempts: try row.decode("attempts"),
            lastStatusCode: try row.decodeIfPresent("last_status_code"),
            lastError: try row.decodeIfPresent("last_error"), lastResponse: try row.decodeIfPresent("last_response"),
            createdAt: try row.decode("created_at"),
            deliveredAt: try row.decodeIfPresent("delivered_at"),
            nextAttemptAt: status == .pending ? try row.decodeIfPresent("next_attempt_at") : nil)
    }
}
