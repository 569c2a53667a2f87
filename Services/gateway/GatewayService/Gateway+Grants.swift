import Core
import Foundation
import HTTP

/// Routes of webhooks and `/v1/me/entitlements`.
extension Gateway {
    /// `events` is read as text, so that grants answers a wrong one naming the events there are.
    struct WebhookBody: APIBody {
        static let schemaName: String? = "WebhookInput"
        static let fieldRules: [String: [JSONSchema.Rule]] = ["url": [.format("uri")], "events": [.items([.oneOf(WebhookEventType.subscribable.map(\.rawValue))])]]
        var url: String
        var events: [String]
    }
    struct CreatedWebhook: APIBody, Encodable {
        static let schemaName: String? = "CreatedWebhook"
        var id: UUID; var url: String; var events: [WebhookEventType]; var active: Bool; var mode: Mode; var createdAt: Date; var secret: String
    }

    /// Each field left out stays as it is. `enabled: true` switches on an endpoint a 410 (or the
    /// operator) disabled; `false` switches it off and ends its queue.
    struct WebhookPatchBody: APIBody {
        static let schemaName: String? = "WebhookPatch"
        static let fieldRules: [String: [JSONSchema.Rule]] = [
            "url": [.format("uri")], "events": [.items([.oneOf(WebhookEventType.subscribable.map(\.rawValue))])]
        ]
        var url: String?
        var events: [String]?
        var enabled: Bool?
    }
    struct RotatedWebhookSecret: APIBody, Encodable {
        static let schemaName: String? = "RotatedWebhookSecret"
        static let fieldRules: [String: [JSONSchema.Rule]] = [
            "secret": [.note("the new secret, shown once")],
            "previousSecretExpiresAt": [.note("until then each delivery is signed with the old secret too")]
        ]
        var id: UUID
        var secret: String
        var previousSecretExpiresAt: Date
    }

    static let grantRoutes: [APIRoute] = [
        .route(.get, "/v1/me/entitlements", "Active entitlements from the grant ledger", access: .user,
               answers: [200: .json(Grants.Entitlements.Response.self)], handle: Gateway.entitlements),
        // An endpoint belongs to its creating key's mode, and gets that mode's events only.
        .route(
            .post, "/v1/webhooks", "Add a webhook endpoint (the secret is shown once)", access: .appKey(.admin),
            answers: [201: .json(CreatedWebhook.self)], errors: [422], handle: Gateway.createWebhook),
        .route(
            .get, "/v1/webhooks", "List webhook endpoints, newest first", access: .appKey(.admin),
            query: QueryParameter.page,
            answers: [200: .json(Page<WebhookEndpointView>.self)], errors: [422], handle: Gateway.listWebhooks),
        .route(
            .delete, "/v1/webhooks/{id}", "Remove a webhook endpoint", access: .appKey(.admin),
            answers: [204: .empty], errors: [404], handle: Gateway.deleteWebhook),
        .route(
            .patch, "/v1/webhooks/{id}", "Change a webhook endpoint's URL, events or whether it is enabled",
            access: .appKey(.admin), answers: [200: .json(WebhookEndpointView.self)], errors: [404, 422],
            handle: Gateway.updateWebhook),
        .route(
            .post, "/v1/webhooks/{id}/rotate-secret", "A new secret; the old one signs too for 24 h",
            access: .appKey(.admin), answers: [200: .json(RotatedWebhookSecret.self)], errors: [404],
            handle: Gateway.rotateWebhookSecret),
        .route(
            .post, "/v1/webhooks/{id}/deliveries/{deliveryId}/retry", "Send a delivery again",
            access: .appKey(.admin), answers: [200: .json(WebhookDeliveryView.self)], errors: [404, 409],
            handle: Gateway.retryDelivery),
        .route(
            .post, "/v1/webhooks/{id}/test", "Send a test event (webhook.test) to an endpoint", access: .appKey(.admin),
            answers: [201: .json(WebhookDeliveryView.self)], errors: [404], handle: Gateway.testWebhook),
        .route(
            .get, "/v1/webhooks/{id}/deliveries", "An endpoint's delivery log, newest first", access: .appKey(.admin),
            query: QueryParameter.page,
            answers: [200: .json(Page<WebhookDeliveryView>.self)], errors: [404, 422], handle: Gateway.deliveries)
    ]

    func entitlements(_ req: HTTPRequest, _ user: Authenticator.User) async throws -> HTTPResponse {
        .json(200, try await grants.request(Grants.Entitlements(appUserId: user.appUserId, app: user.app)))
    }

    func createWebhook(_ req: HTTPRequest, _ key: Authenticator.Key, _ body: Incoming<WebhookBody>) async throws -> HTTPResponse {
        let b = try body.read()
        let made = try await grants.request(
            Grants.CreateWebhook(url: b.url, events: b.events, mode: key.mode, app: key.app).by(key.actor))
        let e = made.endpoint
        return .json(201, CreatedWebhook(id: e.id, url: e.url, events: e.events, active: e.active, mode: e.mode, createdAt: e.createdAt,
                                         secret: made.secret))
    }

    func listWebhooks(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        .json(
            200,
            try await grants.request(
                Grants.ListWebhooks(
                    limit: try Query.limit(req), cursor: req.query["cursor"], mode: key.mode, app: key.app)))
    }

    func deleteWebhook(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        let id = try req.id(or: "no such webhook")
        _ = try await grants.request(Grants.DeleteWebhook(id: id, mode: key.mode, app: key.app).by(key.actor))
        return .noContent()
    }

    func testWebhook(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        let id = try req.id(or: "no such webhook")
        return .json(201, try await grants.request(Grants.TestWebhook(id: id, mode: key.mode, app: key.app)))
    }

    func deliveries(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        let id = try req.id(or: "no such webhook")
        let page = try await grants.request(
            Grants.Deliveries(
                endpointId: id, mode: key.mode, app: key.app, limit: try Query.limit(req), cursor: req.query["cursor"]))
        return .json(200, page)
    }

    func updateWebhook(
        _ req: HTTPRequest, _ key: Authenticator.Key, _ body: Incoming<WebhookPatchBody>
    ) async throws -> HTTPResponse {
        let id = try req.id(or: "no such webhook")
        let b = try body.read()
        let update = Grants.UpdateWebhook(
            id: id, mode: key.mode, app: key.app, url: b.url, events: b.events, enabled: b.enabled)
        return .json(200, try await grants.request(update.by(key.actor)))
    }

    func rotateWebhookSecret(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        let id = try req.id(or: "no such webhook")
        let rotated = try await grants.request(
            Grants.RotateWebhookSecret(id: id, mode: key.mode, app: key.app).by(key.actor))
        let body = RotatedWebhookSecret(
            id: rotated.endpoint.id, secret: rotated.secret, previousSecretExpiresAt: rotated.previousSecretExpiresAt)
        return .json(200, body)
    }

    func retryDelivery(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        let id = try req.id(or: "no such webhook")
        guard let delivery = req.pathParameters["deliveryId"].flatMap(UUID.init(parsing:)) else {
            throw ServiceError(.notFound, "no such delivery")
        }
        let retry = Grants.RetryDelivery(endpointId: id, deliveryId: delivery, mode: key.mode, app: key.app)
        return .json(200, try await grants.request(retry))
    }
}
