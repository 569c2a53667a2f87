import Foundation

/// The OpenAPI 3.1 description of the gateway's API (SPEC §4, §4.6), served at `/openapi.json`.
/// A test checks that every route the router has is described here and the other way round.
enum OpenAPIDocument {
    typealias JSON = [String: Any]

    struct Operation {
        let method: String
        let path: String
        let summary: String
        /// nil: no credential; "user"; or the least API-key role.
        let who: String?
        let request: String?
        let responses: [Int: String?]
        var parameters: [JSON] = []
    }

    static func ref(_ name: String) -> JSON { ["$ref": "#/components/schemas/\(name)"] }
    static func query(_ name: String, _ schema: JSON, _ description: String) -> JSON {
        ["name": name, "in": "query", "required": false, "schema": schema, "description": description]
    }
    nonisolated(unsafe) static let limit = query("limit", ["type": "integer", "minimum": 1, "maximum": 100, "default": 20], "page size")
    nonisolated(unsafe) static let cursor = query("cursor", ["type": "string"], "the nextCursor of the previous page (opaque; any other value is 422)")

    nonisolated(unsafe) static let operations: [Operation] = [
        Operation(method: "get", path: "/healthz", summary: "The process is up", who: nil, request: nil, responses: [200: "Status"]),
        Operation(method: "get", path: "/readyz", summary: "Every service reachable over the bus with its database up", who: nil, request: nil,
                  responses: [200: "Readiness", 503: "Readiness"]),
        Operation(method: "get", path: "/metrics", summary: "Prometheus metrics", who: nil, request: nil, responses: [200: nil]),
        Operation(method: "get", path: "/openapi.json", summary: "This document", who: nil, request: nil, responses: [200: nil]),
        Operation(method: "get", path: "/redeem", summary: "The redeem page", who: nil, request: nil, responses: [200: nil],
                  parameters: [query("code", ["type": "string"], "a code to fill in")]),
        Operation(method: "get", path: "/redeem/app.js", summary: "The redeem page's script", who: nil, request: nil, responses: [200: nil]),
        Operation(method: "get", path: "/redeem/app.css", summary: "The redeem page's style", who: nil, request: nil, responses: [200: nil]),

        Operation(method: "post", path: "/v1/accounts", summary: "Create an account", who: nil, request: "SignUp",
                  responses: [201: "AuthResult", 409: "Error", 422: "Error", 429: "Error"]),
        Operation(method: "post", path: "/v1/sessions", summary: "Sign in with email and password", who: nil, request: "SignIn",
                  responses: [200: "AuthResult", 401: "Error", 422: "Error", 429: "Error"]),
        Operation(method: "post", path: "/v1/sessions/apple", summary: "Sign in with Apple", who: nil, request: "AppleSignIn",
                  responses: [200: "AuthResult", 201: "AuthResult", 401: "Error", 409: "Error", 422: "Error", 429: "Error"]),
        Operation(method: "post", path: "/v1/sessions/refresh", summary: "Rotate a refresh token", who: nil, request: "Refresh",
                  responses: [200: "AuthResult", 401: "Error", 422: "Error"]),
        Operation(method: "delete", path: "/v1/sessions/current", summary: "Sign out", who: "user", request: nil, responses: [204: nil, 401: "Error"]),
        Operation(method: "get", path: "/v1/me", summary: "The signed-in account", who: "user", request: nil, responses: [200: "Account", 401: "Error", 403: "Error", 404: "Error"]),
        Operation(method: "post", path: "/v1/me/cloudkit", summary: "Link a CloudKit record name", who: "user", request: "CloudKitLink",
                  responses: [200: "AppUserId", 401: "Error", 404: "Error", 409: "Error", 422: "Error"]),
        Operation(method: "get", path: "/v1/me/entitlements", summary: "Active entitlements from the grant ledger", who: "user", request: nil,
                  responses: [200: "EntitlementList", 401: "Error"]),
        Operation(method: "get", path: "/v1/me/redemptions", summary: "The user's redemptions, newest first", who: "user", request: nil,
                  responses: [200: "RedemptionPage", 401: "Error", 422: "Error"], parameters: [limit, cursor]),
        Operation(method: "post", path: "/v1/api-keys", summary: "Create an API key (the secret is shown once)", who: "admin", request: "ApiKeyInput",
                  responses: [201: "CreatedApiKey", 401: "Error", 403: "Error", 422: "Error"]),
        Operation(method: "get", path: "/v1/api-keys", summary: "List API keys, newest first", who: "admin", request: nil,
                  responses: [200: "ApiKeyPage", 401: "Error", 403: "Error", 422: "Error"], parameters: [limit, cursor]),
        Operation(method: "delete", path: "/v1/api-keys/{id}", summary: "Revoke an API key", who: "admin", request: nil,
                  responses: [204: nil, 401: "Error", 403: "Error", 404: "Error"]),

        Operation(method: "post", path: "/v1/coupons", summary: "Create a coupon", who: "admin", request: "CouponInput",
                  responses: [200: "Coupon", 201: "Coupon", 401: "Error", 403: "Error", 409: "Error", 422: "Error"],
                  parameters: [query("dryRun", ["type": "boolean"], "validate and show limits without saving")]),
        Operation(method: "get", path: "/v1/coupons", summary: "List coupons, newest first", who: "readonly", request: nil,
                  responses: [200: "CouponPage", 401: "Error", 403: "Error", 422: "Error"],
                  parameters: [query("active", ["type": "boolean"], "only active or inactive coupons"), limit, cursor]),
        Operation(method: "get", path: "/v1/coupons/{code}", summary: "One coupon with its counts", who: "readonly", request: nil,
                  responses: [200: "Coupon", 401: "Error", 403: "Error", 404: "Error"]),
        Operation(method: "patch", path: "/v1/coupons/{code}", summary: "Change a coupon", who: "admin", request: "CouponPatch",
                  responses: [200: "Coupon", 401: "Error", 403: "Error", 404: "Error", 422: "Error"]),
        Operation(method: "delete", path: "/v1/coupons/{code}", summary: "Deactivate a coupon", who: "admin", request: nil,
                  responses: [204: nil, 401: "Error", 403: "Error", 404: "Error"]),
        Operation(method: "get", path: "/v1/coupons/{code}/redemptions", summary: "A coupon's redemptions (JSON pages, or all as CSV with Accept: text/csv)",
                  who: "readonly", request: nil, responses: [200: "RedemptionPage", 401: "Error", 403: "Error", 404: "Error", 422: "Error"],
                  parameters: [limit, cursor]),
        Operation(method: "post", path: "/v1/coupons/validate", summary: "Check a code", who: "user", request: "ValidateInput",
                  responses: [200: "ValidateResult", 401: "Error", 422: "Error", 429: "Error"]),
        Operation(method: "post", path: "/v1/redemptions", summary: "Redeem a code", who: "user", request: "RedeemInput",
                  responses: [200: "Redemption", 201: "Redemption", 401: "Error", 422: "Error", 429: "Error"]),
        Operation(method: "get", path: "/v1/redemptions/{id}", summary: "A redemption; with wait, long-polls until it completes or fails",
                  who: "user", request: nil, responses: [200: "Redemption", 401: "Error", 404: "Error", 422: "Error"],
                  parameters: [query("wait", ["type": "integer", "minimum": 0], "seconds to wait (at most 30)")]),
        Operation(method: "post", path: "/v1/redemptions/{id}/purchase", summary: "Confirm the store purchase of a discount", who: "support",
                  request: "PurchaseInput", responses: [200: "Redemption", 401: "Error", 403: "Error", 404: "Error", 409: "Error", 422: "Error"]),

        Operation(method: "post", path: "/v1/webhooks", summary: "Add a webhook endpoint (the secret is shown once)", who: "admin", request: "WebhookInput",
                  responses: [201: "CreatedWebhook", 401: "Error", 403: "Error", 422: "Error"]),
        Operation(method: "get", path: "/v1/webhooks", summary: "List webhook endpoints, newest first", who: "admin", request: nil,
                  responses: [200: "WebhookPage", 401: "Error", 403: "Error", 422: "Error"], parameters: [limit, cursor]),
        Operation(method: "delete", path: "/v1/webhooks/{id}", summary: "Remove a webhook endpoint", who: "admin", request: nil,
                  responses: [204: nil, 401: "Error", 403: "Error", 404: "Error"]),
        Operation(method: "get", path: "/v1/webhooks/{id}/deliveries", summary: "An endpoint's delivery log, newest first", who: "admin", request: nil,
                  responses: [200: "DeliveryPage", 401: "Error", 403: "Error", 404: "Error", 422: "Error"], parameters: [limit, cursor]),
    ]

