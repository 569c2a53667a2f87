import Core
import Foundation
import HTTP

/// The MCP server's tools. Each is one route of the public API (`Gateway.routes`): its
/// input schema is that route's path parameters, query parameters and body type, read from the
/// same typed description `/openapi.json` is made of, and calling it runs that route with the
/// caller's own credential; its output schema is that route's answer type, read the same way. The
/// API, the dashboard and MCP can't disagree: they are one code path.
struct MCPTool: Sendable {
    let name: String
    let title: String
    let description: String
    let method: APIRoute.Method
    let path: String
    /// Tool argument → query parameter, where the tool names it differently.
    var renamed: [String: String] = [:]
    /// Answers only this field of the route's answer (with the coupon's code).
    var field: String?
    /// A POST that changes no data (it makes a one-time download address).
    var changesNoData = false
    /// Changes nothing.
    var readOnly: Bool { method == .get || changesNoData }

    static let all: [MCPTool] = [
        MCPTool(name: "list_coupons", title: "List coupons", description: "List coupons, newest first, a page at a time (pass nextCursor back as cursor).",
                method: .get, path: "/v1/coupons"),
        MCPTool(name: "get_coupon", title: "Get a coupon", description: "One coupon by its code, with its counts, store limits and store offers.",
                method: .get, path: "/v1/coupons/{code}"),
        MCPTool(name: "create_coupon", title: "Create a coupon",
                description: "Create a coupon (admin). With dry_run: true it is checked and shown with its store limits, and nothing is saved.",
                method: .post, path: "/v1/coupons", renamed: ["dry_run": "dryRun"]),
        MCPTool(name: "update_coupon", title: "Change a coupon",
                description: "Change a coupon's active flag, cap (maxRedemptions) or end (expiresAt); null removes the cap or the end (admin).",
                method: .patch, path: "/v1/coupons/{code}"),
        MCPTool(name: "deactivate_coupon", title: "Deactivate a coupon", description: "Deactivate a coupon: it redeems no more; its redemptions stay (admin).",
                method: .delete, path: "/v1/coupons/{code}"),
        MCPTool(name: "list_redemptions", title: "List a coupon's redemptions", description: "A coupon's redemptions, newest first, a page at a time.",
                method: .get, path: "/v1/coupons/{code}/redemptions"),
        MCPTool(name: "export_redemptions_csv", title: "Export redemptions as CSV",
                description: "Every redemption of a coupon as a CSV file for a person: answers how many there are and "
                    + "downloadUrl, a one-time address (24 hours, no key needed) where the person downloads the CSV: "
                    + "give it to the person; the rows themselves are never answered here.",
                method: .post, path: "/v1/coupons/{code}/redemption-exports", changesNoData: true),
        MCPTool(name: "get_redemption", title: "Get a redemption", description: "One redemption by its id.",
                method: .get, path: "/v1/redemptions/{id}"),
        MCPTool(name: "create_codes", title: "Make unique codes of a coupon",
                description: "Make up to 100,000 unique single-use codes of a coupon, with its terms, cap and window "
                    + "(admin). Answers how many were made and downloadUrl, a one-time address where a person "
                    + "downloads their CSV: give it to the person; the codes themselves are never answered here.",
                method: .post, path: "/v1/coupons/{code}/codes"),
        MCPTool(name: "list_store_offers", title: "List a coupon's store offers",
                description: "The App Store offers of a coupon and the state of each (creating, waitingForApple, ready, failed).",
                method: .get, path: "/v1/coupons/{code}", field: "storeOffers"),
    ]

    var route: APIRoute {
        guard let r = Gateway.routes.first(where: { $0.method == method && $0.path == path }) else {
            preconditionFailure("MCP tool \(name) names no route")
        }
        return r
    }

    var pathParameters: [String] { OpenAPIDocument.pathParameters(path) }

    /// Its query parameters as the tool names them: (argument, query parameter). The one-field
    /// answer takes none (it answers everything there is).
    var queryArguments: [(argument: String, parameter: QueryParameter)] {
        guard field == nil else { return [] }
        let back = Dictionary(uniqueKeysWithValues: renamed.map { ($0.value, $0.key) })
        return route.query.filter { $0.name != "wait" }.map { (back[$0.name] ?? $0.name, $0) }
    }

