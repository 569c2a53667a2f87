import Foundation
import RedeemKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A gateway stand-in behind a stubbed `URLProtocol`: each server has a host of its own (so
/// tests run in parallel), records every request, and answers with its handler.
final class StubServer: @unchecked Sendable {
    /// What the handler answers.
    enum Answer {
        case json(Int, String, headers: [String: String] = [:])
        case empty(Int)
        /// The connection drops before an answer.
        case drop
        /// The answer after a while; a request cancelled meanwhile gets nothing more (the
        /// URLProtocol contract: no callback after `stopLoading`).
        indirect case delayed(TimeInterval, Answer)
    }

    struct Request: Sendable {
        var method: String
        var path: String
        var query: [String: String]
        var authorization: String?
        var body: Data
        /// The `Redeem-App` header.
        var app: String? = nil

        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: body) as? [String: Any]) ?? [:] }
    }

    // `servers`, and each server's `log`, are touched only under `lock`.
    private static let lock = NSLock()
    nonisolated(unsafe) private static var servers: [String: StubServer] = [:]

    let host = "stub-\(UUID().uuidString.prefix(8).lowercased()).test"
    private let handler: @Sendable (Request) -> Answer
    private var log: [Request] = []
    let session: URLSession

    init(_ handler: @escaping @Sendable (Request) -> Answer) {
        self.handler = handler
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [StubProtocol.self]
        session = URLSession(configuration: configuration)
        Self.lock.lock()
        Self.servers[host] = self
        Self.lock.unlock()
    }

    var baseURL: URL { URL(string: "http://\(host)")! }

    var requests: [Request] {
        Self.lock.lock()
        defer { Self.lock.unlock() }
        return log
    }

    func requests(_ method: String, _ path: String) -> [Request] {
        requests.filter { $0.method == method && $0.path == path }
    }

    static func server(for host: String?) -> StubServer? {
        lock.lock()
        defer { lock.unlock() }
        return host.flatMap { servers[$0] }
    }

    func handle(_ request: Request) -> Answer {
        Self.lock.lock()
        log.append(request)
        Self.lock.unlock()
        return handler(request)
    }

    /// A client of this server over `store`; by default with no store transactions and no
    /// offer-code page (the fakes of StoreKit and the system come in as arguments).
    func client(
        store: any TokenStore = MemoryTokenStore(), timeout: TimeInterval = 5,
        environment: RedeemClient.Environment = .production, transactions: (any StoreTransactionSource)? = nil,
        offerCodePage: (any OfferCodePage)? = nil,
        retry: PurchaseRetryPolicy = PurchaseRetryPolicy(firstDelay: 0.001, maximumDelay: 0.01), appId: String? = nil
    ) -> RedeemClient {
        RedeemClient(
            configuration: .init(
                baseURL: baseURL, tokenStore: store, platform: .ios, environment: environment, timeout: timeout,
                urlSession: session, storeTransactions: transactions, purchaseRetry: retry,
                offerCodePage: offerCodePage, appId: appId))
    }
}

final class StubProtocol: URLProtocol {
    /// Every answer reaches its URLSession through this one serial queue. Foundation on Linux
    /// keeps its tasks in a registry that is not thread-safe: one answer finishing (its task leaves
    /// the registry) while another is handed its data (looked up there) crashed the tests now and
    /// then, in the concurrent calls of the session tests (a null pointer in
    /// `URLSession.behaviour(for:)`). A real server's answers come through the session's own queue.
    static let deliveries = DispatchQueue(label: "StubProtocol.deliveries")

    /// Signalled by `stopLoading`; `stopped` is read and written under `lock`.
    private let stop = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var stopped = false

    private var isStopped: Bool {
        lock.lock()
        defer { lock.unlock() }
        return stopped
    }

