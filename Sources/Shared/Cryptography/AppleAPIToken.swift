import Foundation

/// The bearer tokens of Apple's APIs: JWTs signed ES256 with a private key made in App Store
/// Connect (a `.p8` file). An App Store Connect API key signs for offers and codes; an In-App
/// Purchase key signs for the App Store Server API, and its tokens name the app (`bid`).
public struct AppleAPIToken: Sendable {
    public enum API: Sendable, Equatable {
        /// App Store Connect API: Apple refuses a token that lives more than 20 minutes.
        case appStoreConnect
        /// App Store Server API for one app: at most 60 minutes.
        case appStoreServer(bundleId: String)

        /// The longest life Apple accepts, in seconds, counted from `iat`.
        public var maximumLifetime: Int {
            switch self {
            case .appStoreConnect: 20 * 60
            case .appStoreServer: 60 * 60
            }
        }
    }

    public enum Failure: Error, Sendable, Equatable {
        /// The key file could not be read, or holds no P-256 private key.
        case unreadableKey(path: String)
        case signingFailed
    }

    /// The claims Apple reads (both APIs use the same audience).
    public struct Claims: Codable, Sendable, Equatable {
        public var iss: String
        public var iat: Int?
        public var exp: Int
        public var aud: String
        /// The app's bundle id: App Store Server API only.
        public var bid: String?
    }

    /// A signed token and when it stops being valid (Unix seconds).
    public struct Issued: Sendable, Equatable {
        public let token: String
        public let expires: Int
    }

    public static let audience = "appstoreconnect-v1"
    /// The life of a token unless asked otherwise, below both of Apple's maximums with room for
    /// a clock that runs a little ahead of Apple's.
    public static let defaultLifetime = 15 * 60

    public let api: API
    public let keyId: String
    public let issuerId: String
    private let key: ES256Key

    public init(api: API, keyId: String, issuerId: String, key: ES256Key) {
        self.api = api
        self.keyId = keyId
        self.issuerId = issuerId
        self.key = key
    }

    /// With the private key read from a `.p8` file (PKCS#8 PEM), as App Store Connect hands it out.
    public init(api: API, keyId: String, issuerId: String, privateKeyFile path: String) throws(Failure) {
        guard let data = FileManager.default.contents(atPath: path),
              let key = ES256Key.privateKey(pem: String(decoding: data, as: UTF8.self)) else { throw .unreadableKey(path: path) }
        self.init(api: api, keyId: keyId, issuerId: issuerId, key: key)
    }

    /// A token issued at `now` that lives `lifetime` seconds, cut to what the API accepts.
    public func issue(now: Date, lifetime: Int = AppleAPIToken.defaultLifetime) throws(Failure) -> Issued {
        let iat = Int(now.timeIntervalSince1970.rounded(.down))
        let exp = iat + max(1, min(lifetime, api.maximumLifetime))
        var bundleId: String?
        if case .appStoreServer(let bid) = api { bundleId = bid }
        let claims = Claims(iss: issuerId, iat: iat, exp: exp, aud: Self.audience, bid: bundleId)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let header = try? encoder.encode(JWT.Header(alg: "ES256", typ: "JWT", kid: keyId)),
              let payload = try? encoder.encode(claims),
              let token = CompactJWS.sign(header: header, payload: payload, key: key) else { throw .signingFailed }
        return Issued(token: token, expires: exp)
    }
}

/// Reuses one token until `renewBefore` seconds before it expires, as Apple advises for App
/// Store Connect. The time is an input, so tests drive it without waiting; callers that share
/// one cache between tasks hold it in a `Mutex`.
public struct AppleAPITokenCache: Sendable {
    public let issuer: AppleAPIToken
    public let lifetime: Int
    public let renewBefore: Int
    private var current: AppleAPIToken.Issued?

    public init(issuer: AppleAPIToken, lifetime: Int = AppleAPIToken.defaultLifetime, renewBefore: Int = 60) {
        self.issuer = issuer
        self.lifetime = lifetime
        self.renewBefore = renewBefore
    }

    /// The token to send at `now`: the cached one while it has more than `renewBefore` seconds
    /// left, else a new one.
    public mutating func token(now: Date) throws(AppleAPIToken.Failure) -> String {
        if let current, Double(current.expires - renewBefore) > now.timeIntervalSince1970 { return current.token }
        let issued = try issuer.issue(now: now, lifetime: lifetime)
        current = issued
        return issued.token
    }
}
