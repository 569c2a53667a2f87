import Core
import Foundation
import HTTP

/// Sign in with Apple on the web and Android. Accounts owns the flow (Apple's
/// settings, the state and nonce, the code exchange, the account); the gateway carries it over
/// HTTP: the redirect to Apple, the cookie that binds the browser, Apple's form post, and the
/// one-time code the page or app exchanges for its session.
extension Gateway {
    struct SignInCodeBody: APIBody {
        static let schemaName: String? = "SignInCodeExchange"
        static let fieldRules: [String: [JSONSchema.Rule]] = [
            "codeVerifier": [.note("an app that started with code_challenge: its PKCE verifier (a browser sends the flow's cookie instead)")],
        ]
        var code: String
        var codeVerifier: String?
    }
    /// What Apple posts to the callback (`form_post`): `code`, `id_token` and `state`, and `user`
    /// (a JSON text: name and email) the first time; or `error` and `state`. The id_token is not
    /// read from here: accounts gets its own from Apple's token endpoint.
    struct AppleCallbackForm: APIBody {
        static let schemaName: String? = "AppleCallbackForm"
        var code: String?
        var id_token: String?
        var state: String?
        var user: String?
        var error: String?
    }
    struct AppleLinkBody: APIBody {
        static let schemaName: String? = "AppleLink"
        var identityToken: String
    }

    /// Holds the binding between the start and Apple's post back. `__Host-`: set by this origin
    /// only, over HTTPS, for every path. SameSite=None because Apple's `form_post` is a
    /// cross-site POST, with which a Lax or Strict cookie is not sent; state and nonce, not the
    /// cookie alone, are what the callback trusts.
    static let appleCookieName = "__Host-redeem-apple"

    static let appleRoutes: [APIRoute] = [
        // `return`: the gateway's own /redeem, or a URL of REDEEM_APPLE_RETURN_URLS (400
        // returnNotAllowed otherwise); 404 when the web flow is not configured.
        .route(.get, "/v1/sessions/apple/start", "Sign in with Apple on the web or Android: redirects (302) to Apple",
               query: [QueryParameter(name: "return", schema: .string, description: "where to send the browser back: /redeem or an allow-listed URL (an app's deep link)"),
                       QueryParameter(name: "code_challenge", schema: .string,
                                      description: "an app's PKCE challenge: base64url SHA-256 of its verifier (RFC 7636 S256); the exchange then needs the verifier"),
                       QueryParameter(name: "code_challenge_method", schema: .string, description: "S256 (the only method taken)")],
               answers: [302: .empty], errors: [400, 404, 429], handle: Gateway.appleStart),
        // Apple's form_post (application/x-www-form-urlencoded: code, id_token, state, user, or
        // error). Answers 303 to the return URL with ?code=<one-time sign-in code> (or ?error=).
        .route(.post, "/v1/sessions/apple/callback", "Where Apple posts the web flow's answer: redirects (303) back with a one-time code",
               form: AppleCallbackForm.self, answers: [303: .empty], errors: [400, 401, 404, 409, 422, 429, 503], handle: Gateway.appleCallback),
        .route(.post, "/v1/sessions/exchange", "Exchange a one-time sign-in code for a session (with the flow's cookie, or the app's codeVerifier)",
               answers: [200: .json(AuthBody.self)], errors: [400, 401, 422, 429], handle: Gateway.exchangeSignInCode),
        .route(.post, "/v1/me/apple", "Link Sign in with Apple to the signed-in account", access: .user,
               answers: [200: .json(AccountView.self)], errors: [401, 403, 404, 409, 422], handle: Gateway.linkApple),
    ]

    func appleStart(_ req: HTTPRequest) async throws -> HTTPResponse {
        try abuse.checkAuth(ip: req.clientAddress, email: nil)
        let back = req.query["return"] ?? ""
        let answer = try await accounts.request(Accounts.AppleWebStart(returnURL: back, codeChallenge: req.query["code_challenge"],
                                                                       codeChallengeMethod: req.query["code_challenge_method"]))
        return HTTPResponse(status: 302, headers: [
            ("Location", answer.authorizeURL),
            ("Set-Cookie", "\(Self.appleCookieName)=\(answer.cookie); Path=/; Max-Age=\(answer.cookieMaxAge); HttpOnly; Secure; SameSite=None"),
        ])
    }

