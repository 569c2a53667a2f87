import Core
import Foundation

/// The keys a service seals its stored secrets with (accounts' signing keys, grants' webhook
/// secrets): AES-256-GCM under a 256-bit key from the environment (`REDEEM_SECRET_KEY`), so a copy
/// of the database alone (a backup, a replica, a role that reads the tables) holds no usable secret.
///
/// Each sealed value is stored with the id of the key that sealed it, and is bound to its row by
/// the additional data (`context`), so a sealed value copied onto another row does not open. A
/// keyring may hold other keys besides the current one (`REDEEM_SECRET_KEY_PREVIOUS`): they open
/// values, and only the current key seals. That is what a rotation needs (docs/security.md).
public struct SecretKeyring: Sendable {
    public struct Key: Sendable {
        /// Names the key in the rows it sealed; derived from the key, so it needs no setting.
        public let id: String
        fileprivate let bytes: [UInt8]

        public init?(_ bytes: [UInt8]) {
            guard bytes.count == AESGCM.keySize else { return nil }
            self.bytes = bytes
            id = "k" + Crypto.sha256(Array("redeem secret key id".utf8) + bytes).prefix(6).map { String(format: "%02x", $0) }.joined()
        }
    }

    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// Sealed under a key this keyring does not hold.
        case unknownKey(String)
        /// Not sealed under that key and context, or altered.
        case altered(String)

        public var description: String {
            switch self {
            case .unknownKey(let id): "a stored secret is sealed under key \(id), which neither REDEEM_SECRET_KEY nor REDEEM_SECRET_KEY_PREVIOUS is"
            case .altered(let context): "the stored secret of \(context) does not open: altered, or moved from another row"
            }
        }
    }

    public let current: Key
    public let others: [Key]

    public init(current: Key, others: [Key] = []) {
        self.current = current
        self.others = others.filter { $0.id != current.id }
    }

    /// A keyring of one fresh random key (tests).
    public static func random() -> SecretKeyring { SecretKeyring(current: Key(Crypto.randomBytes(AESGCM.keySize))!) }

    /// Seals `plaintext` for the row `context` names (`"grants.webhook_endpoints/<id>"`) under the
    /// current key; store the key id beside it.
    public func seal(_ plaintext: [UInt8], context: String) -> (sealed: [UInt8], keyId: String) {
        (AESGCM.seal(plaintext, key: current.bytes, aad: Array(context.utf8)), current.id)
    }

    /// Opens what `seal` made. A nil `keyId` marks a value stored before secrets were sealed: it is
    /// the plaintext itself, answered as it is (and sealed at the service's next start).
    public func open(_ stored: [UInt8], keyId: String?, context: String) throws -> [UInt8] {
        guard let keyId else { return stored }
        guard let key = ([current] + others).first(where: { $0.id == keyId }) else { throw Failure.unknownKey(keyId) }
        guard let plain = AESGCM.open(stored, key: key.bytes, aad: Array(context.utf8)) else { throw Failure.altered(context) }
        return plain
    }

    /// A keyed digest of `data` under the current key: HMAC-SHA256 with a key derived from it for
    /// `purpose`. For a row found by a value that a copy of the database must not let anyone test
    /// guesses against (a hash of a request whose body holds a password). It changes with the key.
    public func digest(_ data: [UInt8], purpose: String) -> [UInt8] {
        Crypto.hmacSHA256(key: Crypto.hmacSHA256(key: current.bytes, Array("redeem digest \(purpose)".utf8)), data)
    }

    /// Whether a value stored under `keyId` should be sealed again: it is plaintext, or sealed under
    /// a key other than the current one.
    public func needsResealing(_ keyId: String?) -> Bool { keyId != current.id }
}
