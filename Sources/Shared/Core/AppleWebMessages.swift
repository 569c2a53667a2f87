import Foundation

// Sign in with Apple on the web and Android: the REST flow, the one-time sign-in
// codes that hand its session over, linking Apple to an account.

extension Accounts {
    /// Begins the web flow: the allow-listed `returnURL` and a fresh binding. The gateway sets
    /// `cookie` (short-lived, HttpOnly, Secure, SameSite=None) and redirects to `authorizeURL`,
    /// which carries the `state` and `nonce` derived from it.
    public struct AppleWebStart: BusRequest {
        public static let type = "accounts.appleWebStart"
        public struct Response: Codable, Sendable {
            public var authorizeURL: String
            public var cookie: String
            /// Seconds the cookie lives.
            public var cookieMaxAge: Int
            public init(authorizeURL: String, cookie: String, cookieMaxAge: Int) {
                self.authorizeURL = authorizeURL
                self.cookie = cookie
                self.cookieMaxAge = cookieMaxAge
            }
        }
        public var returnURL: String
        /// An app's PKCE-style `code_challenge` (S256 of its verifier, RFC 7636): the sign-in code
        /// then opens a session only with that verifier. Without one (a browser), the code is
        /// bound to the browser's flow cookie.
        public var codeChallenge: String?
        /// `S256`, the only method taken (nil means S256 when a challenge is sent).
        public var codeChallengeMethod: String?
        public init(returnURL: String, codeChallenge: String? = nil, codeChallengeMethod: String? = nil) {
            self.returnURL = returnURL
            self.codeChallenge = codeChallenge
            self.codeChallengeMethod = codeChallengeMethod
        }
    }

    /// What Apple posted to the callback (`form_post`), with the cookie the browser sent. The
    /// answer is where to send the browser: the return URL with a one-time `code`, or with
    /// `error` when Apple reported one (the user cancelled).
    public struct AppleWebCallback: BusRequest {
        public static let type = "accounts.appleWebCallback"
        public struct Response: Codable, Sendable {
            public var location: String
            /// Seconds the browser's flow cookie must still live, for the exchange of the code it
            /// binds; nil when no code was handed back (the cookie is then cleared).
            public var keepCookieFor: Int?
            public init(location: String, keepCookieFor: Int? = nil) {
                self.location = location
                self.keepCookieFor = keepCookieFor
            }
        }
        public var cookie: String?
        public var state: String?
        public var code: String?
        public var error: String?
        public init(cookie: String?, state: String?, code: String?, error: String?) {
            self.cookie = cookie
            self.state = state
            self.code = code
            self.error = error
        }
    }

    /// Exchanges a one-time sign-in code (from the web flow's redirect) for a session. A code
    /// works once, for a short time, and only for whoever started its flow: the browser holding
    /// the flow's cookie, or the app holding the verifier of its `code_challenge`.
    public struct ExchangeSignInCode: BusRequest {
        public static let type = "accounts.exchangeSignInCode"
        public typealias Response = AuthResult
        public var code: String
        /// The browser's flow cookie, which the code is bound to when a browser started the flow.
        public var cookie: String?
        /// The app's PKCE verifier, when the app started the flow with a `code_challenge`.
        public var codeVerifier: String?
        public init(code: String, cookie: String? = nil, codeVerifier: String? = nil) {
            self.code = code
            self.cookie = cookie
            self.codeVerifier = codeVerifier
        }
    }

    /// Links the Apple user of a native identity token to a signed-in account.
    public struct LinkApple: BusRequest {
        public static let type = "accounts.linkApple"
        public typealias Response = AccountView
        public var accountId: UUID
        public var identityToken: String
        /// The session asking: with an unproven email, its password must be fresh.
        public var sessionId: UUID?
        public init(accountId: UUID, identityToken: String, sessionId: UUID? = nil) {
            self.accountId = accountId
            self.identityToken = identityToken
            self.sessionId = sessionId
        }
    }
}
