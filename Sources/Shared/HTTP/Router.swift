import Foundation

/// Routes requests by method and path template (`/v1/coupons/{code}`), filling path parameters.
/// An unknown path is 404 `routeNotFound`; a known path with another method is 405
/// `methodNotAllowed` with an `Allow` header.
public struct Router: Sendable {
    public typealias Handler = @Sendable (HTTPRequest) async throws -> HTTPResponse

    public struct Route: Sendable {
        public let method: String
        public let template: String
        let segments: [Segment]
        let handler: Handler
    }

    enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
    }

    public private(set) var routes: [Route] = []
    /// Turns an error thrown by a handler into a response (the gateway maps service errors here).
    private let mapError: @Sendable (any Error, HTTPRequest) -> HTTPResponse

    public init(mapError: @escaping @Sendable (any Error, HTTPRequest) -> HTTPResponse = Router.defaultErrorMapping) {
        self.mapError = mapError
    }

    public mutating func add(_ method: String, _ template: String, _ handler: @escaping Handler) {
        let segments = Router.split(template).map { s -> Segment in
            s.hasPrefix("{") && s.hasSuffix("}") ? .parameter(String(s.dropFirst().dropLast())) : .literal(s)
        }
        precondition(!routes.contains { $0.method == method && $0.segments == segments }, "duplicate route \(method) \(template)")
        routes.append(Route(method: method, template: template, segments: segments, handler: handler))
    }

    public mutating func get(_ t: String, _ h: @escaping Handler) { add("GET", t, h) }
    public mutating func post(_ t: String, _ h: @escaping Handler) { add("POST", t, h) }
    public mutating func patch(_ t: String, _ h: @escaping Handler) { add("PATCH", t, h) }
    public mutating func delete(_ t: String, _ h: @escaping Handler) { add("DELETE", t, h) }

    /// Answers a request; never throws.
    public func handle(_ request: HTTPRequest) async -> HTTPResponse {
        let parts = Router.split(request.path)
        // Literal segments win over parameters, so `/v1/coupons/validate` beats `/v1/coupons/{code}`.
        // Matching only counts literals; path parameters are read from the route chosen.
        var best: (route: Route, literals: Int)?
        var mostSpecific: (route: Route, literals: Int)?
        var allowed: [String] = []
        for route in routes {
            guard let literals = Router.literalsMatched(route.segments, parts) else { continue }
            if literals > (mostSpecific?.literals ?? -1) {
                mostSpecific = (route, literals)
                allowed.removeAll()
            }
            let methodMatches = route.method == request.method || (route.method == "GET" && request.method == "HEAD")
            if methodMatches {
                if literals > (best?.literals ?? -1) { best = (route, literals) }
            } else if literals == mostSpecific?.literals {
                // `Allow` names the methods of the path's own template, not of wider ones.
                allowed.append(route.method)
            }
        }
        if let (route, _) = best {
            var req = request
            req.pathParameters = Router.parameters(route.segments, parts)
            var response: HTTPResponse
            do {
                response = try await route.handler(req)
            } catch {
                response = mapError(error, req)
            }
            response.route = route.template
            return response
        }
        if !allowed.isEmpty {
            let allow = Array(Set(allowed)).sorted().joined(separator: ", ")
            var r = HTTPResponse.error(HTTPError(405, "methodNotAllowed", "use \(allow) on this route", headers: [("Allow", allow)]))
            r.route = mostSpecific?.route.template
            return r
        }
        return .error(.routeNotFound)
    }

    public static func defaultErrorMapping(_ error: any Error, _ request: HTTPRequest) -> HTTPResponse {
        if let e = error as? HTTPError { return .error(e) }
        return .error(HTTPError(500, "internal", "something went wrong on our side"))
    }

    static func split(_ path: String) -> [String] {
        path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
    }

    /// How many literal segments of a template match the path; nil when the path doesn't fit it.
    static func literalsMatched(_ segments: [Segment], _ parts: [String]) -> Int? {
        guard segments.count == parts.count else { return nil }
        var literals = 0
        for (s, p) in zip(segments, parts) {
            if case .literal(let l) = s {
                guard l == p else { return nil }
                literals += 1
            }
        }
        return literals
    }

    /// The path parameters of a template that matches the path.
    static func parameters(_ segments: [Segment], _ parts: [String]) -> [String: String] {
        var params: [String: String] = [:]
        for (s, p) in zip(segments, parts) {
            if case .parameter(let name) = s { params[name] = p }
        }
        return params
    }
}
