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
    /// The `nonce` of the authorization request, echoed (web and Android flow).
    var nonce: String?
    /// Apple says it can echo a nonce: a nonce sent but missing is then a refusal.
    var nonceSupported: Bool?

    enum CodingKeys: String, CodingKey { case iss, aud, exp, sub, email, email_verified, nonce, nonce_supported }

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
        nonce = try? c.decodeIfPresent(String.self, forKey: .nonce)
        if let b = try? c.decode(Bool.self, forKey: .nonce_supported) { nonceSupported = b }
        else { nonceSupported = (try? c.decode(String.self, forKey: .nonce_supported)).map { $0 == "true" } }
    }
}

/// Verifies identity tokens (RS256 JWTs) against Apple's keys: signature by a key of the
/// configured JWKS (file path or URL), issuer `https://appleid.apple.com`, audience one of the
/// configured client ids (the app's bundle id for native sign-in, the Services ID for the web
/// and Android flow: `REDEEM_APPLE_CLIENT_ID` lists both), not expired, and, when the caller
/// sent Apple a nonce, carrying it.
final class AppleIdentity: Sendable {
    static let issuer = "https://appleid.apple.com"

    private let clientIds: [String]
    private let source: JWKSource?

    init(clientIds: [String], jwks source: String?) {
        self.clientIds = clientIds
        self.source = source.map(JWKSource.init)
    }

    private static func refused(_ why: String) -> ServiceError { ServiceError(.invalidIdentityToken, why) }

    /// `nonce`: the one sent with the authorization request (web flow), which the token must
    /// carry; nil for a native sign-in, whose app handles its own nonce.
    func verify(_ token: String, nonce: String? = nil, now: Date = Date()) async throws -> AppleClaims {
        guard !clientIds.isEmpty, let source else { throw Self.refused("Sign in with Apple is not configured on this server") }
        let loaded: [String: AsymmetricKey]
        do { loaded = try await source.keys(for: JWKSource.kid(of: token)) } catch { throw Self.refused("Apple's keys could not be loaded") }
        let claims: AppleClaims
        do {
            (_, claims) = try JWT.verify(token, as: AppleClaims.self, algorithm: .rs256) { kid in kid.flatMap { loaded[$0] } }
        } catch {
            throw Self.refused("the identity token could not be verified")
        }
        guard claims.iss == Self.issuer else { throw Self.refused("the identity token was not issued by Apple") }
        guard claims.aud.contains(where: clientIds.contains) else { throw Self.refused("the identity token is for another app") }
        guard claims.exp > now.timeIntervalSince1970 else { throw Self.refused("the identity token has expired") }
        guard !claims.sub.isEmpty else { throw Self.refused("the identity token names no user") }
        if let nonce, claims.nonce != nonce {
            throw Self.refused(claims.nonce == nil ? "the identity token carries no nonce" : "the identity token is for another sign-in (nonce)")
        }
        return claims
    }

    /// RSA keys of a JWKS document, by key id.
    static func parse(_ data: Data) -> [String: AsymmetricKey] { JWKSet.rsaKeys(data) }
}
