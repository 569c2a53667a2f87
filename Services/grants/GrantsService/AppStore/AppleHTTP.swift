import Core
import Foundation
import FoundationNetworking
import Outbound
import Runtime
#if canImport(FoundationNetworking)
#endif

/// What one exchange with an Apple API came to, as facts: no rule applied yet.
enum AppleAnswer: Sendable, Equatable {
    /// Apple answered: its status, its `Retry-After` header as sent, and its body.
    case http(status: Int, retryAfter: String?, body: Data)
    /// No answer: Apple could not be reached, or did not answer within the timeout.
    case unreachable

    /// A 429: Apple did nothing but ask to wait.
    var isThrottled: Bool {
        if case .http(429, _, _) = self { return true }
        return false
    }
}

/// What an answer means, the one rule for both Apple APIs and Google's (`api` names which in the
/// reasons): a 2xx is the answer; a 429 (after its `Retry-After`), a 5xx or no answer is worth
/// another try; any other 4xx is the store's refusal, never different the next time.
enum AppleOutcome: Sendable, Equatable {
    case success(Data)
    case retry(after: TimeInterval?, reason: String)
    case refused(status: Int, body: Data)

    init(_ answer: AppleAnswer, now: Date, api: String = "Apple") {
        switch answer {
        case .unreachable:
            self = .retry(after: nil, reason: "\(api) could not be reached or did not answer in time")
        case .http(let status, let retryAfter, let body):
            switch status {
            case 200..<300: self = .success(body)
            case 429: self = .retry(after: Self.seconds(retryAfter: retryAfter, now: now), reason: "\(api) is limiting the request rate (429)")
            case 500...: self = .retry(after: nil, reason: "\(api) answered \(status)")
            default: self = .refused(status: status, body: body)
            }
        }
    }

    /// `Retry-After` in seconds: a number of seconds, or an HTTP date (RFC 9110 §10.2.3).
    static func seconds(retryAfter text: String?, now: Date) -> TimeInterval? {
        guard let text = text?.trimmingCharacters(in: .whitespaces), !text.isEmpty else { return nil }
        if let seconds = Int(text) { return TimeInterval(max(0, seconds)) }
        let format = DateFormatter()
        format.locale = Locale(identifier: "en_US_POSIX")
        format.timeZone = TimeZone(identifier: "GMT")
        format.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return format.date(from: text).map { max(0, $0.timeIntervalSince(now)) }
    }
}

/// Why a call to an Apple API gave no answer to use.
enum AppleCallError: Error, Sendable, Equatable {
    /// Apple asked to wait, failed on its side, did not answer, or answered what cannot be read,
    /// and the tries are used up: the same call may succeed later (after `after` seconds when
    /// Apple said so).
    case retryLater(after: TimeInterval?, reason: String)
    /// Apple refused the request (a 4xx other than 429), with its message.
    case refused(status: Int, message: String)
}

/// Sends a call again while Apple's answer says to (`AppleOutcome.retry`): after the pause of the
/// grants' `RetryPolicy`, never sooner than Apple's `Retry-After`, at most `maxAttempts` times, and
/// not when the pause would end after the deadline. A call that is not idempotent (a create) is
/// sent again only after a 429, which Apple answers before doing anything; after a 5xx or no
/// answer it may have been done, so the caller looks before it sends it again.
///
/// The pause and the random number are inputs, so tests drive it without waiting.
struct AppleRetry: Sendable {
    var policy: RetryPolicy
    var maxAttempts: Int
    var sleep: Background.Sleep
    var random: @Sendable () -> Double
    /// Whose API it is, as the reasons name it ("Apple", "Google").
    var api = "Apple"

    init(policy: RetryPolicy, maxAttempts: Int = 5, sleep: @escaping Background.Sleep = Background.sleep,
         random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }) {
        self.policy = policy
        self.maxAttempts = maxAttempts
        self.sleep = sleep
        self.random = random
    }

    func run(idempotent: Bool, deadline: Date? = nil, now: () -> Date, _ send: () async -> AppleAnswer) async -> AppleOutcome {
        var attempt = 0
        while true {
            attempt += 1
            let answer = await send()
            let outcome = AppleOutcome(answer, now: now(), api: api)
            guard case .retry(let after, _) = outcome, attempt < maxAttempts, !Task.isCancelled else { return outcome }
            if !idempotent && !answer.isThrottled { return outcome }
            let pause = policy.delay(afterAttempt: attempt, retryAfter: after, random: random())
            if let deadline, now().addingTimeInterval(pause) > deadline { return outcome }
            await sleep(.milliseconds(Int64((pause * 1000).rounded(.up))))
        }
    }
}

/// HTTPS to one of Apple's API hosts, or Google's (FoundationNetworking, as the RevenueCat
/// client): a bearer token, JSON both ways, and the answer as `AppleAnswer`. Paths and queries are Redeem's own;
/// a next-page link Apple gives is followed on this host only (`pathAndQuery`).
struct AppleHTTP: Sendable {
    let base: URL
    let timeout: TimeInterval
    let session: URLSession

    /// `dependency`: the API's name in metrics and spans (`Tracer.dependency`).
    let dependency: String

    init(base: URL, timeout: TimeInterval, dependency: String) {
        self.dependency = dependency
        self.base = base
        self.timeout = timeout
        session = .outbound(timeout: timeout, connectionsPerHost: 8)
    }

    /// `path` starts with `/` (or is empty, for the base URL itself) and may carry a query
    /// already encoded. Without a `token`, no `Authorization` is sent (an OAuth token request).
    func send(_ method: String, _ path: String, query: [(String, String)] = [], body: Data? = nil, contentType: String = "application/json",
              token: String?, headers: [(String, String)] = []) async -> AppleAnswer {
        var text = base.absoluteString.trimmingCharacters(in: CharacterSet(charactersIn: "/")) + path
        if !query.isEmpty {
            text += (path.contains("?") ? "&" : "?") + query.map { "\(Self.encode($0.0))=\(Self.encode($0.1))" }.joined(separator: "&")
        }
        guard let url = URL(string: text) else { return .http(status: 400, retryAfter: nil, body: Data()) }
        var req = URLRequest(url: url, timeoutInterval: timeout)
        req.httpMethod = method
        if let token { req.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        req.setValue("application/json", forHTTPHeaderField: "Accept")
        for (name, value) in headers { req.setValue(value, forHTTPHeaderField: name) }
        if let body {
            req.setValue(contentType, forHTTPHeaderField: "Content-Type")
            req.httpBody = body
        }
        do {
            let (data, response) = try await session.outboundData(for: req, dependency: dependency)
            guard let http = response as? HTTPURLResponse else { return .unreachable }
            return .http(status: http.statusCode, retryAfter: http.value(forHTTPHeaderField: "Retry-After"), body: data)
        } catch {
            return .unreachable
        }
    }

    /// The path and query of a link Apple gave (a next page), to be sent to this host; nil when
    /// it names another host.
    func pathAndQuery(_ link: String) -> String? {
        guard let url = URLComponents(string: link), url.host == nil || url.host == base.host, url.port == nil || url.port == base.port else { return nil }
        return url.percentEncodedPath + (url.percentEncodedQuery.map { "?\($0)" } ?? "")
    }

    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~,")

    /// A path segment or query part: letters, digits and `-._~,` as they are, the rest escaped.
    static func encode(_ s: String) -> String {
        s.addingPercentEncoding(withAllowedCharacters: unreserved) ?? s
    }
}