    static func build() -> JSON {
        var paths: [String: JSON] = [:]
        for op in operations {
            var o: JSON = ["summary": op.summary, "operationId": "\(op.method)\(op.path.replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "{", with: "").replacingOccurrences(of: "}", with: "").replacingOccurrences(of: ".", with: "_"))"]
            var params = op.parameters
            for name in op.path.split(separator: "/").filter({ $0.hasPrefix("{") }).map({ String($0.dropFirst().dropLast()) }) {
                params.insert(["name": name, "in": "path", "required": true, "schema": ["type": "string"]], at: 0)
            }
            if !params.isEmpty { o["parameters"] = params }
            if let who = op.who {
                o["security"] = [["bearer": [String]()]]
                o["description"] = who == "user" ? "Needs a signed-in user's access token." : "Needs an API key with the \(who) role or above."
            } else {
                o["security"] = [JSON]()
            }
            if let req = op.request {
                o["requestBody"] = ["required": true, "content": ["application/json": ["schema": ref(req)]]]
            }
            var responses: JSON = [:]
            var answers = op.responses
            if op.who != nil {
                // Any credential route: none or a bad one (401), the wrong kind or role (403).
                answers[401] = "Error"
                answers[403] = "Error"
            }
            for (status, schema) in answers {
                var r: JSON = ["description": description(status)]
                if let schema {
                    r["content"] = ["application/json": ["schema": ref(schema)]]
                } else if status == 200 {
                    r["content"] = [contentType(op.path): ["schema": ["type": "string"]]]
                }
                responses[String(status)] = r
            }
            for status in [400, 413, 415, 500] where op.method != "get" || status == 500 {
                responses[String(status)] = ["description": description(status), "content": ["application/json": ["schema": ref("Error")]]]
            }
            o["responses"] = responses
            paths[op.path, default: [:]][op.method] = o
        }
        return [
            "openapi": "3.1.0",
            "info": ["title": "Redeem", "version": "1.0.0",
                     "description": "One account and one coupon code across iOS, Android and the web. Errors are {error: {code, message, field?}}."],
            "servers": [["url": "/"]],
            "paths": paths,
            "components": ["securitySchemes": ["bearer": ["type": "http", "scheme": "bearer",
                                                          "description": "A user's access token, or an API key sk_live_… / sk_test_…"]],
                           "schemas": OpenAPISchemas.all],
        ]
    }

    static func contentType(_ path: String) -> String {
        switch path {
        case "/metrics": "text/plain"
        case "/redeem": "text/html"
        case "/redeem/app.js": "text/javascript"
        case "/redeem/app.css": "text/css"
        default: "application/json"
        }
    }

    static func description(_ status: Int) -> String {
        [200: "OK", 201: "Created", 204: "No content", 400: "Malformed JSON", 401: "Not identified or invalid token", 403: "Forbidden",
         404: "Not found", 409: "Conflict", 413: "Body too large", 415: "Not JSON", 422: "Invalid input or refused", 429: "Rate limited",
         500: "Internal error", 503: "Not ready"][status] ?? "Response"
    }

    static let json: Data = (try? JSONSerialization.data(withJSONObject: build(), options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
}
