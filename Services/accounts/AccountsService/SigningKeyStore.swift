import Core
import Cryptography
import Database
import Foundation

/// The keys access tokens are signed with, as the accounts service stores them
/// (`accounts.signing_keys`, private DER sealed under `REDEEM_SECRET_KEY`: `SecretKeyring`). Access tokens are RS256: a gateway verifies every new
/// token it sees, and an RSA-2048 verification costs a sixth of an Ed25519 one (about 25 µs
/// against 140 µs here), while signing (about 1 ms) happens once per sign-in or refresh.
/// Ed25519 keys of earlier versions stay listed so their unexpired tokens still verify.
public enum SigningKeyStore {
    public struct Stored: Sendable {
        public let kid: String
        public let key: AsymmetricKey
    }

    /// Every stored key, newest first, opened with `keyring`.
    public static func all(_ c: PGConnection, keyring: SecretKeyring) throws -> [Stored] {
        try c.query("SELECT kid, algorithm, private_key, secret_key_id FROM accounts.signing_keys ORDER BY created_at DESC, kid").rows.compactMap { row in
            let kid: String = try row.decode("kid")
            let material = try keyring.open(Array(try row.decode("private_key", as: PGBytes.self).data), keyId: try row.decodeIfPresent("secret_key_id", as: String.self),
                                            context: context(kid))
            let key = try row.decode("algorithm", as: String.self) == "RS256"
                ? AsymmetricKey.privateKey(der: material) : AsymmetricKey.ed25519(privateKey: material)
            return key.map { Stored(kid: kid, key: $0) }
        }
    }

    /// The key new tokens are signed with: the newest RS256 key.
    public static func signing(_ c: PGConnection, keyring: SecretKeyring) throws -> Stored? {
        try all(c, keyring: keyring).first { $0.key.algorithm == .rs256 }
    }

    /// Stores a new key, sealed; a no-op when its key id is taken.
    static func insert(_ c: PGConnection, kid: String, algorithm: String, privateKey: [UInt8], keyring: SecretKeyring) throws {
        let sealed = keyring.seal(privateKey, context: context(kid))
        try c.query("INSERT INTO accounts.signing_keys (kid, algorithm, private_key, secret_key_id) VALUES ($1, $2, $3, $4) ON CONFLICT (kid) DO NOTHING",
                     [kid, algorithm, PGBytes(Data(sealed.sealed)), sealed.keyId])
    }

    /// Seals under the current key every stored key that is plain (stored before keys were sealed)
    /// or sealed under another key (before a rotation). Instances starting together each reseal
    /// a row at most once: the rows are locked, and a row already resealed no longer matches.
    /// Answers how many it sealed.
    static func reseal(_ c: PGConnection, keyring: SecretKeyring) throws -> Int {
        try c.transaction { tx in
            let rows = try tx.query("""
                SELECT kid, private_key, secret_key_id FROM accounts.signing_keys WHERE secret_key_id IS DISTINCT FROM $1 FOR UPDATE
                """, [keyring.current.id]).rows
            for row in rows {
                let kid: String = try row.decode("kid")
                let plain = try keyring.open(Array(try row.decode("private_key", as: PGBytes.self).data), keyId: try row.decodeIfPresent("secret_key_id", as: String.self),
                                             context: context(kid))
                let sealed = keyring.seal(plain, context: context(kid))
                try tx.query("UPDATE accounts.signing_keys SET private_key = $2, secret_key_id = $3 WHERE kid = $1",
                             [kid, PGBytes(Data(sealed.sealed)), sealed.keyId])
            }
            return rows.count
        }
    }

    /// What a key's sealed bytes are bound to: its row.
    static func context(_ kid: String) -> String { "accounts.signing_keys/" + kid }
}
