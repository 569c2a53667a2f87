import Backend
import Bus
import Core
import Database
import Foundation

/// An operator's changes to an endpoint after it is made: its URL, events and whether it is on
/// (`PATCH`), its secret (rotated), and a delivery sent again. Each in one transaction, with its
/// audit record; a change never shows the secret except the new one, once.
extension GrantsService {
    func updateWebhook(_ req: Grants.UpdateWebhook, _ context: BusContext) async throws -> WebhookEndpointView {
        let mode = Mode.of(req.mode)
        let app = DefaultApp.of(req.app)
        // Checked before anything is read: bad input is a 422 naming its field, for any endpoint.
        var checked: String?
        if let text = req.url {
            checked = try await Webhooks.checkURL(text, allowPrivate: config.webhookAllowPrivate).absoluteString
        }
        let url = checked
        let events = try req.events.map { try Webhooks.checkEvents($0).map(\.rawValue) }
        return try await pool.transaction { tx in
            guard let before = try Webhooks.find(tx, id: req.id, mode: mode, app: app) else {
                throw ServiceError(.notFound, "no such webhook")
            }
            let after = try Webhooks.update(tx, id: req.id, url: url, events: events, enabled: req.enabled)
            try Self.audit(
                tx, req.actor, .webhookUpdate, req.id.uppercasedString, before: before, after: after, context, mode, app: app)
            return after
        }
    }

    func rotateSecret(
        _ req: Grants.RotateWebhookSecret, _ context: BusContext
    ) async throws -> Grants.RotateWebhookSecret.Response {
        let mode = Mode.of(req.mode)
        let app = DefaultApp.of(req.app)
        let secret = Webhooks.newSecret()
        let sealed = Webhooks.seal(secret: secret, endpoint: req.id, keyring: keyring)
        return try await pool.transaction { tx in
            guard let endpoint = try Webhooks.find(tx, id: req.id, mode: mode, app: app) else {
                throw ServiceError(.notFound, "no such webhook")
            }
            let until = try Webhooks.rotate(tx, id: req.id, sealed: sealed, overlap: Webhooks.secretOverlap)
            // The record says that it happened and until when the old secret signs; never a secret.
            struct Rotated: Encodable {
                var endpoint: WebhookEndpointView
                var previousSecretExpiresAt: Date
            }
            try Self.audit(
                tx, req.actor, .webhookRotateSecret, req.id.uppercasedString, before: nil,
                after: Rotated(endpoint: endpoint, previousSecretExpiresAt: until), context, mode, app: app)
            return .init(endpoint: endpoint, secret: secret, previousSecretExpiresAt: until)
        }
    }
}

extension Webhooks {
    static let endpointColumns = "id, url, events, active, mode, created_at"

    /// An endpoint of `app` and `mode` not deleted, locked for a change.
    static func find(_ tx: PGConnection, id: UUID, mode: Mode, app: UUID) throws -> WebhookEndpointView? {
        try tx.query(
            """
            SELECT \(endpointColumns) FROM grants.webhook_endpoints
            WHERE id = $1 AND mode = $2 AND app_id = $3 AND disabled_reason IS DISTINCT FROM 'deleted' FOR UPDATE
            """, [id, mode.rawValue, app]
        ).first.map(endpointView)
    }

    /// Changes what is given of an endpoint found (`find`). Switched on, it is active with no reason
    /// (whatever disabled it: a 410, or the operator); switched off, its queue ends as a deletion
    /// ends it, in the same statement, so nothing more is sent to it.
    static func update(
        _ tx: PGConnection, id: UUID, url: String?, events: [String]?, enabled: Bool?
    ) throws -> WebhookEndpointView {
        let row = try tx.query(
            """
            WITH changed AS (
                UPDATE grants.webhook_endpoints SET url = coalesce($2::text, url), events = coalesce($3::text[], events),
                    active = coalesce($4::boolean, active),
                    disabled_at = CASE WHEN $4::boolean IS NULL THEN disabled_at WHEN $4::boolean THEN NULL
                                       WHEN active THEN now() ELSE disabled_at END,
                    disabled_reason = CASE WHEN $4::boolean IS NULL THEN disabled_reason WHEN $4::boolean THEN NULL
                                           WHEN active THEN 'disabled' ELSE disabled_reason END
                WHERE id = $1 RETURNING \(endpointColumns)
            ), dropped AS (
                UPDATE grants.webhook_deliveries d SET status = 'failed', last_error = 'endpoint disabled'
                FROM changed WHERE d.endpoint_id = changed.id AND NOT changed.active AND d.status = 'pending'
            )
            SELECT * FROM changed
            """, [id, url, events.map { PGArray($0) }, enabled]
        ).first
        guard let row else { throw ServiceError(.notFound, "no such webhook") }
        return try endpointView(row)
    }

    /// Gives an endpoint found (`find`) the secret `sealed`, keeping the one it replaces for
    /// `overlap` seconds. Answers until when that one still signs.
    static func rotate(
        _ tx: PGConnection, id: UUID, sealed: (text: String, keyId: String), overlap: TimeInterval
    ) throws -> Date {
        guard
            let row = try tx.query(
                """
                UPDATE grants.webhook_endpoints SET previous_secret = secret, previous_secret_key_id = secret_key_id,
                    previous_secret_expires_at = now() + make_interval(secs => $4), secret = $2, secret_key_id = $3
                WHERE id = $1 RETURNING previous_secret_expires_at
                """, [id, sealed.text, sealed.keyId, overlap]
            ).first
        else { throw ServiceError(.notFound, "no such webhook") }
        return try row.decode("previous_secret_expires_at")
    }

    /// Makes a delivery due now, whatever it came to: the deliverer sends the same event (the same
    /// `webhook-id` and body) again, as one more attempt. A failure after it is retried on the
    /// schedule's gaps that are left, if any.
    static func retry(_ tx: PGConnection, _ req: Grants.RetryDelivery) throws -> WebhookDeliveryView {
        guard let endpoint = try find(tx, id: req.endpointId, mode: Mode.of(req.mode), app: DefaultApp.of(req.app)) else {
            throw ServiceError(.notFound, "no such webhook")
        }
        guard endpoint.active else {
            throw ServiceError(
                .invalidState, "the endpoint is disabled: switch it on (PATCH enabled: true) before a retry")
        }
        guard
            let row = try tx.query(
                """
                UPDATE grants.webhook_deliveries SET status = 'pending', next_attempt_at = now(), delivered_at = NULL
                WHERE id = $1 AND endpoint_id = $2
                RETURNING id, webhook_id, type, status, attempts, last_status_code, last_error, last_response, created_at, delivered_at,
                    next_attempt_at
                """, [req.deliveryId, req.endpointId]
            ).first
        else { throw ServiceError(.notFound, "no such delivery") }
        return try deliveryView(row)
    }
}
