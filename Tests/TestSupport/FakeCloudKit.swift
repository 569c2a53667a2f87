import Foundation
import HTTP
import Synchronization

/// A real HTTP server speaking CloudKit Web Services' `users/current` for one container, for tests:
/// `GET /database/1/{container}/{environment}/public/users/current?ckAPIToken=…&ckWebAuthToken=…`.
/// As CloudKit does, it checks the API token (401 `AUTHENTICATION_FAILED` for another one, or for
/// another container or environment), and takes only web auth tokens it issued, each once (421
/// `AUTHENTICATION_REQUIRED` otherwise); it answers `{"userRecordName": …}` of the token's user.
/// `issueToken(for:)` plays the app's `CKFetchWebAuthTokenOperation`.
public final class FakeCloudKit: Sendable {
    public let container = "iCloud.app.redeem.tests"
    public let environment = "production"
    public let apiToken = "ck-api-" + UUID().uuidString.lowercased()

    private let issued = Mutex<[String: String]>([:])
    private let requests = Mutex<[String]>([])
    private let failing = Mutex<Int?>(nil)
    private let server: HTTPServer
    public var url: URL { URL(string: "http://127.0.0.1:\(server.port)")! }

    /// The accounts settings that point at this fake (and turn trusting the client off).
    public var environmentVariables: [String: String] {
        ["REDEEM_CLOUDKIT_CONTAINER": container, "REDEEM_CLOUDKIT_API_TOKEN": apiToken, "REDEEM_CLOUDKIT_ENVIRONMENT": environment,
         "REDEEM_CLOUDKIT_URL": url.absoluteString, "REDEEM_CLOUDKIT_TRUST_CLIENT": "0"]
    }

    public init() throws {
        var router = Router()
        let box = Box()
        router.get("/database/1/{container}/{environment}/public/users/current") { req in box.fake!.currentUser(req) }
        let routes = router
        server = HTTPServer.fake("fake-cloudkit") { await routes.handle($0) }
        box.fake = self
        try server.start()
    }

    private final class Box: @unchecked Sendable {
        // Set once, before the server starts taking requests.
        weak var fake: FakeCloudKit?
    }

    /// A new web auth token of the iCloud user whose record name this is (as the app fetches one
    /// before each claim). `=` and `+` are in it, as in CloudKit's, so encoding is exercised.
    public func issueToken(for recordName: String) -> String {
        let token = "wat+" + UUID().uuidString.lowercased() + "=="
        issued.withLock { $0[token] = recordName }
        return token
    }

    /// Answers `status` to every request until `healthy()` (CloudKit down or throttling).
    public func fail(with status: Int) { failing.withLock { $0 = status } }
    public func healthy() { failing.withLock { $0 = nil } }
    /// How many `users/current` requests came in.
    public var requestCount: Int { requests.withLock { $0.count } }

    private func currentUser(_ req: HTTPRequest) -> HTTPResponse {
        requests.withLock { $0.append(req.path) }
        if let status = failing.withLock({ $0 }) {
            return .json(status, ["serverErrorCode": status == 429 ? "THROTTLED" : "SERVICE_UNAVAILABLE", "reason": "failing on demand"])
        }
        guard req.pathParameters["container"] == container, req.pathParameters["environment"] == environment,
              req.query["ckAPIToken"] == apiToken else {
            return .json(401, ["serverErrorCode": "AUTHENTICATION_FAILED", "reason": "the API token is not valid for this container"])
        }
        // A token works once: CloudKit spends it, whatever the answer.
        guard let token = req.query["ckWebAuthToken"], let owner = issued.withLock({ $0.removeValue(forKey: token) }) else {
            return .json(421, ["serverErrorCode": "AUTHENTICATION_REQUIRED", "reason": "request needs authorization",
                               "redirectURL": "https://idmsa.apple.com/IDMSWebAuth/signin"])
        }
        return .json(200, ["userRecordName": owner])
    }
}

extension FakeCloudKit {
    public func stop() async { await server.stop(drainSeconds: 0.2) }
}
