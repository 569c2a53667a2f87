import Core
import Cryptography
import Database
import Foundation

/// The keys access tokens are signed with, as the accounts service stores them
/// (`accounts.signing_keys`, private DER). Access tokens are RS256: a gateway verifies every new
/// token it sees, and an RSA-2048 verification costs a sixth of an Ed25519 one (about 25 µs
/// against 140 µs here), while signing (about 1 ms) happens once per sign-in or refresh.
/// Ed25519 keys of earlier versions stay listed so their unexpired tokens still verify.
public enum SigningKeyStore {
    public struct Stored: Sendable {
        public let kid: String
        public let key: AsymmetricKey
    }

    /// Every stored key, newest first.
    public static func all(_ c: PGConnection) throws -> [Stored] {
        try c.query("SELECT kid, algorithm, private_key FROM accounts.signing_keys ORDER BY created_at DESC, kid").rows.compactMap { row in
            let kid: String = try row.decode("kid")
            let material = Array(try row.decode("private_key", as: PGBytes.self).data)
            let key = try row.decode("algorithm", as: String.self) == "RS256"
                ? AsymmetricKey.privateKey(der: material) : AsymmetricKey.ed25519(privateKey: material)
            return key.map { Stored(kid: kid, key: $0) }
        }
    }

    /// The key new tokens are signed with: the newest RS256 key.
    public static func signing(_ c: PGConnection) throws -> Stored? {
        try all(c).first { $0.key.algorithm == .rs256 }
    }
}
