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
            info: .init(title: "Redeem", version: "1.0.0",
                        description: "One account and one coupon code across iOS, Android and the web. Errors are {error: {code, message, field?}}."),
            servers: [.init(url: "/")],
            paths: paths,
            components: .init(securitySchemes: ["bearer": .init(type: "http", scheme: "bearer",
                                                                description: "A user's access token, or an API key sk_live_… / sk_test_…")],
                              schemas: catalog.schemas))
    }

    static func operation(_ route: APIRoute, _ catalog: SchemaCatalog) throws -> OpenAPI.Operation {
        let id = route.method.rawValue.lowercased() + route.path.map { "/.".contains($0) ? "_" : $0 == "{" || $0 == "}" ? "" : String($0) }.joined()
        var parameters = pathParameters(route.path).map {
            OpenAPI.Parameter(name: $0, location: .path, required: true, schema: .string)
        }
        parameters += route.query.map {
            OpenAPI.Parameter(name: $0.name, location: .query, required: false, schema: $0.schema, description: $0.description)
        }
        if route.takesIdempotencyKey {
            var key = JSONSchema.string
            key.maxLength = Idempotency.maxKeyLength
            parameters.append(OpenAPI.Parameter(
                name: "Idempotency-Key", location: .header, required: false, schema: key,
                description: "up to 255 bytes: the same key and body within 24 h answer the first answer again "
                    + "(Idempotent-Replayed: true)"))
        }
        let error = try catalog.schema(of: ErrorBody.self)
        var responses: [String: OpenAPI.Response] = [:]
        func answer(_ status: Int, _ content: [String: OpenAPI.MediaType]?) {
            responses[String(status)] = OpenAPI.Response(description: description(status), content: content)
        }
        for status in route.errors + commonErrors(route) { answer(status, ["application/json": .init(schema: error)]) }
        for (status, a) in route.answers {
            switch a {
            case .json(let type):
                answer(status, ["application/json": try .json(type, schema: try catalog.schema(of: type))])
            case .text(let mediaType): answer(status, [mediaType: .init(schema: .string)])
            case .empty: answer(status, nil)
            }
        }
        return OpenAPI.Operation(
            summary: route.summary, operationId: id, description: route.access.description,
            parameters: parameters.isEmpty ? nil : parameters,
            security: route.access == .anyone ? [] : [["bearer": []]],
            requestBody: try route.body.map { .init(required: true, content: [route.bodyMediaType: .init(schema: try catalog.schema(of: $0))]) },
            responses: responses)
    }

    /// What any route of its kind may answer: 401 and 403 with a credential (none or a bad one;
    /// the wrong kind or role), 400, 413 and 415 with a body that may be sent, 409 and 422 with an
    /// Idempotency-Key (in use, reused), 500 always.
    static func commonErrors(_ route: APIRoute) -> [Int] {
        (route.access == .anyone ? [] : [401, 403]) + (route.method == .get ? [] : [400, 413, 415])
            + (route.takesIdempotencyKey ? [409, 422] : []) + [500]
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
