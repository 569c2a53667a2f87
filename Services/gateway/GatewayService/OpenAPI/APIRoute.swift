import Core
import Foundation
import HTTP

/// One operation of the public API, written once: the router answers it (`Gateway.router()`) and
/// `/openapi.json` describes it (`OpenAPIDocument`), both from `Gateway.routes`. Who may call it,
/// its query parameters and the type of its body are not only described: the handler gets the
/// caller its access resolved, reads the body as that type, and sees only the parameters listed.
struct APIRoute: Sendable {
    enum Method: String, Sendable { case get = "GET", post = "POST", put = "PUT", patch = "PATCH", delete = "DELETE" }

    /// What a successful answer holds.
    enum Answer: Sendable {
        case json(any APIBody.Type)
        /// A document of this media type that is not JSON data (a page, a script, metrics).
        case text(String)
        case empty
    }

    let method: Method
    let path: String
    let summary: String
    let access: Requirement
    let query: [QueryParameter]
    let body: (any APIBody.Type)?
    /// How the body is sent: JSON, or a form (`application/x-www-form-urlencoded`: Apple's
    /// `form_post`), which the handler reads itself.
    let bodyMediaType: String
    /// By status.
    let answers: [Int: Answer]
    /// Statuses answered in the error shape, beyond those every route of its kind may answer
    /// (`OpenAPIDocument.operation`).
    let errors: [Int]
    /// The router's handler of the route on a gateway.
    let handler: @Sendable (Gateway) -> Router.Handler

    private init(_ method: Method, _ path: String, _ summary: String, access: Requirement, query: [QueryParameter],
                 body: (any APIBody.Type)?, bodyMediaType: String = "application/json", answers: [Int: Answer], errors: [Int],
                 handler: @escaping @Sendable (Gateway) -> Router.Handler) {
        self.method = method
        self.path = path
        self.summary = summary
        self.access = access
        self.query = query
        self.body = body
        self.bodyMediaType = bodyMediaType
        self.answers = answers
        self.errors = errors
        let names = Set(query.map(\.name))
        let idempotent = Self.takesIdempotencyKey(method, path)
        let anonymous = access == .anyone
        self.handler = { gateway in
            let handle = handler(gateway)
            return { request in
                var request = request
                if !request.query.isEmpty { request.query = request.query.filter { names.contains($0.key) } }
                if idempotent { return try await gateway.idempotently(request, anonymous: anonymous, handle) }
                return try await handle(request)
            }
        }
    }

    /// Whether the route honours `Idempotency-Key` (`Gateway.idempotently`): every POST but those
    /// `IdempotencyRule.ignores`.
    static func takesIdempotencyKey(_ method: Method, _ path: String) -> Bool {
        method == .post && !IdempotencyRule.ignores(path)
    }

    var takesIdempotencyKey: Bool { Self.takesIdempotencyKey(method, path) }

    /// A route anyone may call, without a body.
    static func route(_ method: Method, _ path: String, _ summary: String, query: [QueryParameter] = [],
                      answers: [Int: Answer], errors: [Int] = [],
                      handle: @escaping @Sendable (Gateway) -> @Sendable (HTTPRequest) async throws -> HTTPResponse) -> APIRoute {
        APIRoute(method, path, summary, access: .anyone, query: query, body: nil, answers: answers, errors: errors) { gateway in
            handle(gateway)
        }
    }

    /// A route anyone may call, with a JSON body.
    static func route<Body: APIBody>(_ method: Method, _ path: String, _ summary: String, query: [QueryParameter] = [],
                                     answers: [Int: Answer], errors: [Int] = [],
                                     handle: @escaping @Sendable (Gateway) -> @Sendable (HTTPRequest, Incoming<Body>) async throws -> HTTPResponse) -> APIRoute {
        APIRoute(method, path, summary, access: .anyone, query: query, body: Body.self, answers: answers, errors: errors) { gateway in
            let handle = handle(gateway)
            return { request in try await handle(request, Incoming(request: request)) }
        }
    }

    /// A route anyone may call, with a form body (`application/x-www-form-urlencoded`) of the
    /// fields `Form` describes, which the handler reads.
    static func route<Form: APIBody>(_ method: Method, _ path: String, _ summary: String, form: Form.Type,
                                     answers: [Int: Answer], errors: [Int] = [],
                                     handle: @escaping @Sendable (Gateway) -> @Sendable (HTTPRequest) async throws -> HTTPResponse) -> APIRoute {
        APIRoute(method, path, summary, access: .anyone, query: [], body: Form.self, bodyMediaType: "application/x-www-form-urlencoded",
                 answers: answers, errors: errors) { gateway in
            handle(gateway)
        }
    }