    override class func canInit(with request: URLRequest) -> Bool { StubServer.server(for: request.url?.host) != nil }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        let request = self.request
        guard let server = StubServer.server(for: request.url?.host), let url = request.url else { return }
        var body = request.httpBody ?? Data()
        if body.isEmpty, let stream = request.httpBodyStream {
            stream.open()
            var buffer = [UInt8](repeating: 0, count: 65536)
            while stream.hasBytesAvailable {
                let n = stream.read(&buffer, maxLength: buffer.count)
                if n <= 0 { break }
                body.append(buffer, count: n)
            }
            stream.close()
        }
        let components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        var query: [String: String] = [:]
        for item in components?.queryItems ?? [] { query[item.name] = item.value ?? "" }
        let recorded = StubServer.Request(
            method: request.httpMethod ?? "GET", path: url.path, query: query,
            authorization: request.value(forHTTPHeaderField: "Authorization"), body: body,
            app: request.value(forHTTPHeaderField: "Redeem-App"))
        // URLProtocol is not Sendable; the loading system expects its client called from any thread.
        let box = UncheckedBox(self)
        DispatchQueue.global().async {
            let self_ = box.value
            let client = self_.client
            let `self` = self_
            var answer = server.handle(recorded)
            while case .delayed(let seconds, let later) = answer {
                if self.stop.wait(timeout: .now() + seconds) == .success { return }
                answer = later
            }
            StubProtocol.deliveries.sync { self.deliver(answer, url: url, client: client) }
        }
    }

    private func deliver(_ answer: StubServer.Answer, url: URL, client: (any URLProtocolClient)?) {
        guard !self.isStopped else { return }
        switch answer {
        case .delayed: return
        case .drop:
            client?.urlProtocol(self, didFailWithError: URLError(.networkConnectionLost))
        case .empty(let status):
            let response = HTTPURLResponse(
                url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: ["X-Request-Id": "req-stub"])!
            client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
            client?.urlProtocolDidFinishLoading(self)
        case .json(let status, let text, let headers):
            var fields = ["Content-Type": "application/json; charset=utf-8", "X-Request-Id": "req-stub"]
            for (k, v) in headers { fields[k] = v }
            let response = HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: fields)!
            client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
            client?.urlProtocol(self, didLoad: Data(text.utf8))
            client?.urlProtocolDidFinishLoading(self)
        }
    }

    override func stopLoading() {
        lock.lock()
        stopped = true
        lock.unlock()
        stop.signal()
    }
}

/// Carries a value that is not Sendable across a dispatch, where the receiver is known to allow it.
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// The API's JSON for the tests, in the shapes the gateway writes (docs/api.md).
enum Fixture {
    static let accountId = "6f1c1f6e-6a43-4d2b-9d0e-3b1d2f1a9c01"

    static func account(appUserId: String = "app-user-1") -> String {
        #"{"id":"\#(accountId)","email":"pilot@example.com","appUserId":"\#(appUserId)","identities":[{"type":"email","email":"pilot@example.com"},{"type":"cloudkit","recordName":"_abc123"}],"createdAt":"2026-05-01T12:00:00.000Z"}"#
    }

    static func auth(
        access: String, refresh: String, expiresIn: TimeInterval = 900, appUserId: String = "app-user-1"
    ) -> String {
        let expires = Date().addingTimeInterval(expiresIn).formatted(
            Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        return
            #"{"account":\#(account(appUserId: appUserId)),"session":{"accessToken":"\#(access)","refreshToken":"\#(refresh)","expiresAt":"\#(expires)"}}"#
    }

    static func redemption(_ id: UUID, status: String, entitlement: Bool = false) -> String {
        let grant =
            entitlement
            ? #","completedAt":"2026-05-01T12:00:01.250Z","entitlement":{"entitlementId":"pro","expiresAt":"2026-06-01T12:00:01.250Z"}"#
            : ""
        return
            #"{"redemptionId":"\#(id.uuidString.lowercased())","code":"SPRING-25","status":"\#(status)","platform":"ios","productId":null,"sandbox":false,"reservedAt":"2026-05-01T12:00:00.125Z"\#(grant)}"#
    }

    /// An iOS discount's redemption of `plan`, with its App Store hand-off.
    static func discount(
        _ id: UUID, status: String = "reserved", plan: String = "pro.monthly", token: UUID? = nil,
        reservedAt: String = "2026-05-01T12:00:00.125Z"
    ) -> String {
        let handoff =
            #"{"redemptionUrl":"https://apps.apple.com/redeem?ctx=offercodes&id=123&code=HALF""#
            + (token.map { #","appAccountToken":"\#($0.uuidString.lowercased())""# } ?? "") + "}"
        let id = id.uuidString.lowercased()
        return #"{"redemptionId":"\#(id)","code":"HALF","status":"\#(status)","platform":"ios","#
            + #""productId":"\#(plan)","sandbox":false,"reservedAt":"\#(reservedAt)","appStore":\#(handoff)}"#
    }

    /// A page of `items` (JSON objects), the last.
    static func page(_ items: [String]) -> String { #"{"data":[\#(items.joined(separator: ","))],"nextCursor":null}"# }

    static let entitlements =
        #"{"data":[{"entitlementId":"pro","expiresAt":"2099-06-01T12:00:01.250Z","sandbox":false,"source":"redeem"}]}"#

    static func error(_ code: String, _ message: String, field: String? = nil) -> String {
        #"{"error":{"code":"\#(code)","message":"\#(message)"\#(field.map { #","field":"\#($0)""# } ?? "")}}"#
    }

    /// A store holding a signed-in session whose access token expires in `expiresIn` seconds.
    static func signedInStore(
        access: String = "access-1", refresh: String = "refresh-1", expiresIn: TimeInterval
    ) throws -> MemoryTokenStore {
        let store = MemoryTokenStore()
        try store.setData(
            Data(auth(access: access, refresh: refresh, expiresIn: expiresIn).utf8), forKey: "redeemkit.session")
        return store
    }
}
