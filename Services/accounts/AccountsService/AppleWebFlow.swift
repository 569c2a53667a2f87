import Core
import Cryptography
import Foundation
import Runtime

/// The settings of Sign in with Apple's REST flow, for the web and Android: on when
/// `REDEEM_APPLE_SERVICES_ID` is set, which then needs the key that signs client secrets, the
/// registered redirect URI and Apple's keys (exit 2 without them).
struct AppleWebSettings: Sendable {
    /// The Services ID: `client_id` of the authorize request, the code exchange and revocation.
    var servicesId: String
    var teamId: String
    var keyId: String
    var key: ES256Key
    /// The gateway's `POST /v1/sessions/apple/callback`, as registered on the Services ID.
    var redirectURI: String
    var authorizeURL: URL
    var tokenURL: URL
    var revokeURL: URL
    var returns: ReturnURLRule

    init?(env: Environment, clientIds: [String], jwks: String?) throws {
        guard let servicesId = env.raw("REDEEM_APPLE_SERVICES_ID") else { return nil }
        func required(_ name: String) throws -> String {
            guard let value = env.raw(name), !value.isEmpty else {
                throw ConfigError(variable: name, problem: "required with REDEEM_APPLE_SERVICES_ID")
            }
            return value
        }
        guard clientIds.contains(servicesId) else {
            throw ConfigError(variable: "REDEEM_APPLE_SERVICES_ID", problem: "must be one of the ids in REDEEM_APPLE_CLIENT_ID")
        }
        guard jwks != nil else { throw ConfigError(variable: "REDEEM_APPLE_JWKS", problem: "required with REDEEM_APPLE_SERVICES_ID") }
        self.servicesId = servicesId
        teamId = try required("REDEEM_APPLE_TEAM_ID")
        keyId = try required("REDEEM_APPLE_KEY_ID")
        let keyFile = try required("REDEEM_APPLE_PRIVATE_KEY")
        guard let data = FileManager.default.contents(atPath: keyFile), let key = ES256Key.privateKey(pem: String(decoding: data, as: UTF8.self)) else {
            throw ConfigError(variable: "REDEEM_APPLE_PRIVATE_KEY", problem: "no P-256 private key (a .p8 file) could be read from it")
        }
        self.key = key
        _ = try required("REDEEM_APPLE_REDIRECT_URI")
        redirectURI = try env.url("REDEEM_APPLE_REDIRECT_URI", default: "").absoluteString
        authorizeURL = try env.url("REDEEM_APPLE_AUTHORIZE_URL", default: "https://appleid.apple.com/auth/authorize")
        tokenURL = try env.url("REDEEM_APPLE_TOKEN_URL", default: "https://appleid.apple.com/auth/token")
        revokeURL = try env.url("REDEEM_APPLE_REVOKE_URL", default: "https://appleid.apple.com/auth/revoke")
        returns = try ReturnURLRule(env.list("REDEEM_APPLE_RETURN_URLS", default: []), variable: "REDEEM_APPLE_RETURN_URLS")
    }

    /// Apple's authorize URL for one sign-in: a code (and an id_token) posted back to the
    /// callback (`form_post`, which asking for a scope requires), the name and email asked for.
    func authorize(_ binding: AppleSignInBinding) -> String {
        var c = URLComponents(url: authorizeURL, resolvingAgainstBaseURL: false)!
        c.queryItems = (c.queryItems ?? []) + [
            URLQueryItem(name: "client_id", value: servicesId),
            URLQueryItem(name: "redirect_uri", value: redirectURI),
            URLQueryItem(name: "response_type", value: "code id_token"),
            URLQueryItem(name: "response_mode", value: "form_post"),
            URLQueryItem(name: "scope", value: "name email"),
            URLQueryItem(name: "state", value: binding.state),
            URLQueryItem(name: "nonce", value: binding.nonce),
        ]
        // URLComponents leaves spaces as %20, as Apple wants the scope (not `+`).
        return c.url!.absoluteString
    }

    /// The client secret Apple's token and revoke endpoints take: an ES256 JWT of the team,
    /// for the Services ID, short-lived (Apple allows up to six months).
    func clientSecret(now: Date) -> String? {
        let iat = Int(now.timeIntervalSince1970.rounded(.down))
        let claims = AppleClientSecretClaims(iss: teamId, iat: iat, exp: iat + 300, aud: AppleIdentity.issuer, sub: servicesId)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let header = try? encoder.encode(JWT.Header(alg: "ES256", typ: nil, kid: keyId)),
              let payload = try? encoder.encode(claims) else { return nil }
        return CompactJWS.sign(header: header, payload: payload, key: key)
    }
}

/// The claims of Sign in with Apple's client secret.
struct AppleClientSecretClaims: Codable, Sendable {
    var iss: String
    var iat: Int
    var exp: Int
    var aud: String
    var sub: String
}

/// Where the web flow may send a browser back (`return`): the gateway's own `/redeem` page (with
/// any query), or a URL of `REDEEM_APPLE_RETURN_URLS`, matched exactly, or by its beginning when
/// the listed one ends in `/*` (an app's deep links under one path). No fragment, no white space.
struct ReturnURLRule: Sendable, Equatable {
    static let page = "/redeem"
    let exact: Set<String>
    let prefixes: [String]

