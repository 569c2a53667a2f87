import Core
import Foundation

/// An HTTP request as handlers see it: the whole body has arrived and is within the size limit.
public struct HTTPRequest: Sendable {
    public var method: String
    /// The decoded path, without the query string.
    public var path: String
    public var query: [String: String]
    /// Header names are lower-cased.
    public var headers: [String: String]
    public var body: Data
    public var requestId: String
    public var clientAddress: String
    /// Values of `{name}` segments of the matched route (set by `Router`).
    public var pathParameters: [String: String] = [:]

    public init(
        method: String, path: String, query: [String: String] = [:], headers: [String: String] = [:],
        body: Data = Data(), requestId: String = UUID.random().lowercasedString, clientAddress: String = ""
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.requestId = requestId
        self.clientAddress = clientAddress
    }

    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// An HTTP response. `route` is the matched route template, for the access log and metrics only.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: Data
    public var route: String?
    /// When set, the body is produced while it is sent (chunked), instead of `body`.
    public var producer: (@Sendable (HTTPBodyStream) async -> Void)?

    public init(status: Int, headers: [(String, String)] = [], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A streamed response: `produce` writes the body piece by piece.
    public static func stream(
        _ status: Int, contentType: String, headers: [(String, String)] = [],
        _ produce: @escaping @Sendable (HTTPBodyStream) async -> Void
    ) -> HTTPResponse {
        var r = HTTPResponse(status: status, headers: [("Content-Type", contentType)] + headers)
        r.producer = produce
        return r
    }

    public static let jsonContentType = "application/json; charset=utf-8"

    /// A JSON response from an `Encodable` value, encoded with the wire conventions.
    public static func json<T: Encodable>(_ status: Int, _ value: T, headers: [(String, String)] = []) -> HTTPResponse {
        do {
            let data = try JSONEncoder.wire().encode(value)
            return HTTPResponse(status: status, headers: [("Content-Type", jsonContentType)] + headers, body: data)
        } catch {
            return .error(HTTPError(500, "internal", "something went wrong on our side"))
        }
    }

    /// A body that arrived already encoded: its bytes as they are.
    public static func json<T>(_ status: Int, _ value: WireJSON<T>, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", jsonContentType)] + headers, body: value.bytes)
    }

    /// The API's error shape (docs/api.md).
    public static func error(_ e: HTTPError) -> HTTPResponse {
        var r = json(
            e.status,
            ErrorBody(
                error: ErrorBody.Detail(
                    code: e.code, message: e.message, field: e.field, redeemUrl: e.redeemUrl,
                    type: ErrorType(status: e.status, code: e.code), docUrl: ErrorBody.docUrl(code: e.code))),
            headers: e.headers)
        r.status = e.status
        return r
    }

    public static func text(
        _ status: Int, _ text: String, contentType: String = "text/plain; charset=utf-8"
    ) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", contentType)], body: Data(text.utf8))
    }

    public static func noContent() -> HTTPResponse { HTTPResponse(status: 204) }

    public func header(_ name: String) -> String? {
        headers.first { $0.0.caseInsensitiveCompare(name) == .orderedSame }?.1
    }
}

/// `{ "error": { "code", "message", "field"?, "redeemUrl"? } }`
public struct ErrorBody: Codable, Sendable {
    public struct Detail: Codable, Sendable {
        public var code: String
        public var message: String
        public var field: String?
        /// With `webOnly`: the redeem page for the code, where the user redeems it instead.
        public var redeemUrl: String?
        /// The kind of error (`ErrorType`), for a client that handles errors by kind.
        public var type: ErrorType
        /// The code's entry in docs/errors.md.
        public var docUrl: String
    }
    public var error: Detail
}

/// What kind of error an answer is, as Stripe's API sorts them: a client retries `rate_limit` and
/// `api` errors, signs in again on `authentication`, shows a `refused` coupon's sentence, and fixes
/// the request on `invalid_request` and `permission`.
public enum ErrorType: String, Codable, Sendable, CaseIterable, WireEnum {
    case invalidRequest = "invalid_request", authentication, permission, rateLimit = "rate_limit", refused, api

    /// By the status, and for a 422 whose code is a refusal reason, `refused`.
    public init(status: Int, code: String) {
        switch status {
        case 401: self = .authentication
        case 403: self = .permission
        case 429: self = .rateLimit
        case 500...: self = .api
        case 422 where RefusalReason(rawValue: code) != nil: self = .refused
        default: self = .invalidRequest
        }
    }
}

extension ErrorBody {
    /// Where docs/errors.md is read: each code is a heading there, so `#<code in lowercase>` finds it.
    public static let errorsDocument = "https://github.com/redeem/redeem/blob/main/docs/errors.md"

    public static func docUrl(code: String) -> String { errorsDocument + "#" + code.lowercased() }
}

extension ErrorBody: APIBody {
    public static let schemaName: String? = "Error"
}

/// An error that has an HTTP status: the edge's own failures (bad JSON, wrong content type, …)
/// and service errors once the gateway has mapped them.
public struct HTTPError: Error, Sendable, CustomStringConvertible {
    public var status: Int
    public var code: String
    public var message: String
    public var field: String?
    public var headers: [(String, String)] = []
    /// With `webOnly`: the redeem page for the code (`ErrorBody.Detail.redeemUrl`).
    public var redeemUrl: String?

    public init(
        _ status: Int, _ code: String, _ message: String, field: String? = nil, headers: [(String, String)] = [],
        redeemUrl: String? = nil
    ) {
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.headers = headers
        self.redeemUrl = redeemUrl
    }

    public var description: String { "\(status) \(code): \(message)" }

    public static let routeNotFound = HTTPError(404, "routeNotFound", "no such route")
    public static let tooLarge = HTTPError(413, "tooLarge", "the request body is larger than 1 MiB")
    /// A request still being handled when the server stops.
    public static let stopping = HTTPError(503, "unavailable", "the server is stopping; try again")
    public static func malformedJson(_ why: String = "the body is not valid JSON") -> HTTPError {
        HTTPError(400, "malformedJson", why)
    }
    public static let unsupportedMediaType = HTTPError(415, "unsupportedMediaType", "send the body as application/json")
    public static func invalid(_ field: String?, _ message: String) -> HTTPError {
        HTTPError(422, "invalid", message, field: field)
    }
}