    func appleCallback(_ req: HTTPRequest) async throws -> HTTPResponse {
        try abuse.checkAuth(ip: req.clientAddress, email: nil)
        guard req.header("content-type")?.lowercased().hasPrefix("application/x-www-form-urlencoded") == true else {
            throw HTTPError(415, "unsupportedMediaType", "send the body as application/x-www-form-urlencoded, as Apple's form_post does")
        }
        let form = Self.formFields(req.body)
        // Accounts calls Apple's token endpoint (10 s at most) before it answers.
        let answer = try await accounts.request(Accounts.AppleWebCallback(
            cookie: Self.cookie(Self.appleCookieName, in: req.header("cookie")), state: form["state"], code: form["code"], error: form["error"]),
            timeout: .seconds(15))
        // With a code handed back, the cookie stays (for the code's life) to bind its exchange.
        let cookie = Self.cookie(Self.appleCookieName, in: req.header("cookie"))
        let kept = answer.keepCookieFor.flatMap { seconds in cookie.map { ($0, seconds) } }
        return HTTPResponse(status: 303, headers: [
            ("Location", answer.location),
            ("Set-Cookie", kept.map { "\(Self.appleCookieName)=\($0.0); Path=/; Max-Age=\($0.1); HttpOnly; Secure; SameSite=None" } ?? Self.clearedAppleCookie),
        ])
    }

    static let clearedAppleCookie = "\(appleCookieName)=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=None"

    /// A browser's exchange carries the flow's cookie (the page's same-origin request sends it);
    /// an app's carries its `codeVerifier`. The cookie is cleared once it has done its work.
    func exchangeSignInCode(_ req: HTTPRequest, _ body: Incoming<SignInCodeBody>) async throws -> HTTPResponse {
        try abuse.checkAuth(ip: req.clientAddress, email: nil)
        let b = try body.read()
        let result = try await accounts.request(Accounts.ExchangeSignInCode(code: b.code, cookie: Self.cookie(Self.appleCookieName, in: req.header("cookie")),
                                                                            codeVerifier: b.codeVerifier))
        return .json(200, AuthBody(account: result.account, session: result.session), headers: [("Set-Cookie", Self.clearedAppleCookie)])
    }

    func linkApple(_ req: HTTPRequest, _ user: Authenticator.User, _ body: Incoming<AppleLinkBody>) async throws -> HTTPResponse {
        let b = try body.read()
        return .json(200, try await accounts.request(Accounts.LinkApple(accountId: user.account, identityToken: b.identityToken, sessionId: user.session)))
    }

    /// A form body's fields (`application/x-www-form-urlencoded`, WHATWG URL §5.1); the first of
    /// a repeated name. A pair that does not decode is left out (URLComponents' setter would
    /// stop the process on bad percent-encoding, so it is not used on what clients send).
    static func formFields(_ body: Data) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ s: Substring) -> String? { s.replacingOccurrences(of: "+", with: " ").removingPercentEncoding }
            guard let name = decode(parts[0]), let value = parts.count > 1 ? decode(parts[1]) : "", fields[name] == nil else { continue }
            fields[name] = value
        }
        return fields
    }

    /// The value of one cookie of a `Cookie` header (RFC 6265 §5.4: `name=value` pairs joined by `; `).
    static func cookie(_ name: String, in header: String?) -> String? {
        guard let header else { return nil }
        for pair in header.split(separator: ";") {
            let trimmed = pair.trimmingCharacters(in: .whitespaces)
            guard let eq = trimmed.firstIndex(of: "="), trimmed[..<eq] == name else { continue }
            let value = String(trimmed[trimmed.index(after: eq)...])
            return value.isEmpty ? nil : value
        }
        return nil
    }
}
