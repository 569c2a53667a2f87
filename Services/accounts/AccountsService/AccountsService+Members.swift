import Bus
import Core
import Cryptography
import Database
import Foundation

/// The bus requests of members. Each change is recorded in `accounts.audit_log` in its
/// transaction; a change of role or a removal ends the member's sessions, so no access token keeps
/// a role it no longer has.
extension AccountsService {
    func addMemberRoutes(to r: inout BusRouter) {
        r.on(Members.Invite.self) { [self] req, context in
            let email = try AccountRules.checkEmail(req.email)
            return try await pool.transaction { tx in
                let made = try MemberStore.invite(tx, email: email, role: req.role)
                try Self.audit(tx, req.actor, .memberInvite, made.invite.id.uppercasedString, before: nil, after: made.invite, context, req.mode)
                return made
            }
        }
        r.on(Members.Accept.self) { [self] req, context in try await accept(req, context) }
        r.on(Members.List.self) { [self] req, _ in try await pool.withConnection { try MemberStore.list($0, req) } }
        r.on(Members.Update.self) { [self] req, context in
            let (view, revoked) = try await pool.transaction { [sessions] tx in
                guard let before = try MemberStore.get(tx, id: req.id, lock: true) else { throw MemberStore.notFound }
                try MemberStore.setRole(tx, id: req.id, role: req.role)
                guard let after = try MemberStore.get(tx, id: req.id) else { throw ServiceError.internal }
                try Self.audit(tx, req.actor, .memberUpdate, req.id.uppercasedString, before: before, after: after, context, req.mode)
                let revoked = before.role == after.role ? [] : try sessions.revokeAll(tx, account: req.id, reason: "roleChanged")
                return (after, revoked)
            }
            for event in revoked { events.publish(event) }
            return view
        }
        r.on(Members.Remove.self) { [self] req, context in
            let revoked = try await pool.transaction { [sessions] tx in
                guard let before = try MemberStore.get(tx, id: req.id, lock: true) else { throw MemberStore.notFound }
                try MemberStore.remove(tx, id: req.id)
                try Self.audit(tx, req.actor, .memberRemove, req.id.uppercasedString, before: before, after: nil, context, req.mode)
                return try sessions.revokeAll(tx, account: req.id, reason: "memberRemoved")
            }
            for event in revoked { events.publish(event) }
            return Empty()
        }
    }

    /// A new account for the invited email with `password`, or the existing one when `password`
    /// is its password (any other answer is `invalidCredentials`, as at sign-in); then a session
    /// that carries the role.
    func accept(_ req: Members.Accept, _ context: BusContext) async throws -> AuthResult {
        // The invitation is read first without spending it: a wrong password must not use it up.
        let hash = PGBytes(Data(Crypto.sha256(Array(req.token.utf8))))
        guard let pending = try await pool.query("""
            SELECT email FROM accounts.member_invites WHERE token_hash = $1 AND accepted_at IS NULL AND expires_at > now()
            """, [hash]).first else { throw ServiceError(.invalidToken, "the invitation is not valid, was used, or has expired") }
        let email: String = try pending.decode("email")
        let existing = try await pool.withConnection { try AccountStore.find($0, email: email) }
        var newHash: String?
        if let existing {
            let ok = try await hasher.verifyAsync(req.password, against: existing.passwordHash ?? decoyHash)
            guard ok, existing.passwordHash != nil else {
                throw ServiceError(.invalidCredentials, "an account with this email exists: give its password to join", field: "password")
            }
        } else {
            try AccountRules.checkPassword(req.password)
            newHash = try await hasher.hashAsync(req.password)
        }
        let passwordHash = newHash
        return try await pool.transaction { [sessions] tx in
            let invite = try MemberStore.spend(tx, token: req.token)
            let account = try existing?.id ?? AccountStore.create(tx, email: invite.email, emailVerified: false, passwordHash: passwordHash, recordName: nil)
            let member = try MemberStore.add(tx, account: account, role: invite.role, invite: invite.id)
            try Self.audit(tx, AuditActor(type: .member, id: account), .memberJoin, account.uppercasedString, before: nil, after: member,
                           context, .live)
            return AuthResult(account: try AccountStore.view(tx, account: account), session: try sessions.open(tx, account: account),
                              created: existing == nil)
        }
    }
}
