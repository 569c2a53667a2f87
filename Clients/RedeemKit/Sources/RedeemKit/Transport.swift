import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One request to the gateway: method, path, query, JSON body, and what to accept.
struct APIRequest: Sendable {
    var method: String
    var path: String
    var query: [URLQueryItem] = []
    var body: Data?
    var accept = "application/json"
    /// Seconds for the whole call; nil: the client's default.
    var timeout: TimeInterval?

    init(_ method: String, _ path: String, query: [URLQueryItem] = [], timeout: TimeInterval? = nil) {
        self.method = method
        self.path = path
        self.query = query
        self.timeout = timeout
    }

    init<Body: Encodable>(_ method: String, _ path: String, json: Body, timeout: TimeInterval? = nil) throws {
        self.init(method, path, timeout: timeout)
        body = try JSONCoding.encoder.encode(json)
    }
}

/// A 2xx answer.
struct APIResponse: Sendable {
    var status: Int
    var data: Data
    var requestId: String?

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        do {
            return try JSONCoding.decoder.decode(type, from: data)
        } catch {
            throw RedeemError(
                kind: .decoding, code: .decoding, message: "the answer is not a \(type) (\(error))",
                requestId: requestId)
        }
    }
}

/// The API's JSON: ISO 8601 UTC times with milliseconds.
enum JSONCoding {
    static let decoder: JSONDecoder = {
        let d = JSONDecoder()
        d.dateDecodingStrategy = .custom { decoder in
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let date = parseDate(text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not an ISO 8601 time: \(text)"))
            }
            return date
        }
        return d
    }()

    static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.dateEncodingStrategy = .custom { date, encoder in
            var c = encoder.singleValueContainer()
            try c.encode(formatDate(date))
        }
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return e
    }()

    /// `2026-05-01T12:00:00.000Z` (with or without the fraction, or with an offset).
    static func parseDate(_ text: String) -> Date? {
        (try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text))
            ?? (try? Date.ISO8601FormatStyle().parse(text))
            ?? {
                let f = ISO8601DateFormatter()
                f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
                return f.date(from: text) ?? ISO8601DateFormatter().date(from: text)
            }()
    }

    /// The API's form: UTC with milliseconds.
    static func formatDate(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}

/// The HTTP part every client shares: builds requests, applies the timeout and cancellation, and
/// turns error answers into `RedeemError` with the server's code, message and request id.
struct Transport: Sendable {
    let baseURL: URL
    let session: URLSession
    let timeout: TimeInterval
    /// Sent as `Redeem-App` with every call, when set.
    var app: String? = nil

    func send(_ request: APIRequest, token: String?) async throws -> APIResponse {
        let urlRequest = try makeRequest(request, token: token)
        let seconds = request.timeout ?? timeout
        let (data, response) = try await Self.withTimeout(seconds) { [session] in try await Self.load(urlRequest, session: session) }
        let requestId = response.value(forHTTPHeaderField: "X-Request-Id")
        guard (200..<300).contains(response.statusCode) else {
            throw Self.serverError(status: response.statusCode, data: data, requestId: requestId)
        }
        return APIResponse(status: response.statusCode, data: data, requestId: requestId)
    }

    func makeRequest(_ request: APIRequest, token: String?) throws -> URLRequest {
        var components = URLComponents(url: baseURL, resolvingAgainstBaseURL: false)
        let base = components?.path ?? ""
        components?.path = (base.hasSuffix("/") ? String(base.dropLast()) : base) + request.path
        if !request.query.isEmpty { components?.queryItems = request.query }
        guard let url = components?.url else {
            throw RedeemError(kind: .transport, code: .transport, message: "not a URL: \(baseURL)\(request.path)")
        }
        var r = URLRequest(url: url)
        r.httpMethod = request.method
        // URLSession's own timeout is an idle timeout; the call's whole deadline is `withTimeout`.
        r.timeoutInterval = (request.timeout ?? timeout) + 5
        r.setValue(request.accept, forHTTPHeaderField: "Accept")
        if let token { r.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let app { r.setValue(app, forHTTPHeaderField: "Redeem-App") }
        if let body = request.body {
            r.httpBody = body
            r.setValue("application/json; charset=utf-8", forHTTPHeaderField: "Content-Type")
        }
        return r
    }

    /// `{"error": {"code", "message", "field"?, "redeemUrl"?}}`, or the status alone when the body
    /// is not that.
    static func serverError(status: Int, data: Data, requestId: String?) -> RedeemError {
        struct Body: Decodable {
            struct Detail: Decodable {
                var code: String
                var message: String
                var field: String?
                var redeemUrl: URL?
            }
            var error: Detail
        }
        if let body = try? JSONDecoder().decode(Body.self, from: data) {
            return RedeemError(
                kind: .server(status: status), code: RedeemErrorCode(rawValue: body.error.code),
                message: body.error.message, field: body.error.field, requestId: requestId,
                redeemUrl: body.error.redeemUrl)
        }
        return RedeemError(
            kind: .server(status: status), code: .http(status),
            message: HTTPURLResponse.localizedString(forStatusCode: status), requestId: requestId)
    }

    /// Runs `body` for at most `seconds`; past that, it is cancelled and `RedeemError.timedOut` thrown.
    static func withTimeout<T: Sendable>(_ seconds: TimeInterval, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: T.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(nanoseconds: UInt64(max(seconds, 0) * 1_000_000_000))
                throw RedeemError.timedOut(after: seconds)
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw CancellationError() }
            return first
        }
    }

    /// One data task, cancelled when the calling task is.
    static func load(_ request: URLRequest, session: URLSession) async throws -> (Data, HTTPURLResponse) {
        let handle = DataTaskHandle()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<(Data, HTTPURLResponse), any Error>) in
                let task = session.dataTask(with: request) { data, response, error in
                    if let error {
                        if (error as? URLError)?.code == .cancelled {
                            continuation.resume(throwing: CancellationError())
                        } else if (error as? URLError)?.code == .timedOut {
                            continuation.resume(throwing: RedeemError.timedOut(after: request.timeoutInterval))
                        } else {
                            continuation.resume(throwing: RedeemError.transport(error))
                        }
                    } else if let http = response as? HTTPURLResponse {
                        continuation.resume(returning: (data ?? Data(), http))
                    } else {
                        let error = RedeemError(kind: .transport, code: .transport, message: "no HTTP answer")
                        continuation.resume(throwing: error)
                    }
                }
                handle.start(task)
            }
        } onCancel: {
            handle.cancel()
        }
    }
}

/// The data task of one call, so a cancellation that comes before or after it starts cancels it.
/// Its state is only touched under `lock`.
private final class DataTaskHandle: @unchecked Sendable {
    private let lock = NSLock()
    private var task: URLSessionDataTask?
    private var cancelled = false

    func start(_ task: URLSessionDataTask) {
        lock.lock()
        self.task = task
        let cancelled = self.cancelled
        lock.unlock()
        task.resume()
        if cancelled { task.cancel() }
    }

    func cancel() {
        lock.lock()
        cancelled = true
        let task = self.task
        lock.unlock()
        task?.cancel()
    }
}
