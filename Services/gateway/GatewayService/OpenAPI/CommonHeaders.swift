import Core
import HTTP

/// The headers the document names once (`components.parameters`, `components.headers`) and each
/// operation refers to: those the gateway reads on every request of a kind, and those it sends on
/// every answer. The two it reads take any value (`{}`): an id of another form is replaced, and an
/// API key works in its own mode whatever `Redeem-Mode` says, so no value is refused outright.
enum CommonHeaders {
    static let parameters: [String: OpenAPI.Parameter] = [
        "RequestId": OpenAPI.Parameter(
            name: "X-Request-Id", location: .header, required: false, schema: JSONSchema(.any),
            description: "The caller's id for this request (1 to 64 ASCII letters, digits, - and _): sent back in the"
                + " answer's X-Request-Id and written in the logs. Another value is replaced by a new id."),
        "RedeemMode": OpenAPI.Parameter(
            name: "Redeem-Mode", location: .header, required: false, schema: JSONSchema(.any),
            description: "With a member's session: the mode it works in (live when absent). An API key works in its"
                + " own mode."),
        "RedeemApp": OpenAPI.Parameter(
            name: "Redeem-App", location: .header, required: false, schema: JSONSchema(.any),
            description: "The app (its id) an end user's app, a member, or a deployment admin's key, works in (the"
                + " default app when absent). Another API key works in its own app; naming another is 403"
                + " (docs/apps.md)."),
        "IdempotencyKey": OpenAPI.Parameter(
            name: "Idempotency-Key", location: .header, required: false, schema: idempotencyKeySchema,
            description: "Up to 255 bytes: the same key and body within 24 h answer the first answer again"
                + " (Idempotent-Replayed: true); the same key with another body is 422 idempotencyKeyReused, or,"
                + " without a credential, another key; 409 idempotencyKeyInUse while the first still runs."),
    ]

    private static var idempotencyKeySchema: JSONSchema {
        var key = JSONSchema.string
        key.maxLength = Idempotency.maxKeyLength
        return key
    }

    static let headers: [String: OpenAPI.Header] = [
        "X-Request-Id": OpenAPI.Header(
            description: "This request's id: the caller's X-Request-Id, or one made up. Quote it when reporting a"
                + " problem.",
            schema: .string),
        "Redeem-Version": OpenAPI.Header(
            description: "The release of the gateway that answered (docs/versions.md).", schema: .string),
        "Retry-After": OpenAPI.Header(
            description: "Whole seconds to wait before trying again.", schema: .integer),
        "Idempotent-Replayed": OpenAPI.Header(
            description: "true on an answer given again for an Idempotency-Key, without running the request again.",
            schema: .string)
    ]

    /// The header parameters an operation takes: every API route its request id, a route for
    /// keys and members the mode and app, a route for end users the app, and a POST (`APIRoute.takesIdempotencyKey`) an idempotency key.
    static func taken(by route: APIRoute) -> [String] {
        var names: [String] = []
        if route.path.hasPrefix("/v1/") {
            names.append("RequestId")
            switch route.access {
            case .key, .userOrKey: names += ["RedeemMode", "RedeemApp"]
            case .user: names.append("RedeemApp")
            case .anyone: break
            }
        }
        if route.takesIdempotencyKey { names.append("IdempotencyKey") }
        return names
    }

    /// The headers an answer of `status` carries: every answer its request id and the release;
    /// a 429 or a 503 how long to wait, and so a 409 of a route with an idempotency key (in use);
    /// an answer such a route keeps for its key, whether it is given again.
    static func answered(status: Int, by route: APIRoute) -> [String: OpenAPI.Reference] {
        var names = ["X-Request-Id", "Redeem-Version"]
        if status == 429 || status == 503 || (status == 409 && route.takesIdempotencyKey) {
            names.append("Retry-After")
        }
        if route.takesIdempotencyKey, IdempotencyRule.keeps(status: status) { names.append("Idempotent-Replayed") }
        return Dictionary(
            uniqueKeysWithValues: names.map { ($0, OpenAPI.Reference(ref: "#/components/headers/" + $0)) })
    }
}

/// The error codes by the status they are answered with, for `x-error-codes` and the example of
/// each error answer: the services' codes (`GatewayErrors.status(of:)`), a redemption's refusal
/// reasons (422), and the HTTP layer's own.
enum ErrorCodes {
    static let byStatus: [Int: [String]] = {
        var codes: [Int: Set<String>] = [:]
        for code in ErrorCode.allCases { codes[GatewayErrors.status(of: code), default: []].insert(code.rawValue) }
        for reason in RefusalReason.allCases { codes[422, default: []].insert(reason.rawValue) }
        for (status, code) in [
            (400, "malformedJson"), (413, "tooLarge"), (415, "unsupportedMediaType"),
            (422, "invalid"), (500, "internal")
        ] {
            codes[status, default: []].insert(code)
        }
        return codes.mapValues { $0.sorted() }
    }()

    static func answered(status: Int) -> [String] { byStatus[status] ?? [] }

    /// The codes a route's answer of `status` may carry: with an idempotency key, also the
    /// gateway's own `idempotencyKeyInUse` (409) and `idempotencyKeyReused` (422).
    static func answered(status: Int, by route: APIRoute) -> [String] {
        let own = route.takesIdempotencyKey ? [409: IdempotencyRule.inUse.code, 422: IdempotencyRule.reused.code] : [:]
        return Set(answered(status: status) + (own[status].map { [$0] } ?? [])).sorted()
    }

    /// An error body of that status, with its most usual code.
    static func example(status: Int, _ codes: [String]) -> JSONValue? {
        let usual = [
            400: "malformedJson", 401: "notIdentified", 403: "forbidden", 404: "notFound", 409: "invalidState",
            413: "tooLarge", 415: "unsupportedMediaType", 422: "invalid", 429: "rateLimited", 500: "internal",
            503: "unavailable"
        ]
        guard let code = usual[status].flatMap({ codes.contains($0) ? $0 : nil }) ?? codes.first else { return nil }
        var detail: [String: JSONValue] = [
            "code": .string(code), "message": .string(OpenAPIDocument.description(status)),
            "type": .string(ErrorType(status: status, code: code).rawValue),
            "docUrl": .string(ErrorBody.docUrl(code: code))
        ]
        if code == "invalid" { detail["field"] = .string("code") }
        return .object(["error": .object(detail)])
    }
}
