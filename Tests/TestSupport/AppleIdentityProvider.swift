import Core
import Cryptography
import Foundation

/// Plays Apple's part in Sign in with Apple for tests: an RSA key pair, its JWKS document, and
/// identity tokens signed with it (or deliberately wrong).
public final class AppleIdentityProvider: Sendable {
    public let kid: String
    private let key: AsymmetricKey

    public init(kid: String = "test-\(UUID().uuidString.prefix(6))") {
        self.kid = kid
        key = AsymmetricKey.generateRSA(bits: 2048)!
    }

    /// The JWKS document with this provider's public key.
    public func jwks() -> Data {
        let (n, e) = key.rsaComponents!
        let doc: [String: Any] = ["keys": [["kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": Base64URL.encode(n), "e": Base64URL.encode(e)]]]
        return try! JSONSerialization.data(withJSONObject: doc)
    }

    public struct Claims: Codable, Sendable {
        public var iss = "https://appleid.apple.com"
        public var aud: String
        public var exp = Int(Date().timeIntervalSince1970) + 600
        public var iat = Int(Date().timeIntervalSince1970)
        public var sub: String
        public var email: String?
        public var email_verified: String?
        /// The nonce of the authorization request (REST flow), echoed.
        public var nonce: String?
        public var nonce_supported: Bool?
        public init(aud: String, sub: String, email: String? = nil, emailVerified: Bool? = nil, nonce: String? = nil) {
            self.aud = aud
            self.sub = sub
            self.email = email
            self.email_verified = emailVerified.map { $0 ? "true" : "false" }
            self.nonce = nonce
            self.nonce_supported = nonce == nil ? nil : true
        }
    }

    public func token(_ claims: Claims) -> String { try! JWT.sign(claims, key: key, kid: kid) }

    /// A token whose header says `alg: none` and carries no signature.
    public func unsignedToken(_ claims: Claims) -> String {
        let header = Base64URL.encode(Array(#"{"alg":"none","kid":"\#(kid)"}"#.utf8))
        return header + "." + Base64URL.encode(try! JSONEncoder().encode(claims)) + "."
    }
}
