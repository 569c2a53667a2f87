import Core
import Cryptography
import Foundation
import HTTP
import Synchronization

/// A real HTTP server speaking Sign in with Apple's REST API for tests (appleid.apple.com):
/// - `GET /auth/authorize`: answers an HTML form that posts `code`, `state` and, the first time
///   an Apple user authorizes the client, `user` to `redirect_uri` (`response_mode=form_post`,
///   which the scope requires), and posts itself (a browser test drives it);
/// - `POST /auth/token`: checks the client secret (an ES256 JWT: `kid` the key's id, `iss` the
///   team, `sub` the client id, `aud` https://appleid.apple.com, signed by the key it was given,
///   not expired), the code (single use, 5 minutes) and its `redirect_uri`, and answers
///   `{access_token, token_type, expires_in, refresh_token, id_token}`, the id_token signed with
///   its own keys and carrying the authorize request's nonce;
/// - `GET /auth/keys`: those keys (JWKS);
/// - `POST /auth/revoke`: checks the client secret and records the token revoked.
/// It can be taken down (every answer 503) and brought up again.
public final class FakeAppleID: Sendable {
    public struct User: Sendable {
        public var sub: String
        public var email: String?
        public init(sub: String, email: String? = nil) {
            self.sub = sub
            self.email = email
        }
    }

    public struct Authorization: Sendable {
        public let query: [String: String]
    }

    struct Pending {
        var clientId: String
        var redirectURI: String
        var nonce: String?
        var user: User
        var issuedAt: Date
    }

    struct State {
        var nextUser: User?
        var authorizations: [Authorization] = []
        var pending: [String: Pending] = [:]
        /// Apple users who authorized a client before (no `user` field then).
        var consented: Set<String> = []
        var refreshTokens: [String: String] = [:]  // token → sub
        var revoked: [String] = []
        var revokedSubjects: [String] = []
        var revokeAttempts = 0
        var refusals: [String] = []
        var down = false
        var tamper: (@Sendable (inout AppleIdentityProvider.Claims) -> Void)?
    }

    let state = Mutex(State())
    public let teamId: String
    public let keyId: String
    /// The public half of the key Redeem signs client secrets with.
    public let clientSecretKey: ES256Key
    /// Signs the id_tokens; its JWKS is `/auth/keys`.
    public let identity = AppleIdentityProvider()
    private let server: HTTPServer
    public var url: URL { URL(string: "http://127.0.0.1:\(server.port)")! }
    public var authorizeURL: URL { url.appendingPathComponent("auth/authorize") }
    public var tokenURL: URL { url.appendingPathComponent("auth/token") }
    public var revokeURL: URL { url.appendingPathComponent("auth/revoke") }
    public var keysURL: URL { url.appendingPathComponent("auth/keys") }

