import Core
import Foundation
import HTTP

/// Routes of SPEC §4.4 (webhooks) and `/v1/me/entitlements`.
extension Gateway {
    struct WebhookBody: Decodable { var url: String; var events: [String] }
    struct CreatedWebhook: Encodable {
        var id: UUID; var url: String; var events: [WebhookEventType]; var active: Bool; var mode: Mode; var createdAt: Date; var secret: String
    }

    func addGrantRoutes(to r: inout Router) {
        r.get("/v1/me/entitlements") { [self] req in
            let user = try await auth.requireUser(req)
            return .json(200, try await grants.request(Grants.Entitlements(appUserId: user.appUserId)))
        }
        // An endpoint belongs to its creating key's mode, and gets that mode's events only.
        r.post("/v1/webhooks") { [self] req in
            let key = try await auth.requireRole(req, .admin)
            let b = try JSONBody.decode(WebhookBody.self, from: req)
            let made = try await grants.request(Grants.CreateWebhook(url: b.url, events: b.events, mode: key.mode))
            let e = made.endpoint
            return .json(201, CreatedWebhook(id: e.id, url: e.url, events: e.events, active: e.active, mode: e.mode, createdAt: e.createdAt,
                                             secret: made.secret))
        }
        r.get("/v1/webhooks") { [self] req in
            let key = try await auth.requireRole(req, .admin)
            return .json(200, try await grants.request(Grants.ListWebhooks(limit: try Query.limit(req), cursor: req.query["cursor"], mode: key.mode)))
        }
        r.delete("/v1/webhooks/{id}") { [self] req in
            let key = try await auth.requireRole(req, .admin)
            guard let id = req.pathParameters["id"].flatMap(UUID.init(parsing:)) else { throw ServiceError(.notFound, "no such webhook") }
            _ = try await grants.request(Grants.DeleteWebhook(id: id, mode: key.mode))
            return .noContent()
        }
        r.get("/v1/webhooks/{id}/deliveries") { [self] req in
            let key = try await auth.requireRole(req, .admin)
            guard let id = req.pathParameters["id"].flatMap(UUID.init(parsing:)) else { throw ServiceError(.notFound, "no such webhook") }
            let page = try await grants.request(Grants.Deliveries(endpointId: id, mode: key.mode, limit: try Query.limit(req), cursor: req.query["cursor"]))
            return .json(200, page)
        }
    }
}
