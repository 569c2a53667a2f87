import Cryptography
import Foundation
import HTTP
import Runtime
import Synchronization

/// A real HTTP server speaking the App Store Server API's Get Transaction Info for tests:
/// `GET /inApps/v1/transactions/{transactionId}` answers `{"signedTransactionInfo": "<JWS>"}`,
/// signed by the test CA at the time of the request, for the transactions a test registered,
/// and Apple's error document otherwise. Every request must carry a token that `key` accepts
/// for this app (`bid`); otherwise 401 with no body, as Apple answers. Calls are recorded, and
/// the next ones can be throttled (429, `Retry-After`).
public final class FakeAppStoreServer: Sendable {
    public struct Call: Sendable {
        public let path: String
        public let status: Int
        public let at: Date
    }

    private struct State {
        var transactions: [String: JWSTransactionDecodedPayload] = [:]
        var calls: [Call] = []
        var throttled = 0
        var retryAfter = 1
    }

    private let state = Mutex(State())
    public let key: TestAppleAPIKey
    public let bundleId: String
    public let ca: TestAppleCA
    private let server: HTTPServer
    public var url: URL { URL(string: "http://127.0.0.1:\(server.port)")! }

    public init(key: TestAppleAPIKey, bundleId: String, ca: TestAppleCA) throws {
        self.key = key
        self.bundleId = bundleId
        self.ca = ca
        let box = Box()
        var router = Router()
        router.get("/inApps/v1/transactions/{transactionId}") { box.fake!.transaction($0) }
        let routes = router
        server = .fake("fake-app-store-server") { await box.fake!.answer($0, routes: routes) }
        box.fake = self
        try server.start()
    }

    private final class Box: @unchecked Sendable {
        // Set once, before the server starts taking requests.
        weak var fake: FakeAppStoreServer?
    }

    public func stop() async { await server.stop(drainSeconds: 0.2) }

    /// Makes a transaction known under its `transactionId`.
    public func register(_ transaction: JWSTransactionDecodedPayload) {
        state.withLock { $0.transactions[transaction.transactionId] = transaction }
    }

    public var received: [Call] { state.withLock { $0.calls } }

    /// The next `count` authenticated calls get 429 (`4290000`) with `Retry-After: retryAfter`.
    public func throttleNext(_ count: Int, retryAfter: Int = 1) {
        state.withLock {
            $0.throttled = count
            $0.retryAfter = retryAfter
        }
    }

    func answer(_ req: HTTPRequest, routes: Router) async -> HTTPResponse {
        var response: HTTPResponse
        if !key.accepts(req.header("authorization"), for: .appStoreServer(bundleId: bundleId)) {
            response = HTTPResponse(status: 401)
        } else if let retryAfter = takeThrottle() {
            response = Self.error(429, 4_290_000, "Rate limit exceeded.", headers: [("Retry-After", String(retryAfter))])
        } else {
            response = await routes.handle(req)
            if response.route == nil { response = HTTPResponse(status: response.status) }
        }
        let call = Call(path: req.path, status: response.status, at: Date())
        state.withLock { $0.calls.append(call) }
        return response
    }

    private func takeThrottle() -> Int? {
        state.withLock { s in
            guard s.throttled > 0 else { return nil }
            s.throttled -= 1
            return s.retryAfter
        }
    }

    func transaction(_ req: HTTPRequest) -> HTTPResponse {
        let id = req.pathParameters["transactionId"] ?? ""
        guard !id.isEmpty, id.allSatisfy(\.isASCIIDigit) else { return Self.error(400, 4_000_006, "Invalid transaction id.") }
        guard var transaction = state.withLock({ $0.transactions[id] }) else { return Self.error(404, 4_040_010, "Transaction id not found.") }
        transaction.signedDate = Date()
        let body = try! JSONSerialization.data(withJSONObject: ["signedTransactionInfo": ca.sign(transaction)])
        return HTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: body)
    }

    /// Apple's Server API error document: `{errorCode, errorMessage}`.
    static func error(_ status: Int, _ code: Int, _ message: String, headers: [(String, String)] = []) -> HTTPResponse {
        let body = try! JSONSerialization.data(withJSONObject: ["errorCode": code, "errorMessage": message] as [String: Any])
        return HTTPResponse(status: status, headers: [("Content-Type", "application/json")] + headers, body: body)
    }
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}
