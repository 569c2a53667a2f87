import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A small HTTP client for tests (URLSession underneath), answering status, headers and body.
public struct HTTPClient: Sendable {
    public struct Response: Sendable {
        public let status: Int
        public let headers: [String: String]
        public let body: Data

        public var text: String { String(decoding: body, as: UTF8.self) }
        public func json() throws -> [String: Any] {
            guard let o = try JSONSerialization.jsonObject(with: body) as? [String: Any] else { throw TestFailure("not a JSON object: \(text)") }
            return o
        }
        /// The body read as `T` (a failure names the type and shows the body).
        public func decode<T: Decodable>(_ type: T.Type = T.self) throws -> T {
            do {
                return try JSONDecoder().decode(T.self, from: body)
            } catch {
                throw TestFailure("not a \(T.self) (\(error)): \(text)")
            }
        }
        /// `error.code` of an error body (`{"error":{"code","message","field"?}}`, docs/api.md).
        public var errorCode: String? { (try? decode(ErrorBody.self))?.error.code }
        public var errorField: String? { (try? decode(ErrorBody.self))?.error.field }
        public func header(_ name: String) -> String? {
            headers.first { $0.key.caseInsensitiveCompare(name) == .orderedSame }?.value
        }
    }

    public let base: URL
    /// Sent with every request, unless the request names the header itself.
    public let headers: [String: String]
    private let session: URLSession

    /// `followRedirects: false`: a 3xx is answered as it is, and no cookie is kept or sent but
    /// those a test puts in the headers (the web sign-in's tests play the browser).
    public init(base: URL, maxConnections: Int = 64, followRedirects: Bool = true, headers: [String: String] = [:]) {
        self.base = base
        self.headers = headers
        let config = URLSessionConfiguration.ephemeral
        config.httpMaximumConnectionsPerHost = maxConnections
        config.timeoutIntervalForRequest = 60
        if followRedirects {
            session = URLSession(configuration: config)
        } else {
            config.httpShouldSetCookies = false
            config.httpCookieAcceptPolicy = .never
            session = URLSession(configuration: config, delegate: NoRedirects(), delegateQueue: nil)
        }
    }

    private final class NoRedirects: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
        func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                        newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void) {
            completionHandler(nil)
        }
    }
    public func send(_ method: String, _ path: String, body: Data? = nil, headers: [String: String] = [:]) async throws -> Response {
        var req = URLRequest(url: URL(string: path, relativeTo: base)!)
        req.httpMethod = method
        req.httpBody = body
        for (k, v) in self.headers.merging(headers, uniquingKeysWith: { _, given in given }) {
            req.setValue(v, forHTTPHeaderField: k)
        }
        let (data, resp) = try await session.data(for: req)
        let http = resp as! HTTPURLResponse
        var h: [String: String] = [:]
        for (k, v) in http.allHeaderFields { h[String(describing: k)] = String(describing: v) }
        return Response(status: http.statusCode, headers: h, body: data)
    }

    public func get(_ path: String, token: String? = nil) async throws -> Response {
        try await send("GET", path, headers: token.map { ["Authorization": "Bearer \($0)"] } ?? [:])
    }

    /// POSTs (or other methods) a JSON object.
    public func json(_ method: String, _ path: String, _ object: [String: Any], token: String? = nil, headers extra: [String: String] = [:]) async throws -> Response {
        var headers = extra.merging(["Content-Type": "application/json"]) { _, new in new }
        if let token { headers["Authorization"] = "Bearer \(token)" }
        return try await send(method, path, body: try JSONSerialization.data(withJSONObject: object), headers: headers)
    }
}