    /// The JSON Schema of its arguments, self-contained (references inlined).
    func inputSchema(_ catalog: SchemaCatalog) throws -> JSONValue {
        var properties: [String: JSONValue] = [:]
        var required: [String] = []
        for p in pathParameters {
            properties[p] = .object(["type": .string("string"), "description": .string(p == "code" ? "the coupon's code" : "the id")])
            required.append(p)
        }
        for (argument, q) in queryArguments {
            var schema = try MCPSchema.value(q.schema, catalog)
            if case .object(var o) = schema {
                o["description"] = .string(q.description)
                schema = .object(o)
            }
            properties[argument] = schema
        }
        if let body = route.body {
            let schema = try MCPSchema.value(try catalog.schema(of: body), catalog)
            if case .object(let o) = schema {
                if case .object(let fields)? = o["properties"] { properties.merge(fields) { a, _ in a } }
                if case .array(let names)? = o["required"] { required += names.compactMap { if case .string(let s) = $0 { s } else { nil } } }
            }
        }
        var out: [String: JSONValue] = ["type": .string("object"), "properties": .object(properties)]
        if !required.isEmpty { out["required"] = .array(required.map(JSONValue.string)) }
        return .object(out)
    }

    /// The JSON Schema of its result's `structuredContent` when it succeeds, self-contained: the
    /// route's answer type (of its lowest success status); only `field` of it, with the coupon's
    /// code; or, for a route that answers nothing (204), the code and `active: false`.
    func outputSchema(_ catalog: SchemaCatalog) throws -> JSONValue {
        let code: JSONValue = .object(["type": .string("string"), "description": .string("the coupon's code")])
        guard let answer = route.answers.filter({ (200..<300).contains($0.key) }).min(by: { $0.key < $1.key })?.value
        else { throw MCPSchema.Problem(description: "\(name): its route answers no success") }
        switch answer {
        case .empty:
            return .object([
                "type": .string("object"),
                "properties": .object([
                    "code": code, "active": .object(["type": .string("boolean"), "const": .bool(false)]),
                ]),
                "required": .array([.string("code"), .string("active")]),
            ])
        case .text:
            throw MCPSchema.Problem(description: "\(name): its route answers no JSON")
        case .json(let type):
            let schema = try MCPSchema.value(try catalog.schema(of: type), catalog)
            guard case .object(let o) = schema, o["type"] == .string("object") else {
                throw MCPSchema.Problem(description: "\(name): its route's answer is not an object")
            }
            guard let field else { return schema }
            guard case .object(let fields)? = o["properties"], let one = fields[field] else {
                throw MCPSchema.Problem(description: "\(name): its route's answer has no \(field)")
            }
            return .object([
                "type": .string("object"), "properties": .object(["code": code, field: one]),
                "required": .array([.string("code"), .string(field)]),
            ])
        }
    }

    /// The tool's listing in `tools/list`.
    func listing(_ catalog: SchemaCatalog) throws -> JSONValue {
        .object([
            "name": .string(name), "title": .string(title), "description": .string(description),
            "inputSchema": try inputSchema(catalog), "outputSchema": try outputSchema(catalog),
            "annotations": .object(["readOnlyHint": .bool(readOnly), "destructiveHint": .bool(method == .delete),
                                    "idempotentHint": .bool(method != .post), "openWorldHint": .bool(false)]),
        ])
    }

    /// Every tool's listing, made once from the route table.
    static let listings: [JSONValue] = {
        do {
            let catalog = SchemaCatalog()
            return try all.map { try $0.listing(catalog) }
        } catch {
            preconditionFailure("the MCP tools cannot be described: \(error)")
        }
    }()
}

/// JSON Schemas as MCP needs them: one self-contained document per tool, without references to
/// the OpenAPI document's `components/schemas`.
enum MCPSchema {
    struct Problem: Error { let description: String }

    static func value(_ schema: JSONSchema, _ catalog: SchemaCatalog) throws -> JSONValue {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let v = try JSONDecoder().decode(JSONValue.self, from: try encoder.encode(schema))
        return try inline(v, catalog, depth: 0)
    }

    static func inline(_ v: JSONValue, _ catalog: SchemaCatalog, depth: Int) throws -> JSONValue {
        guard depth < 16 else { throw Problem(description: "schemas nest too deep to inline") }
        switch v {
        case .object(let o):
            if case .string(let ref)? = o["$ref"], ref.hasPrefix("#/components/schemas/") {
                let name = String(ref.dropFirst("#/components/schemas/".count))
                guard let target = catalog.schemas[name] else { throw Problem(description: "no schema named \(name)") }
                return try value(target, catalog)
            }
            return .object(try o.mapValues { try inline($0, catalog, depth: depth + 1) })
        case .array(let a):
            return .array(try a.map { try inline($0, catalog, depth: depth + 1) })
        default:
            return v
        }
    }
}