    init(_ listed: [String], variable: String = "REDEEM_APPLE_RETURN_URLS") throws {
        var exact = Set<String>(), prefixes: [String] = []
        for item in listed {
            guard let scheme = URLComponents(string: item.hasSuffix("/*") ? String(item.dropLast()) : item)?.scheme, !scheme.isEmpty,
                  !item.contains("#"), !item.dropLast(item.hasSuffix("/*") ? 2 : 0).contains("*") else {
                throw ConfigError(variable: variable, problem: "\"\(item)\" is not an absolute URL (or one ending in /*) without a fragment")
            }
            if item.hasSuffix("/*") { prefixes.append(String(item.dropLast())) } else { exact.insert(item) }
        }
        self.exact = exact
        self.prefixes = prefixes
    }

    /// The return URL as given, or 400 `returnNotAllowed`.
    func check(_ url: String) throws -> String {
        let refused = ServiceError(.returnNotAllowed, "return is not a URL this server may send you back to", field: "return")
        guard !url.isEmpty, url.utf8.count <= 2048, !url.contains("#"),
              !url.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.properties.generalCategory == .control }) else { throw refused }
        if url == Self.page || url.hasPrefix(Self.page + "?") { return url }
        if exact.contains(url) || prefixes.contains(where: { url.hasPrefix($0) && !url.dropFirst($0.count).contains("..") }) { return url }
        throw refused
    }

    /// `url` with one query parameter more.
    static func appending(_ url: String, _ name: String, _ value: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let encoded = value.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
        return url + (url.contains("?") ? "&" : "?") + name + "=" + encoded
    }
}

/// Binds one browser's sign-in to the Apple answer that comes back: a random secret the
/// browser keeps in a cookie (with when it began and where to return), from which the `state`
/// and the `nonce` sent to Apple are derived. Only that browser can show both the state Apple
/// echoes and the secret it comes from, and the id_token must carry the nonce of this secret,
/// so neither a forged post nor a token from another sign-in passes.
///
/// The one-time code the callback hands back is bound to whoever started the flow too (no
/// login CSRF): an app's `code_challenge` (S256, RFC 7636), whose verifier the app sends with
/// the exchange, or else a verifier derived from the cookie's secret, which only the browser
/// holding the cookie can present.
struct AppleSignInBinding: Sendable, Equatable {
    /// Seconds a sign-in may take, the cookie's life.
    static let lifetime = 600

    let secret: String
    let issuedAt: Int
    let returnURL: String
    /// An app's S256 `code_challenge` (43 characters of base64url), or nil in a browser.
    let challenge: String?

    init(returnURL: String, challenge: String? = nil, now: Date) {
        secret = Crypto.randomToken(bytes: 32)
        issuedAt = Int(now.timeIntervalSince1970)
        self.returnURL = returnURL
        self.challenge = challenge
    }

    /// The cookie's value: `secret.issuedAt.base64url(return)[.challenge]`; nil when it is not
    /// one, or older than `lifetime` (plus `grace`: the exchange comes after the callback).
    init?(cookie: String, now: Date, grace: Int = 0) {
        let parts = cookie.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 || parts.count == 4, parts[0].utf8.count == 43, let issued = Int(parts[1]),
              let url = Base64URL.decode(String(parts[2])).map({ String(decoding: $0, as: UTF8.self) }) else { return nil }
        let age = Int(now.timeIntervalSince1970) - issued
        guard age >= -60, age <= Self.lifetime + grace else { return nil }
        if parts.count == 4 {
            guard Self.isChallenge(String(parts[3])) else { return nil }
            challenge = String(parts[3])
        } else {
            challenge = nil
        }
        secret = String(parts[0])
        issuedAt = issued
        returnURL = url
    }

    var cookie: String { "\(secret).\(issuedAt).\(Base64URL.encode(Array(returnURL.utf8)))" + (challenge.map { ".\($0)" } ?? "") }
    var state: String { derive("state") }
    var nonce: String { derive("nonce") }
    /// The browser's verifier: what its exchange presents, through the cookie.
    var verifier: String { derive("verifier") }

    /// What the sign-in code is stored with: SHA-256 of the verifier that may exchange it.
    var exchangeChallenge: [UInt8] {
        challenge.flatMap { Base64URL.decode($0) } ?? Crypto.sha256(Array(verifier.utf8))
    }

    func matches(state: String) -> Bool { Crypto.constantTimeEqual(Array(state.utf8), Array(self.state.utf8)) }

    /// Whether `verifier` is the one `challenge` (as stored) was made from.
    static func verifies(_ verifier: String, challenge: [UInt8]) -> Bool {
        Crypto.constantTimeEqual(Crypto.sha256(Array(verifier.utf8)), challenge)
    }

    /// An S256 challenge: base64url of 32 bytes, 43 characters.
    static func isChallenge(_ text: String) -> Bool {
        text.utf8.count == 43 && Base64URL.decode(text)?.count == 32
    }

    /// An app's verifier as RFC 7636 §4.1 has it: 43 to 128 unreserved characters.
    static func isVerifier(_ text: String) -> Bool {
        (43...128).contains(text.utf8.count) && text.unicodeScalars.allSatisfy {
            ($0.isASCII && CharacterSet.alphanumerics.contains($0)) || "-._~".unicodeScalars.contains($0)
        }
    }

    private func derive(_ what: String) -> String {
        let bound = "redeem apple \(what) v1|\(secret)|\(issuedAt)|\(returnURL)" + (challenge.map { "|\($0)" } ?? "")
        return Base64URL.encode(Crypto.sha256(Array(bound.utf8)))
    }
}
