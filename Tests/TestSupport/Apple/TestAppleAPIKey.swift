import Core
import Cryptography
import Foundation

/// An API key as App Store Connect hands one out, made at run time: a key id, the team's
/// issuer id and the private key in a `.p8` file (PKCS#8 PEM). The fakes check bearer tokens
/// with its public half; Redeem signs with the file.
public final class TestAppleAPIKey: Sendable {
    public let keyId: String
    public let issuerId: String
    public let key: ES256Key
    /// The `.p8` file (`REDEEM_ASC_PRIVATE_KEY`, `REDEEM_APPSTORE_PRIVATE_KEY`).
    public let privateKeyFile: URL
    private let directory: URL

    public init(keyId: String = "TEST\(Int.random(in: 100_000...999_999))", issuerId: String = UUID().uuidString.lowercased()) throws {
        self.keyId = keyId
        self.issuerId = issuerId
        key = ES256Key.generate()
        directory = try Project.temporaryDirectory("apple-key")
        privateKeyFile = directory.appendingPathComponent("AuthKey_\(keyId).p8")
        try Data(PEM.encode(key.privateKeyPKCS8!, label: "PRIVATE KEY").utf8).write(to: privateKeyFile)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// A token issuer for `api` with this key, as Redeem would make one.
    public func issuer(_ api: AppleAPIToken.API) -> AppleAPIToken {
        AppleAPIToken(api: api, keyId: keyId, issuerId: issuerId, key: key)
    }

    /// Whether `authorization` is `Bearer <JWT>` that Apple would take at `now` for `api`:
    /// signed ES256 by this key, `kid` this key's id, `typ: JWT`, `iss` the issuer id, `aud`
    /// `appstoreconnect-v1`, not expired, `exp` at most the API's maximum life after `iat` and
    /// after now, and for the App Store Server API a `bid` naming the app.
    public func accepts(_ authorization: String?, for api: AppleAPIToken.API, now: Date = Date()) -> Bool {
        guard let authorization, authorization.hasPrefix("Bearer "),
              let jws = CompactJWS(String(authorization.dropFirst("Bearer ".count))),
              let header = try? JSONDecoder().decode(JWT.Header.self, from: Data(jws.header)),
              let claims = try? JSONDecoder().decode(AppleAPIToken.Claims.self, from: Data(jws.payload)) else { return false }
        guard header.alg == "ES256", header.kid == keyId, header.typ == "JWT", jws.isSigned(by: key) else { return false }
        let seconds = Int(now.timeIntervalSince1970.rounded(.down)), longest = api.maximumLifetime
        guard claims.iss == issuerId, claims.aud == AppleAPIToken.audience,
              claims.exp > seconds, claims.exp <= seconds + longest else { return false }
        // Apple's Python library leaves `iat` out of Server API tokens, and Apple takes them.
        if let iat = claims.iat, claims.exp - iat > longest || iat > seconds + 60 { return false }
        if case .appStoreServer(let bundleId) = api, claims.bid != bundleId { return false }
        return true
    }
}
