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
    private let source: JWKSource?

    init(clientId: String?, jwks source: String?) {
        self.clientId = clientId
        self.source = source.map(JWKSource.init)
    }

    private static func refused(_ why: String) -> ServiceError { ServiceError(.invalidIdentityToken, why) }

    func verify(_ token: String, now: Date = Date()) async throws -> AppleClaims {
        guard let clientId, let source else { throw Self.refused("Sign in with Apple is not configured on this server") }
        let loaded: [String: AsymmetricKey]
        do { loaded = try await source.keys(for: JWKSource.kid(of: token)) } catch { throw Self.refused("Apple's keys could not be loaded") }
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

    /// RSA keys of a JWKS document, by key id.
    static func parse(_ data: Data) -> [String: AsymmetricKey] { JWKSet.rsaKeys(data) }
}
