import Core
import Cryptography
import Database
import Foundation

/// Members: accounts with an operator role. An admin invites an email with a role; the
/// invitation's token (random, stored as its SHA-256 only, valid for `inviteTTL`, used once, and
/// revocable until then) makes the account (or joins the existing account of that email, given
/// its password) a member.
enum MemberStore {
    /// 72 hours, as Stripe's team invitations: long enough for a weekend, short enough that a
    /// forgotten link stops working soon.
    static let inviteTTL: TimeInterval = 72 * 3_600

    /// The condition of an invitation that still makes a member.
    static let pending = "accepted_at IS NULL AND revoked_at IS NULL AND expires_at > now()"

    static func invite(_ tx: PGConnection, email: String, role: Role) throws -> Members.Invite.Response {
        let token = "inv_" + Crypto.randomToken(bytes: 32)
        let row = try tx.query("""
            INSERT INTO accounts.member_invites (id, token_hash, email, role, expires_at) VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))
            RETURNING id, email, role, created_at, expires_at
            """, [UUID.random(), hash(token), email, role.rawValue, inviteTTL]).first!
        return .init(invite: try inviteView(row), token: token)
    }

    /// Spends an invitation: its email and role, or `invalidToken` for one unknown, spent or expired.
    static func spend(_ tx: PGConnection, token: String) throws -> (id: UUID, email: String, role: Role) {
        guard let row = try tx.query("""
            UPDATE accounts.member_invites SET accepted_at = now()
            WHERE token_hash = $1 AND \(pending) RETURNING id, email, role
            """, [hash(token)]).first else { throw ServiceError(.invalidToken, "the invitation is not valid, was used, or has expired") }
        return (try row.decode("id"), try row.decode("email"), try role(row))
    }

    /// Makes `account` a member with `role` (a member already keeps the higher of the two roles).
    static func add(_ tx: PGConnection, account: UUID, role: Role, invite: UUID) throws -> MemberView {
        let current = try get(tx, id: account)
        let kept = max(current?.role ?? role, role)
        try tx.query("""
            INSERT INTO accounts.members (account_id, role) VALUES ($1, $2) ON CONFLICT (account_id) DO UPDATE SET role = EXCLUDED.role
            """, [account, kept.rawValue])
        try tx.query("UPDATE accounts.member_invites SET account_id = $2 WHERE id = $1", [invite, account])
        guard let view = try get(tx, id: account) else { throw ServiceError.internal }
        return view
    }

    static func get(_ c: PGConnection, id: UUID, lock: Bool = false) throws -> MemberView? {
        try c.query("""
            SELECT m.account_id AS id, a.email, m.role, m.created_at, \(totpEnabled) FROM accounts.members m JOIN accounts.accounts a ON a.id = m.account_id
            WHERE m.account_id = $1\(lock ? " FOR UPDATE OF m" : "")
            """, [id]).first.map(view)
    }

    static func list(_ c: PGConnection, _ req: Members.List) throws -> Page<MemberView> {
        let keyset = try Keyset(limit: req.limit, cursor: req.cursor)
        let rows = try c.query("""
            SELECT m.account_id AS id, a.email, m.role, m.created_at, \(totpEnabled), \(Keyset.micros("m.created_at")) AS created_us
            FROM accounts.members m JOIN accounts.accounts a ON a.id = m.account_id
            WHERE \(Keyset.condition(time: "m.created_at", id: "m.account_id", parameter: 1))
            ORDER BY m.created_at DESC, m.account_id DESC LIMIT $3
            """, [keyset.afterMicros, keyset.afterId, keyset.fetch]).rows
        return try keyset.page(rows, micros: "created_us", view)
    }

    /// Pending invitations, newest first.
    static func listInvites(_ c: PGConnection, _ req: Members.ListInvites) throws -> Page<MemberInviteView> {
        let keyset = try Keyset(limit: req.limit, cursor: req.cursor)
        let rows = try c.query("""
            SELECT id, email, role, created_at, expires_at, \(Keyset.micros("created_at")) AS created_us FROM accounts.member_invites
            WHERE \(pending) AND \(Keyset.condition(time: "created_at", id: "id", parameter: 1))
            ORDER BY created_at DESC, id DESC LIMIT $3
            """, [keyset.afterMicros, keyset.afterId, keyset.fetch]).rows
        return try keyset.page(rows, micros: "created_us", inviteView)
    }

    /// Revokes a pending invitation: the view it had, or 404 for one unknown, accepted, revoked
    /// or expired (nothing left to revoke).
    static func revokeInvite(_ tx: PGConnection, id: UUID) throws -> MemberInviteView {
        guard let row = try tx.query("""
            UPDATE accounts.member_invites SET revoked_at = now() WHERE id = $1 AND \(pending) RETURNING id, email, role, created_at, expires_at
            """, [id]).first else { throw ServiceError(.notFound, "no such pending invitation") }
        return try inviteView(row)
    }

    static func setRole(_ tx: PGConnection, id: UUID, role: Role) throws {
        try tx.query("UPDATE accounts.members SET role = $2 WHERE account_id = $1", [id, role.rawValue])
    }

    /// Ends a membership, and with it the member's second factor.
    static func remove(_ tx: PGConnection, id: UUID) throws {
        try tx.query("DELETE FROM accounts.members WHERE account_id = $1", [id])
        try tx.query("DELETE FROM accounts.member_recovery_codes WHERE account_id = $1", [id])
        try tx.query("DELETE FROM accounts.member_totp WHERE account_id = $1", [id])
    }

    static let notFound = ServiceError(.notFound, "no such member")

    /// The column saying whether a member (`m`) has TOTP on.
    static let totpEnabled = """
        EXISTS (SELECT 1 FROM accounts.member_totp t WHERE t.account_id = m.account_id AND t.enabled_at IS NOT NULL) AS totp_enabled
        """

    private static func hash(_ token: String) -> PGBytes { PGBytes(Data(Crypto.sha256(Array(token.utf8)))) }

    private static func role(_ row: PGRow) throws -> Role {
        guard let r = Role(rawValue: try row.decode("role")) else { throw ServiceError.internal }
        return r
    }

    private static func inviteView(_ row: PGRow) throws -> MemberInviteView {
        MemberInviteView(id: try row.decode("id"), email: try row.decode("email"), role: try role(row),
                         createdAt: try row.decode("created_at"), expiresAt: try row.decode("expires_at"))
    }

    private static func view(_ row: PGRow) throws -> MemberView {
        MemberView(id: try row.decode("id"), email: try row.decodeIfPresent("email") ?? "", role: try role(row), createdAt: try row.decode("created_at"),
                   totpEnabled: try row.decodeIfPresent("totp_enabled") ?? false)
    }
}