    public init(teamId: String, keyId: String, clientSecretKey: ES256Key) throws {
        self.teamId = teamId
        self.keyId = keyId
        self.clientSecretKey = clientSecretKey
        let box = Box()
        var router = Router()
        router.get("/auth/authorize") { box.fake!.authorize($0) }
        router.post("/auth/token") { box.fake!.token($0) }
        router.get("/auth/keys") { _ in HTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: box.fake!.identity.jwks()) }
        router.post("/auth/revoke") { box.fake!.revoke($0) }
        let routes = router
        server = .fake("fake-apple-id") { req in
            if box.fake!.state.withLock({ $0.down }) {
                if req.path == "/auth/revoke" { box.fake!.state.withLock { $0.revokeAttempts += 1 } }
                return HTTPResponse(status: 503)
            }
            return await routes.handle(req)
        }
        box.fake = self
        try server.start()
    }

    private final class Box: @unchecked Sendable {
        // Set once, before the server starts taking requests.
        weak var fake: FakeAppleID?
    }

    public func stop() async { await server.stop(drainSeconds: 0.2) }

    /// Who signs in at the next authorize request.
    public func signInNext(_ user: User) { state.withLock { $0.nextUser = user } }
    /// Changes the claims of the next id_token (a wrong nonce or audience).
    public func tamperNextIDToken(_ change: @escaping @Sendable (inout AppleIdentityProvider.Claims) -> Void) { state.withLock { $0.tamper = change } }
    /// Down: every request is answered 503; up again: as Apple.
    public func setDown(_ down: Bool) { state.withLock { $0.down = down } }

    public var authorizations: [Authorization] { state.withLock { $0.authorizations } }
    /// Refresh tokens revoked, and the Apple users they were issued to.
    public var revoked: [String] { state.withLock { $0.revoked } }
    public var revokedSubjects: [String] { state.withLock { $0.revokedSubjects } }
    /// Revoke requests answered 503 while down.
    public var revokeAttemptsWhileDown: Int { state.withLock { $0.revokeAttempts } }
    /// Why requests were refused (`invalid_client: …`).
    public var refusals: [String] { state.withLock { $0.refusals } }

    // MARK: - Endpoints

    func authorize(_ req: HTTPRequest) -> HTTPResponse {
        let q = req.query
        state.withLock { $0.authorizations.append(Authorization(query: q)) }
        guard let clientId = q["client_id"], let redirect = q["redirect_uri"], q["response_mode"] == "form_post",
              q["response_type"]?.split(separator: " ").contains("code") == true else {
            return .text(400, "invalid_request")
        }
        let code = "c" + Crypto.randomToken(bytes: 24)
        let (user, first) = state.withLock { s -> (User, Bool) in
            let user = s.nextUser ?? User(sub: "000000." + Crypto.randomToken(bytes: 8), email: nil)
            s.nextUser = nil
            s.pending[code] = Pending(clientId: clientId, redirectURI: redirect, nonce: q["nonce"], user: user, issuedAt: Date())
            let first = s.consented.insert("\(clientId)|\(user.sub)").inserted
            return (user, first)
        }
        var fields = [("code", code)]
        if let state = q["state"] { fields.append(("state", state)) }
        if first {
            var u: [String: Any] = ["name": ["firstName": "Test", "lastName": "Pilot"]]
            if let email = user.email { u["email"] = email }
            fields.append(("user", String(decoding: try! JSONSerialization.data(withJSONObject: u, options: [.sortedKeys]), as: UTF8.self)))
        }
        let inputs = fields.map { "<input type=\"hidden\" name=\"\(Self.escape($0.0))\" value=\"\(Self.escape($0.1))\">" }.joined(separator: "\n")
        let html = """
            <!doctype html><html><head><meta charset="utf-8"><title>Sign in with Apple (fake)</title></head>
            <body><h1>Fake Apple ID</h1><p>Signing in as \(Self.escape(user.email ?? user.sub))…</p>
            <form id="apple" method="post" action="\(Self.escape(redirect))">
            \(inputs)
            <button type="submit">Continue</button></form>
            <script>document.getElementById("apple").submit();</script></body></html>
            """
        return .text(200, html, contentType: "text/html; charset=utf-8")
    }

    func token(_ req: HTTPRequest) -> HTTPResponse {
        let form = Self.form(req.body)
        guard let clientId = form["client_id"], let secret = form["client_secret"], checkSecret(secret, clientId: clientId) else {
            return refuse("invalid_client", "the client secret")
        }
        guard form["grant_type"] == "authorization_code", let code = form["code"] else { return refuse("unsupported_grant_type", "grant type") }
        let pending = state.withLock { $0.pending.removeValue(forKey: code) }
        guard let pending, pending.clientId == clientId, Date().timeIntervalSince(pending.issuedAt) < 300 else {
            return refuse("invalid_grant", "unknown, used or expired code")
        }
        guard form["redirect_uri"] == pending.redirectURI else { return refuse("invalid_grant", "redirect_uri") }
        var claims = AppleIdentityProvider.Claims(aud: clientId, sub: pending.user.sub, email: pending.user.email,
                                                  emailVerified: pending.user.email == nil ? nil : true, nonce: pending.nonce)
        let refresh = "r" + Crypto.randomToken(bytes: 24)
        let tamper = state.withLock { s in
            s.refreshTokens[refresh] = pending.user.sub
            defer { s.tamper = nil }
            return s.tamper
        }
        tamper?(&claims)
        return Self.json(200, ["access_token": "a" + Crypto.randomToken(bytes: 16), "token_type": "Bearer", "expires_in": 3600,
                               "refresh_token": refresh, "id_token": identity.token(claims)])
    }

    func revoke(_ req: HTTPRequest) -> HTTPResponse {
        let form = Self.form(req.body)
        guard let clientId = form["client_id"], let secret = form["client_secret"], checkSecret(secret, clientId: clientId) else {
            return refuse("invalid_client", "the client secret")
        }
        guard let token = form["token"] else { return refuse("invalid_request", "no token") }
        state.withLock { s in
            s.revoked.append(token)
            if let sub = s.refreshTokens.removeValue(forKey: token) { s.revokedSubjects.append(sub) }
        }
        return HTTPResponse(status: 200)
    }

    /// Sign in with Apple's client secret: ES256 with `kid` this key's id, `iss` the team, `sub`
    /// the client id, `aud` Apple, not expired, at most six months long.
    func checkSecret(_ secret: String, clientId: String) -> Bool {
        struct Claims: Decodable { var iss: String; var iat: Int; var exp: Int; var aud: String; var sub: String }
        guard let jws = CompactJWS(secret), let header = try? JSONDecoder().decode(JWT.Header.self, from: Data(jws.header)),
              let claims = try? JSONDecoder().decode(Claims.self, from: Data(jws.payload)) else { return false }
        let now = Int(Date().timeIntervalSince1970)
        return header.alg == "ES256" && header.kid == keyId && jws.isSigned(by: clientSecretKey) && claims.iss == teamId
            && claims.sub == clientId && claims.aud == "https://appleid.apple.com" && claims.exp > now && claims.exp - claims.iat <= 15_777_000
    }

    private func refuse(_ error: String, _ why: String) -> HTTPResponse {
        state.withLock { $0.refusals.append("\(error): \(why)") }
        return Self.json(400, ["error": error])
    }

    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }

    /// The hidden fields of the authorize page's form, and where it posts (for tests without a browser).
    public static func formOf(_ html: String) -> (action: String, fields: [String: String])? {
        func unescape(_ s: String) -> String {
            s.replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&lt;", with: "<")
                .replacingOccurrences(of: "&gt;", with: ">").replacingOccurrences(of: "&amp;", with: "&")
        }
        guard let a = html.range(of: "action=\""), let aEnd = html[a.upperBound...].firstIndex(of: "\"") else { return nil }
        var fields: [String: String] = [:]
        var rest = html[...]
        while let i = rest.range(of: "<input type=\"hidden\" name=\"") {
            guard let nameEnd = rest[i.upperBound...].firstIndex(of: "\""),
                  let v = rest[nameEnd...].range(of: "value=\""), let vEnd = rest[v.upperBound...].firstIndex(of: "\"") else { break }
            fields[unescape(String(rest[i.upperBound..<nameEnd]))] = unescape(String(rest[v.upperBound..<vEnd]))
            rest = rest[vEnd...]
        }
        return (unescape(String(html[a.upperBound..<aEnd])), fields)
    }

    static func form(_ body: Data) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = parts[0].replacingOccurrences(of: "+", with: " ").removingPercentEncoding else { continue }
            fields[name] = parts.count > 1 ? parts[1].replacingOccurrences(of: "+", with: " ").removingPercentEncoding : ""
        }
        return fields
    }

    static func json(_ status: Int, _ object: [String: Any]) -> HTTPResponse {
        let body = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        return HTTPResponse(status: status, headers: [("Content-Type", "application/json")], body: body)
    }
}
