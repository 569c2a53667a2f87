import Foundation
import RedeemKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A gateway stand-in behind a stubbed `URLProtocol`: each server has a host of its own (so
/// tests run in parallel), records every request, and answers with its handler.
final class StubServer: @unchecked Sendable {
    /// What the handler answers.
    enum Answer: Sendable {
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

/// Answers a `StubServer`'s requests. Its client is called where Foundation expects it: on Linux,
/// swift-corelibs-foundation runs each task on the task's `workQueue` (it targets the session's
/// queue, which owns the session's task registry; `startLoading` and `stopLoading` are called on
/// it), the client methods read that registry, and Foundation's own protocols call them only there
/// (`task.workQueue.async { client… }`, NativeProtocol.swift). Answers from a queue of the stub's
/// own raced the registry: a task added or removed meanwhile crashed the tests now and then in
/// `URLSession.behaviour(for:)`, and a cancel could come between the "not stopped" check and the
/// answer, failing a task that had already finished and left the registry.
final class StubProtocol: URLProtocol {
    /// On Darwin, where there is no such queue to reach, answers still go through this one.
    private static let deliveries = DispatchQueue(label: "StubProtocol.deliveries")

    /// Set by `stopLoading`: nothing reaches the client after it (the URLProtocol contract). Read
    /// and written under `lock`; on Linux also only on the task's queue, where `deliver` checks it
    /// and answers in one step.
    private var stopped = false
    private let lock = NSLock()
    /// Signalled by `stopLoading`, to end a delayed answer's wait.
    private let stop = DispatchSemaphore(value: 0)

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
        #if canImport(FoundationNetworking)
            let clientQueue = Self.workQueue(of: task)
        #else
            let clientQueue = Self.deliveries
        #endif
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
        // The handler and any delay run off the task's queue (on Linux its target serves every
        // session in the process); the answer goes back through `clientQueue`. URLProtocol is not
        // Sendable; from here on this one is touched only there, and through `stop`.
        let box = UncheckedBox(self)
        DispatchQueue.global().async {
            var answer = server.handle(recorded)
            while case .delayed(let seconds, let later) = answer {
                if box.value.stop.wait(timeout: .now() + seconds) == .success { return }
                answer = later
            }
            let final = answer
            clientQueue.async { box.value.deliver(final, url: url) }
        }
    }

    /// Runs on `clientQueue`. A task being cancelled gets no answer either: its `cancel()` has
    /// already queued `stopLoading` and the cancellation error behind this, and that error, coming
    /// after an answer that finished the task, would look the task up once it has left the registry.
    private func deliver(_ answer: StubServer.Answer, url: URL) {
        guard !isStopped, task?.state != .canceling, let client else { return }
        switch answer {
        case .delayed: return
        case .drop:
            client.urlProtocol(self, didFailWithError: URLError(.networkConnectionLost))
        case .empty(let status):
            let response = HTTPURLResponse(
                url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: ["X-Request-Id": "req-stub"])!
            client.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
            client.urlProtocolDidFinishLoading(self)
        case .json(let status, let text, let headers):
            var fields = ["Content-Type": "application/json; charset=utf-8", "X-Request-Id": "req-stub"]
            for (k, v) in headers { fields[k] = v }
            let response = HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: fields)!
            client.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
            client.urlProtocol(self, didLoad: Data(text.utf8))
            client.urlProtocolDidFinishLoading(self)
        }
    }

    override func stopLoading() {
        lock.lock()
        stopped = true
        lock.unlock()
        stop.signal()
    }

    #if canImport(FoundationNetworking)
        /// `task.workQueue`, which swift-corelibs-foundation keeps internal ("All operations must run on
        /// this queue", URLSessionTask.swift). Read while `startLoading` runs on it, when nothing else
        /// writes the task's fields before it.
        private static func workQueue(of task: URLSessionTask?) -> DispatchQueue {
            var mirror = task.map { Mirror(reflecting: $0) }
            while let m = mirror {
                if let queue = m.children.first(where: { $0.label == "workQueue" })?.value as? DispatchQueue {
                    return queue
                }
                mirror = m.superclassMirror
            }
            fatalError("StubProtocol: this Foundation's URLSessionTask has no workQueue to answer on")
        }
    #endif
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
