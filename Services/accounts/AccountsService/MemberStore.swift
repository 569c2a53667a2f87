import Core
import Cryptography
import Database
import Foundation

/// Members: accounts with an operator role in one app or several (`member_apps`; docs/apps.md).
/// An admin of an app invites an email with a role there; the invitation's token (random, stored as its SHA-256 only, valid for `inviteTTL`, used once, and
/// revocable until then) makes the account (or joins the existing account of that email, given
/// its password) a member.
enum MemberStore {
    /// 72 hours, as Stripe's team invitations: long enough for a weekend, short enough that a
    /// forgotten link stops working soon.
    static let inviteTTL: TimeInterval = 72 * 3_600

    /// The condition of an invitation that still makes a member.
    static let pending = "accepted_at IS NULL AND revoked_at IS NULL AND expires_at > now()"

    static func invite(_ tx: PGConnection, email: String, role: Role, app: UUID) throws -> Members.Invite.Response {
        let token = "inv_" + Crypto.randomToken(bytes: 32)
        let row = try tx.query("""
            INSERT INTO accounts.member_invites (id, token_hash, email, role, expires_at, app_id)
            VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5), $6)
            RETURNING id, email, role, created_at, expires_at
            """, [UUID.random(), hash(token), email, role.rawValue, inviteTTL, app]).first!
        return .init(invite: try inviteView(row), token: token)
    }

    /// Spends an invitation: its email, role and app, or `invalidToken` for one unknown, spent or
    /// expired.
    static func spend(_ tx: PGConnection, token: String) throws -> (id: UUID, email: String, role: Role, app: UUID) {
        guard let row = try tx.query("""
            UPDATE accounts.member_invites SET accepted_at = now()
            WHERE token_hash = $1 AND \(pending) RETURNING id, email, role, app_id
            """, [hash(token)]).first else { throw ServiceError(.invalidToken, "the invitation is not valid, was used, or has expired") }
        return (try row.decode("id"), try row.decode("email"), try role(row), try row.decode("app_id"))
    }

    /// Gives `account` `role` in `app`, making it a member first if it is none (a member already
    /// in `app` keeps the higher of the two roles there; its roles in other apps stay).
    static func add(_ tx: PGConnection, account: UUID, role: Role, app: UUID, invite: UUID) throws -> MemberView {
        try tx.query(
            "INSERT INTO accounts.members (account_id) VALUES ($1) ON CONFLICT (account_id) DO NOTHING", [account])
        let kept = max(try get(tx, id: account, app: app)?.role ?? role, role)
        try tx.query("""
            INSERT INTO accounts.member_apps (account_id, app_id, role) VALUES ($1, $2, $3)
            ON CONFLICT (account_id, app_id) DO UPDATE SET role = EXCLUDED.role
            """, [account, app, kept.rawValue])
        try tx.query("UPDATE accounts.member_invites SET account_id = $2 WHERE id = $1", [invite, account])
        guard let view = try get(tx, id: account, app: app) else { throw ServiceError.internal }
        return view
    }

    /// The member `id` as a member of `app` (nil when they have no role there).
    static func get(_ c: PGConnection, id: UUID, app: UUID, lock: Bool = false) throws -> MemberView? {
        try c.query("""
            SELECT m.account_id AS id, a.email, m.role, m.created_at, \(totpEnabled) FROM accounts.member_apps m JOIN accounts.accounts a ON a.id = m.account_id
            WHERE m.account_id = $1 AND m.app_id = $2\(lock ? " FOR UPDATE OF m" : "")
            """, [id, app]).first.map(view)
    }

    /// Whether `id` is a member of any app (locking its `members` row with `lock`).
    static func isMember(_ c: PGConnection, id: UUID, lock: Bool = false) throws -> Bool {
        try !c.query("SELECT 1 FROM accounts.members WHERE account_id = $1\(lock ? " FOR UPDATE" : "")", [id]).rows.isEmpty
    }

    /// Every app `id` is a member of, with its view there.
    static func memberships(_ c: PGConnection, id: UUID) throws -> [(app: UUID, member: MemberView)] {
        try c.query("SELECT app_id FROM accounts.member_apps WHERE account_id = $1 ORDER BY created_at", [id]).rows.compactMap { row in
            let app: UUID = try row.decode("app_id")
            return try get(c, id: id, app: app).map { (app, $0) }
        }
    }

