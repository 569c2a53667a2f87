import Core
import Cryptography
import Foundation
import FoundationNetworking
import Synchronization
#if canImport(FoundationNetworking)
#endif

/// The claims of a Sign in with Apple identity token that Redeem uses.
struct AppleClaims: Decodable, Sendable {
    var iss: String
    var aud: [String]
    var exp: Double
    var sub: String
    var email: String?
    var emailVerified: Bool

    enum CodingKeys: String, CodingKey { case iss, aud, exp, sub, email, email_verified }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        iss = try c.decode(String.self, forKey: .iss)
        if let one = try? c.decode(String.self, forKey: .aud) { aud = [one] } else { aud = try c.decode([String].self, forKey: .aud) }
        exp = try c.decode(Double.self, forKey: .exp)
        sub = try c.decode(String.self, forKey: .sub)
        email = try c.decodeIfPresent(String.self, forKey: .email)
        // Apple sends `email_verified` as a boolean or as the string "true".
        if let b = try? c.decode(Bool.self, forKey: .email_verified) { emailVerified = b }
        else { emailVerified = (try? c.decode(String.self, forKey: .email_verified)) == "true" }
    }
}

/// Verifies identity tokens (RS256 JWTs) against Apple's keys: signature by a key of the
/// configured JWKS (file path or URL), issuer `https://appleid.apple.com`, audience = the
/// configured client id, not expired.
final class AppleIdentity: Sendable {
    static let issuer = "https://appleid.apple.com"

    private let clientId: String?
    private let source: String?
    private let keys = Mutex<(keys: [String: AsymmetricKey], fetchedAt: Date?)>(([:], nil))

    init(clientId: String?, jwks source: String?) {
        self.clientId = clientId
        self.source = source
    }

    private static func refused(_ why: String) -> ServiceError { ServiceError(.invalidIdentityToken, why) }

    func verify(_ token: String, now: Date = Date()) async throws -> AppleClaims {
        guard let clientId, source != nil else { throw Self.refused("Sign in with Apple is not configured on this server") }
        var loaded = try await currentKeys(refresh: false)
        let kid = Self.kid(of: token)
        if let kid, loaded[kid] == nil { loaded = try await currentKeys(refresh: true) }  // Apple rotated its keys
        let claims: AppleClaims
        do {
            (_, claims) = try JWT.verify(token, as: AppleClaims.self, algorithm: .rs256) { kid in kid.flatMap { loaded[$0] } }
        } catch {
            throw Self.refused("the identity token could not be verified")
        }
        guard claims.iss == Self.issuer else { throw Self.refused("the identity token was not issued by Apple") }
        guard claims.aud.contains(clientId) else { throw Self.refused("the identity token is for another app") }
        guard claims.exp > now.timeIntervalSince1970 else { throw Self.refused("the identity token has expired") }
        guard !claims.sub.isEmpty else { throw Self.refused("the identity token names no user") }
        return claims
    }

    private static func kid(of token: String) -> String? {
        guard let first = token.split(separator: ".").first, let bytes = Base64URL.decode(first),
              let header = try? JSONDecoder().decode(JWT.Header.self, from: Data(bytes)) else { return nil }
        return header.kid
    }

    /// Keys from the JWKS, read again at most once a minute (and hourly without a reason).
    private func currentKeys(refresh: Bool) async throws -> [String: AsymmetricKey] {
        let (cached, fetchedAt) = keys.withLock { $0 }
        if let fetchedAt {
            let age = Date().timeIntervalSince(fetchedAt)
            if (!refresh && age < 3600) || age < 60 { return cached }
        }
        guard let source else { return [:] }
        let data: Data
        do {
            if source.hasPrefix("http://") || source.hasPrefix("https://"), let url = URL(string: source) {
                data = try await URLSession.shared.data(from: url).0
            } else {
                data = try Data(contentsOf: URL(fileURLWithPath: source))
            }
        } catch {
            if !cached.isEmpty { return cached }
            throw Self.refused("Apple's keys could not be loaded")
        }
        let parsed = Self.parse(data)
        keys.withLock { $0 = (parsed, Date()) }
        return parsed
    }

    /// RSA keys of a JWKS document, by key id.
    static func parse(_ data: Data) -> [String: AsymmetricKey] {
        struct JWKS: Decodable {
            struct Key: Decodable { var kty: String; var kid: String?; var n: String?; var e: String? }
            var keys: [Key]
        }
        guard let jwks = try? JSONDecoder().decode(JWKS.self, from: data) else { return [:] }
        var out: [String: AsymmetricKey] = [:]
        for k in jwks.keys where k.kty == "RSA" {
            guard let kid = k.kid, let n = k.n.flatMap(Base64URL.decode), let e = k.e.flatMap(Base64URL.decode),
                  let key = AsymmetricKey.rsa(n: n, e: e) else { continue }
            out[kid] = key
        }
        return out
    }
}
