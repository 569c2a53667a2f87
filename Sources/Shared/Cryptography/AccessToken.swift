import Core
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
    /// The operator role of a member's session (`MemberView`); absent for everyone else.
    public var rol: String?

    public init(account: UUID, appUserId: String, session: UUID, issuedAt: Date, expiresAt: Date, role: Role? = nil) {
        sub = account.lowercasedString
        app = appUserId
        sid = session.lowercasedString
        iat = Int64(issuedAt.timeIntervalSince1970)
        exp = Int64(expiresAt.timeIntervalSince1970)
        typ = "access"
        rol = role?.rawValue
    }

    /// The member's role, if the session is a member's.
    public var role: Role? { rol.flatMap(Role.init(rawValue:)) }

    public var accountId: UUID? { UUID(parsing: sub) }
    public var sessionId: UUID? { UUID(parsing: sid) }
    public var expiresAt: Date { Date(timeIntervalSince1970: TimeInterval(exp)) }
}
