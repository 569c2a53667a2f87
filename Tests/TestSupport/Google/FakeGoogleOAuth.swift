import Core
import Cryptography
import Foundation
import HTTP
import Synchronization

/// A real HTTP server speaking Google's OAuth 2.0 token endpoint for service accounts, for tests:
/// `POST /token` with `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<JWT>`.
/// The assertion must be RS256, signed by the service account's key (`kid` its key id), with `iss`
/// its email, `scope` naming the scope asked for, `aud` this endpoint's URL, and `exp` after now
/// and at most an hour after `iat`; otherwise 400 `invalid_grant` as Google answers. A good one
/// is answered `{access_token, expires_in, token_type: "Bearer"}`, and the token is what the fake
/// Play Developer API accepts until it expires.
public final class FakeGoogleOAuth: Sendable {
    struct State {
        var issued: [String: Date] = [:]
        var exchanges = 0
        var refused = 0
        var lifetime = 3599
    }

    let state = Mutex(State())
    public let account: TestGoogleServiceAccount
    public let scope: String
    private let server: HTTPServer
    /// The token URL (`REDEEM_GOOGLE_TOKEN_URL`), which assertions must name as `aud`.
    public var url: URL { URL(string: "http://127.0.0.1:\(server.port)/token")! }

    public init(account: TestGoogleServiceAccount, scope: String = GoogleServiceAccount.androidPublisherScope) throws {
        self.account = account
        self.scope = scope
        let box = Box()
        var router = Router()
        router.post("/token") { box.fake!.exchange($0) }
        let routes = router
        server = .fake("fake-google-oauth") { await routes.handle($0) }
        box.fake = self
        try server.start()
    }

    private final class Box: @unchecked Sendable {
        // Set once, before the server starts taking requests.
        weak var fake: FakeGoogleOAuth?
    }

    public func stop() async { await server.stop(drainSeconds: 0.2) }

    /// How many assertions were exchanged for a token, and how many were refused.
    public var exchanges: Int { state.withLock { $0.exchanges } }
    public var refusals: Int { state.withLock { $0.refused } }

    /// The life of the tokens issued from now on, in seconds.
    public func setTokenLifetime(_ seconds: Int) { state.withLock { $0.lifetime = seconds } }

    /// Whether `authorization` is `Bearer <a token this endpoint issued>` not yet expired.
    public func accepts(_ authorization: String?, now: Date = Date()) -> Bool {
        guard let authorization, authorization.hasPrefix("Bearer ") else { return false }
        let token = String(authorization.dropFirst("Bearer ".count))
        return state.withLock { $0.issued[token].map { $0 > now } ?? false }
    }

    /// Forgets every token issued (a revocation): the API answers 401 to them.
    public func revokeAll() { state.withLock { $0.issued.removeAll() } }

    func exchange(_ req: HTTPRequest) -> HTTPResponse {
        let form = Self.form(req.body)
        guard req.header("content-type")?.hasPrefix("application/x-www-form-urlencoded") == true,
              form["grant_type"] == GoogleServiceAccount.jwtBearerGrant, let assertion = form["assertion"] else {
            return refuse("unsupported_grant_type", "Invalid grant_type or no assertion.")
        }
        let claims: GoogleServiceAccount.Claims
        do {
            (_, claims) = try JWT.verify(assertion, as: GoogleServiceAccount.Claims.self, algorithm: .rs256) { [account] kid in
                kid == account.keyId ? account.key : nil
            }
        } catch {
            return refuse("invalid_grant", "Invalid JWT Signature.")
        }
        let now = Int(Date().timeIntervalSince1970)
        guard claims.iss == account.email else { return refuse("invalid_grant", "Invalid issuer.") }
        guard claims.aud == url.absoluteString else { return refuse("invalid_grant", "Invalid JWT: Failed audience check.") }
        guard claims.scope.split(separator: " ").contains(Substring(scope)) else { return refuse("invalid_scope", "Invalid OAuth scope.") }
        guard claims.exp > now, claims.exp - claims.iat <= 3600, claims.iat <= now + 60 else {
            return refuse("invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.")
        }
        let token = "ya29.fake-" + Crypto.randomToken(bytes: 24)
        let lifetime = state.withLock { s in
            s.exchanges += 1
            s.issued[token] = Date().addingTimeInterval(TimeInterval(s.lifetime))
            return s.lifetime
        }
        return Self.json(200, ["access_token": token, "expires_in": lifetime, "token_type": "Bearer"])
    }

    private func refuse(_ error: String, _ description: String) -> HTTPResponse {
        state.withLock { $0.refused += 1 }
        return Self.json(400, ["error": error, "error_description": description])
    }

    /// A form body's fields (`application/x-www-form-urlencoded`), read as a URL query.
    static func form(_ body: Data) -> [String: String] {
        var components = URLComponents()
        components.percentEncodedQuery = String(decoding: body, as: UTF8.self).replacingOccurrences(of: "+", with: "%20")
        return Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { a, _ in a })
    }

    static func json(_ status: Int, _ object: [String: Any], headers: [(String, String)] = []) -> HTTPResponse {
        let body = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        return HTTPResponse(status: status, headers: [("Content-Type", "application/json")] + headers, body: body)
    }
}
