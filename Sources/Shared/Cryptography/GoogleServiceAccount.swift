import Core
import Foundation

/// A Google service account, as its JSON key file holds it (`client_email`, `private_key` as
/// PKCS#8 PEM, `private_key_id`), and the RS256 JWT assertion it signs to get an OAuth access
/// token (RFC 7523, Google's "Using OAuth 2.0 for Server to Server Applications"): `iss` the
/// account's email, `scope`, `aud` the token URL, `iat`, and `exp` at most an hour later.
public struct GoogleServiceAccount: Sendable {
    public enum Failure: Error, Sendable, Equatable {
        /// The file could not be read, is not a service account key, or holds no RSA key.
        case unreadableKey(String)
        case signingFailed
    }

    /// The claims of the assertion (what Google's token endpoint reads).
    public struct Claims: Codable, Sendable, Equatable {
        public var iss: String
        public var scope: String
        public var aud: String
        public var iat: Int
        public var exp: Int
        public init(iss: String, scope: String, aud: String, iat: Int, exp: Int) {
            self.iss = iss
            self.scope = scope
            self.aud = aud
            self.iat = iat
            self.exp = exp
        }
    }

    /// The fields of a key file Redeem reads.
    struct KeyFile: Decodable {
        var type: String?
        var client_email: String
        var private_key: String
        var private_key_id: String?
    }

    /// Google refuses an assertion that lives longer than an hour.
    public static let maximumLifetime = 3600
    /// The scope of the Google Play Developer API.
    public static let androidPublisherScope = "https://www.googleapis.com/auth/androidpublisher"
    public static let jwtBearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"

    public let email: String
    /// `private_key_id`: the assertion's `kid`, so Google finds the key without trying each.
    public let keyId: String?
    public let key: AsymmetricKey

    public init(email: String, keyId: String?, key: AsymmetricKey) {
        self.email = email
        self.keyId = keyId
        self.key = key
    }

    /// From the contents of a key file as the Cloud console hands it out.
    public init(json: Data) throws(Failure) {
        guard let file = try? JSONDecoder().decode(KeyFile.self, from: json) else {
            throw .unreadableKey("not a service account key file (client_email and private_key are required)")
        }
        guard file.type == nil || file.type == "service_account" else { throw .unreadableKey("the key file's type is not service_account") }
        guard let key = AsymmetricKey.privateKey(pem: file.private_key), key.algorithm == .rs256 else {
            throw .unreadableKey("the key file's private_key is not an RSA private key")
        }
        self.init(email: file.client_email, keyId: file.private_key_id, key: key)
    }

    /// From a key file's path.
    public init(file path: String) throws(Failure) {
        guard let data = FileManager.default.contents(atPath: path) else { throw .unreadableKey("cannot read \"\(path.suffix(80))\"") }
        try self.init(json: data)
    }

    /// An assertion issued at `now` for `scope` at the token endpoint `audience`, living
    /// `lifetime` seconds (cut to Google's hour).
    public func assertion(scope: String, audience: String, now: Date, lifetime: Int = GoogleServiceAccount.maximumLifetime) throws(Failure) -> String {
        let iat = Int(now.timeIntervalSince1970.rounded(.down))
        let claims = Claims(iss: email, scope: scope, aud: audience, iat: iat, exp: iat + max(1, min(lifetime, Self.maximumLifetime)))
        do { return try JWT.sign(claims, key: key, kid: keyId) } catch { throw .signingFailed }
    }
}
