import Core
import Foundation
import HTTP

/// The OpenAPI 3.1 description of the gateway's API, served at `/openapi.json`:
/// made from the route table (`Gateway.routes`) and the schemas of the body types
/// (`SchemaCatalog`), so nothing is described by hand.
enum OpenAPIDocument {
    /// The document as served. Made when the gateway starts (`Gateway.router()`): a description
    /// that cannot be made is a programming error, which the unit tests find first.
    static let json: Data = {
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            return try encoder.encode(try build(Gateway.routes))
        } catch {
            preconditionFailure("the OpenAPI document cannot be made: \(error)")
        }
    }()

    static func build(_ routes: [APIRoute]) throws -> OpenAPI.Document {
        let catalog = SchemaCatalog()
        var paths: [String: [String: OpenAPI.Operation]] = [:]
        for route in routes {
            paths[route.path, default: [:]][route.method.rawValue.lowercased()] = try operation(route, catalog)
        }
        return OpenAPI.Document(
            info: .init(title: "Redeem", version: Build.version,
                        description: "One account and one coupon code across iOS, Android and the web. Errors are {error: {code, message, field?}}."),
            servers: [.init(url: "/")],
            tags: OperationNaming.tags.map { OpenAPI.Tag(name: $0.name, description: $0.description) },
            paths: paths,
            webhooks: try webhooks(catalog),
            components: .init(
                securitySchemes: [
                    "bearer": .init(
                        type: "http", scheme: "bearer",
                        description: "A user's access token, or an API key sk_live_… / sk_test_…"),
                    "dashboardSession": .init(
                        type: "apiKey", location: "cookie", name: Gateway.dashboardCookieName,
                        description: "The dashboard's session cookie (HttpOnly), set by POST /dashboard/session"),
                ],
                parameters: CommonHeaders.parameters, headers: CommonHeaders.headers, schemas: catalog.schemas))
    }

    static func operation(_ route: APIRoute, _ catalog: SchemaCatalog) throws -> OpenAPI.Operation {
        var parameters: [OpenAPI.ParameterItem] = pathParameters(route.path).map {
            .parameter(OpenAPI.Parameter(name: $0, location: .path, required: true, schema: .string))
        }
        parameters += route.query.map {
            .parameter(
                OpenAPI.Parameter(
                    name: $0.name, location: .query, required: false, schema: $0.schema, description: $0.description))
        }
        parameters += CommonHeaders.taken(by: route).map { .reference($0) }
        let error = try catalog.schema(of: ErrorBody.self)
        var responses: [String: OpenAPI.Response] = [:]
        func answer(_ status: Int, _ content: [String: OpenAPI.MediaType]?, errorCodes: [String]? = nil) {
            responses[String(status)] = OpenAPI.Response(
                description: description(status), headers: CommonHeaders.answered(status: status, by: route),
                content: content, errorCodes: errorCodes)
        }
        for status in route.errors + commonErrors(route) {
            let codes = ErrorCodes.answered(status: status, by: route)
            answer(
                status, ["application/json": .init(schema: error, example: ErrorCodes.example(status: status, codes))],
                errorCodes: codes.isEmpty ? nil : codes)
        }
        for (status, a) in route.answers {
            switch a {
            case .json(let type):
                let schema = try catalog.schema(of: type)
                answer(status, ["application/json": try .json(type, schema: schema, catalog: catalog)])
            case .text(let mediaType): answer(status, [mediaType: .init(schema: .string)])
            case .empty: answer(status, nil)
            }
        }
        let requestBody = try route.body.map { type in
            let schema = try catalog.schema(of: type)
            let example = route.bodyMediaType == "application/json"
                ? SchemaSample.value(schema, schemas: catalog.schemas) : nil
            return OpenAPI.RequestBody(
                required: true,
                content: [
                    route.bodyMediaType: .init(
                        schema: schema, example: example, exampleFromSchema: example.map { _ in true })
                ])
        }
        return OpenAPI.Operation(
            tags: [OperationNaming.tag(route.path)], summary: route.summary, operationId: OperationNaming.id(route),
            description: route.access.description,
            parameters: parameters.isEmpty ? nil : parameters,
            security: route.access != .anyone
                ? [["bearer": []]]
                : Gateway.cookieAuthenticated.contains("\(route.method.rawValue) \(route.path)")
                    ? [["dashboardSession": []]] : [],
            requestBody: requestBody,
            responses: responses)
    }

    /// One operation per event type, whose request body is the event as delivered (signed per
    /// Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature`).
    static func webhooks(_ catalog: SchemaCatalog) throws -> [String: [String: OpenAPI.Operation]] {
        var out: [String: [String: OpenAPI.Operation]] = [:]
        for event in WebhookEventType.allCases {
            let schema = try eventSchema(event, catalog)
            let example = SchemaSample.value(schema, schemas: catalog.schemas)
            let body = OpenAPI.RequestBody(
                required: true,
                content: ["application/json": .init(schema: schema, example: example, exampleFromSchema: true)])
            // `coupon.redeemed` → `webhookCouponRedeemed`.
            let words = event.rawValue.split(separator: ".").map { $0.prefix(1).uppercased() + $0.dropFirst() }
            out[event.rawValue] = [
                "post": OpenAPI.Operation(
                    tags: ["Webhooks"], summary: "The \(event.rawValue) event",
                    operationId: "webhook" + words.joined(),
                    description: "Sent to the endpoints that take it, signed per Standard Webhooks (docs/webhooks.md).",
                    security: [], requestBody: body,
                    responses: ["200": .init(description: "Any 2xx: delivered"),
                                "410": .init(description: "Gone: the endpoint is disabled until enabled again")])
            ]
        }
        return out
    }

    /// `{type, timestamp, data}` of `event`: `type` is the event's own name, `data` its type's schema.
    static func eventSchema(_ event: WebhookEventType, _ catalog: SchemaCatalog) throws -> JSONSchema {
        var schema: JSONSchema
        switch event {
        case .couponRedeemed, .redemptionFailed, .redemptionReleased:
            schema = try catalog.schema(of: WebhookEvent<RedemptionEventData>.self)
        case .couponExhausted: schema = try catalog.schema(of: WebhookEvent<CouponExhaustedData>.self)
        case .storeOfferReady, .storeOfferFailed:
            schema = try catalog.schema(of: WebhookEvent<StoreOfferEventData>.self)
        case .appUserIdChanged: schema = try catalog.schema(of: WebhookEvent<AppUserIdChangedData>.self)
        case .webhookTest: schema = try catalog.schema(of: WebhookEvent<WebhookTestData>.self)
        }
        guard case .object(var fields) = schema.shape, let i = fields.firstIndex(where: { $0.name == "type" }) else {
            throw ServiceError(.internal, "a webhook event is not an object with a type")
        }
        fields[i].schema = .oneOf([event.rawValue])
        schema.shape = .object(fields)
        return schema
    }

    /// What any route of its kind may answer: 401 and 403 with a credential (none or a bad one;
    /// the wrong kind or role), 404 and 422 where a key, member or end user may name an app
    /// (`Redeem-App`: unknown, not an id), 400, 413 and 415 with a body that may be sent, 409 and 422 with an
    /// Idempotency-Key (in use, reused), 500 always.
    static func commonErrors(_ route: APIRoute) -> [Int] {
        let namesAnApp: Bool
        switch route.access {
        case .key, .userOrKey, .user: namesAnApp = true
        case .anyone: namesAnApp = false
        }
        let statuses = (route.access == .anyone ? [] : [401, 403]) + (namesAnApp ? [404, 422] : [])
            + (route.method == .get ? [] : [400, 413, 415])
            + (route.takesIdempotencyKey ? [409, 422] : []) + [500]
        return statuses.reduce(into: []) { all, s in if !all.contains(s) { all.append(s) } }
    }

    static func pathParameters(_ path: String) -> [String] {
        path.split(separator: "/").filter { $0.hasPrefix("{") }.map { String($0.dropFirst().dropLast()) }
    }

    static func description(_ status: Int) -> String {
        [200: "OK", 201: "Created", 204: "No content", 302: "Found: to the Location", 303: "See other: to the Location", 400: "Malformed JSON", 401: "Not identified or invalid token", 403: "Forbidden",
         404: "Not found", 409: "Conflict", 413: "Body too large", 415: "Not JSON", 422: "Invalid input or refused", 429: "Rate limited",
         500: "Internal error", 503: "Not ready"][status] ?? "Response"
    }
}

extension Requirement {
    /// The operation's `description` in the document.
    var description: String? {
        switch self {
        case .anyone: nil
        case .user: "Needs a signed-in user's access token."
        case .userOrKey(.readonly): "Needs a signed-in user's access token, or an API key."
        case .userOrKey(let role): "Needs a signed-in user's access token, or an API key with the \(role.rawValue) role or above."
        case .key(let role): "Needs an API key, or a member's session, with the \(role.rawValue) role or above."
        }
    }
}