    /// A route for callers with a credential, without a body.
    static func route<Caller>(_ method: Method, _ path: String, _ summary: String, access: Access<Caller>, query: [QueryParameter] = [],
                              answers: [Int: Answer], errors: [Int] = [],
                              handle: @escaping @Sendable (Gateway) -> @Sendable (HTTPRequest, Caller) async throws -> HTTPResponse) -> APIRoute {
        APIRoute(method, path, summary, access: access.requirement, query: query, body: nil, answers: answers, errors: errors) { gateway in
            let handle = handle(gateway)
            return { request in try await handle(request, try await access.resolve(gateway.auth, request)) }
        }
    }

    /// A route for callers with a credential, with a JSON body.
    static func route<Caller, Body: APIBody>(_ method: Method, _ path: String, _ summary: String, access: Access<Caller>,
                                             query: [QueryParameter] = [], answers: [Int: Answer], errors: [Int] = [],
                                             handle: @escaping @Sendable (Gateway) -> @Sendable (HTTPRequest, Caller, Incoming<Body>) async throws -> HTTPResponse) -> APIRoute {
        APIRoute(method, path, summary, access: access.requirement, query: query, body: Body.self, answers: answers, errors: errors) { gateway in
            let handle = handle(gateway)
            return { request in try await handle(request, try await access.resolve(gateway.auth, request), Incoming(request: request)) }
        }
    }
}

/// Who may call a route.
enum Requirement: Sendable, Equatable {
    case anyone
    /// A signed-in user's access token.
    case user
    /// A user's access token or an API key with at least this role (`readonly`: any key).
    case userOrKey(Role)
    /// An API key with at least this role.
    case key(Role)
}

/// How a route's caller is found, and what its handler gets: 401 or 403 before the handler runs
/// otherwise.
struct Access<Caller: Sendable>: Sendable {
    let requirement: Requirement
    let resolve: @Sendable (Authenticator, HTTPRequest) async throws -> Caller
}

extension Access where Caller == Authenticator.User {
    static var user: Access { Access(requirement: .user) { auth, request in try await auth.requireUser(request) } }
}

extension Access where Caller == Authenticator.Key {
    /// A key of the default app (a route not yet scoped by app; docs/apps.md).
    static func key(_ role: Role) -> Access { Access(requirement: .key(role)) { auth, request in try await auth.requireRole(request, role) } }
    /// A key of any app: the handler scopes what it reads and changes by `Key.app`.
    static func appKey(_ role: Role) -> Access {
        Access(requirement: .key(role)) { auth, request in try await auth.requireRole(request, role, anyApp: true) }
    }
}

extension Access where Caller == Principal {
    static var userOrKey: Access { userOr(.readonly) }

    /// A signed-in user, or an API key with at least `role` (403 for a key below it).
    static func userOr(_ role: Role) -> Access {
        Access(requirement: .userOrKey(role)) { auth, request in
            switch try await auth.principal(request) {
            case nil: throw Authenticator.notIdentified
            case .apiKey(_, let r, _, _)? where r < role: throw Authenticator.forbidden
            // A key works in its own app here (docs/apps.md).
            case .apiKey(_, _, _, let app)? where try Authenticator.requestedApp(request).map({ $0 != app }) ?? false:
                throw Authenticator.otherApp
            case let principal?: return principal
            }
        }
    }
}

/// A request's JSON body, read as its route's type when the handler asks: after the checks that
/// come first (a rate limit is answered before a malformed body).
struct Incoming<Body: APIBody>: Sendable {
    fileprivate let request: HTTPRequest

    func read() throws -> Body { try JSONBody.decode(Body.self, from: request) }
}

extension HTTPRequest {
    /// The `{id}` of the route's path: a text that is not an id names nothing, so it is 404 too.
    func id(or notFound: String) throws -> UUID {
        guard let id = pathParameters["id"].flatMap(UUID.init(parsing:)) else { throw ServiceError(.notFound, notFound) }
        return id
    }
}

/// A query parameter a route reads.
struct QueryParameter: Sendable {
    let name: String
    let schema: JSONSchema
    let description: String

    static let limit: QueryParameter = {
        var s = JSONSchema.integer
        s.minimum = 1
        s.maximum = Keyset.maxLimit
        s.defaultValue = Keyset.defaultLimit
        return QueryParameter(name: "limit", schema: s, description: "page size")
    }()
    static let cursor = QueryParameter(name: "cursor", schema: .string,
                                       description: "the nextCursor of the previous page (opaque; any other value is 422)")
    /// `limit` and `cursor`: the route answers a page.
    static let page = [limit, cursor]

    static func flag(_ name: String, _ description: String) -> QueryParameter {
        QueryParameter(name: name, schema: .boolean, description: description)
    }
}
