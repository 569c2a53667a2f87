import Core
import Database
import Foundation

/// The webhook lists, newest first, a page at a time (`Keyset`), each of one mode:
/// an endpoint of the other mode is not there (its deliveries are `notFound`).
extension Webhooks {
    static func list(_ pool: PGPool, _ req: Grants.ListWebhooks) async throws -> Grants.ListWebhooks.Response {
        let keyset = try Keyset(limit: req.limit, cursor: req.cursor)
        let rows = try await pool.query("""
            SELECT id, url, events, active, mode, created_at, \(Keyset.micros("created_at")) AS created_us FROM grants.webhook_endpoints
            WHERE disabled_reason IS DISTINCT FROM 'deleted' AND mode = $4 AND app_id = $5 AND \(Keyset.condition(time: "created_at", id: "id", parameter: 1))
            ORDER BY created_at DESC, id DESC LIMIT $3
            """, [keyset.afterMicros, keyset.afterId, keyset.fetch, Mode.of(req.mode).rawValue, DefaultApp.of(req.app)]).rows
        return try keyset.page(rows, micros: "created_us", endpointView)
    }

    static func deliveries(_ pool: PGPool, _ req: Grants.Deliveries) async throws -> Grants.Deliveries.Response {
        let keyset = try Keyset(limit: req.limit, cursor: req.cursor)
        let exists = try await pool.query(
            "SELECT 1 FROM grants.webhook_endpoints WHERE id = $1 AND mode = $2 AND app_id = $3",
            [req.endpointId, Mode.of(req.mode).rawValue, DefaultApp.of(req.app)]).first
        guard exists != nil else { throw ServiceError(.notFound, "no such webhook") }
        let rows = try await pool.query("""
            SELECT id, webhook_id, type, status, attempts, last_status_code, last_error, last_response, created_at, delivered_at, next_attempt_at,
                   \(Keyset.micros("created_at")) AS created_us
            FROM grants.webhook_deliveries
            WHERE endpoint_id = $1 AND \(Keyset.condition(time: "created_at", id: "id", parameter: 2))
            ORDER BY created_at DESC, id DESC LIMIT $4
            """, [req.endpointId, keyset.afterMicros, keyset.afterId, keyset.fetch]).rows
        return try keyset.page(rows, micros: "created_us", deliveryView)
    }
}