    /// The members of one app, with their role there, newest (to the app) first.
    static func list(_ c: PGConnection, _ req: Members.List) throws -> Page<MemberView> {
        let keyset = try Keyset(limit: req.limit, cursor: req.cursor)
        let rows = try c.query("""
            SELECT m.account_id AS id, a.email, m.role, m.created_at, \(totpEnabled), \(Keyset.micros("m.created_at")) AS created_us
            FROM accounts.member_apps m JOIN accounts.accounts a ON a.id = m.account_id
            WHERE m.app_id = $4 AND \(Keyset.condition(time: "m.created_at", id: "m.account_id", parameter: 1))
            ORDER BY m.created_at DESC, m.account_id DESC LIMIT $3
            """, [keyset.afterMicros, keyset.afterId, keyset.fetch, DefaultApp.of(req.app)]).rows
        return try keyset.page(rows, micros: "created_us", view)
    }

    /// One app's pending invitations, newest first.
    static func listInvites(_ c: PGConnection, _ req: Members.ListInvites) throws -> Page<MemberInviteView> {
        let keyset = try Keyset(limit: req.limit, cursor: req.cursor)
        let rows = try c.query("""
            SELECT id, email, role, created_at, expires_at, \(Keyset.micros("created_at")) AS created_us FROM accounts.member_invites
            WHERE app_id = $4 AND \(pending) AND \(Keyset.condition(time: "created_at", id: "id", parameter: 1))
            ORDER BY created_at DESC, id DESC LIMIT $3
            """, [keyset.afterMicros, keyset.afterId, keyset.fetch, DefaultApp.of(req.app)]).rows
        return try keyset.page(rows, micros: "created_us", inviteView)
    }

    /// Revokes a pending invitation of `app`: the view it had, or 404 for one unknown, of another
    /// app, accepted, revoked or expired (nothing left to revoke).
    static func revokeInvite(_ tx: PGConnection, id: UUID, app: UUID) throws -> MemberInviteView {
        guard let row = try tx.query("""
            UPDATE accounts.member_invites SET revoked_at = now() WHERE id = $1 AND app_id = $2 AND \(pending)
            RETURNING id, email, role, created_at, expires_at
            """, [id, app]).first else { throw ServiceError(.notFound, "no such pending invitation") }
        return try inviteView(row)
    }

    static func setRole(_ tx: PGConnection, id: UUID, app: UUID, role: Role) throws {
        try tx.query(
            "UPDATE accounts.member_apps SET role = $3 WHERE account_id = $1 AND app_id = $2", [id, app, role.rawValue])
    }

    /// Ends a member's role in `app`. Out of their last app, the account is no member, and its
    /// second factor ends too.
    static func remove(_ tx: PGConnection, id: UUID, app: UUID) throws {
        try tx.query("DELETE FROM accounts.member_apps WHERE account_id = $1 AND app_id = $2", [id, app])
        let left = try tx.query("SELECT 1 FROM accounts.member_apps WHERE account_id = $1", [id])
        guard left.rows.isEmpty else { return }
        try tx.query("DELETE FROM accounts.members WHERE account_id = $1", [id])
        try tx.query("DELETE FROM accounts.member_recovery_codes WHERE account_id = $1", [id])
        try tx.query("DELETE FROM accounts.member_totp WHERE account_id = $1", [id])
    }

    /// The role `session` (of `account`) has in `app`: nil for none, or when the second factor
    /// it lacks is required (`SessionIssuer.memberRole`).
    static func appRole(_ c: PGConnection, _ req: Members.AppRole) throws -> Role? {
        let row = try c.query("""
            SELECT \(SessionIssuer.memberRole(account: "s.account_id", secondFactor: "s.second_factor", app: "$3::uuid")) AS role
            FROM accounts.sessions s WHERE s.id = $1 AND s.account_id = $2 AND s.revoked_at IS NULL
            """, [req.session, req.account, req.app]).first
        return try row?.decodeIfPresent("role", as: String.self).flatMap(Role.init(rawValue:))
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
