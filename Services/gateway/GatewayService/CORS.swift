import Core
import Foundation
import HTTP
import Runtime

/// Cross-origin calls from the web apps an operator names (`REDEEM_CORS_ORIGINS`), by the Fetch
/// standard's CORS protocol: a request whose `Origin` is listed gets `Access-Control-Allow-Origin`
/// naming it (never `*`: the API takes bearer tokens, and a wildcard would let any page spend a
/// token it stole), and a preflight (`OPTIONS` with `Access-Control-Request-Method`) is answered
/// 204 with the methods and headers the API reads. An origin not listed gets no CORS header, so the
/// browser keeps the answer from the page. No credentials (cookies) are allowed cross-origin.
struct CORSPolicy: Sendable, Equatable {
    /// Origins as browsers send them: `scheme://host[:port]`, lowercase, no path.
    let origins: Set<String>

    static let methods = "GET, POST, PUT, PATCH, DELETE"
    static let allowedHeaders =
        "Authorization, Content-Type, Idempotency-Key, Redeem-Mode, Redeem-App, X-Request-Id, traceparent"
    static let exposedHeaders = "X-Request-Id, Redeem-Version, Retry-After, Idempotent-Replayed"
    /// How long a browser may keep a preflight's answer (seconds).
    static let maxAge = "600"

    init(origins: Set<String>) { self.origins = origins }

    /// A comma-separated list of origins; each must be an http(s) origin with nothing after the host and port.
    init(setting text: String, variable: String = "REDEEM_CORS_ORIGINS") throws {
        var found: Set<String> = []
        for item in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !item.isEmpty {
            guard let url = URL(string: item), let scheme = url.scheme?.lowercased(),
                ["http", "https"].contains(scheme),
                let host = url.host, !host.isEmpty, url.path.isEmpty, url.query == nil, url.fragment == nil,
                url.user == nil
            else {
                throw ConfigError(
                    variable: variable, problem: "\"\(item)\" is not an origin such as https://app.example.com")
            }
            found.insert("\(scheme)://\(host.lowercased())" + (url.port.map { ":\($0)" } ?? ""))
        }
        origins = found
    }

    /// The answer to a preflight, or nil when `request` is not one (then it is routed as usual).
    func preflight(_ request: HTTPRequest) -> HTTPResponse? {
        guard !origins.isEmpty, request.method == "OPTIONS", request.header("access-control-request-method") != nil,
            let origin = request.header("origin")
        else { return nil }
        var response = HTTPResponse(status: 204)
        response.route = "preflight"
        response.headers.append(("Vary", "Origin"))
        guard origins.contains(origin) else { return response }
        response.headers += [
            ("Access-Control-Allow-Origin", origin), ("Access-Control-Allow-Methods", Self.methods),
            ("Access-Control-Allow-Headers", Self.allowedHeaders), ("Access-Control-Max-Age", Self.maxAge)
        ]
        return response
    }

    /// The CORS headers of an answer to `request`.
    func headers(for request: HTTPRequest) -> [(String, String)] {
        guard !origins.isEmpty else { return [] }
        guard let origin = request.header("origin"), origins.contains(origin) else { return [("Vary", "Origin")] }
        return [
            ("Access-Control-Allow-Origin", origin), ("Access-Control-Expose-Headers", Self.exposedHeaders),
            ("Vary", "Origin")
        ]
    }
}
