import Foundation

/// The claims of a session's access token: an EdDSA (Ed25519) JWT minted by accounts and
/// verified by every gateway with the public key alone, without a bus round trip.
public struct AccessClaims: Codable, Sendable, Equatable {
    /// The account id.
    public var sub: String
    /// The session id (revocation is per session).
    public var sid: String
    /// The account's appUserId, which never changes (so services need not look it up).
    public var app: String
    /// Issued at / expires at, Unix seconds.
    public var iat: Int64
    public var exp: Int64
    public var typ: String

    public init(account: UUID, appUserId: String, session: UUID, issuedAt: Date, expiresAt: Date) {
        sub = account.lowercasedString
        app = appUserId
        sid = session.lowercasedString
        iat = Int64(issuedAt.timeIntervalSince1970)
        exp = Int64(expiresAt.timeIntervalSince1970)
        typ = "access"
    }

    public var accountId: UUID? { UUID(parsing: sub) }
    public var sessionId: UUID? { UUID(parsing: sid) }
    public var expiresAt: Date { Date(timeIntervalSince1970: TimeInterval(exp)) }
}

/// The keys access tokens are signed with, as the accounts service stores them
/// (`accounts.signing_keys`, private DER). Access tokens are RS256: a gateway verifies every new
/// token it sees, and an RSA-2048 verification costs a sixth of an Ed25519 one (about 25 µs
/// against 140 µs here), while signing (about 1 ms) happens once per sign-in or refresh.
/// Ed25519 keys of earlier versions stay listed so their unexpired tokens still verify.
public enum AccessTokenKeys {
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
