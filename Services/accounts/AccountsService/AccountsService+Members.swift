import Bus
import Core
import Cryptography
import Database
import Foundation

/// The bus requests of members. Each is of one app (a member has a role in each app they are in;
/// docs/apps.md). Each change is recorded in `accounts.audit_log`, under its app, in its
/// transaction; a change of role or a removal, in any app, ends the member's sessions, so no
/// access token (nor the gateway's cache of a role in another app, kept per session) keeps a role
/// it no longer has.
extension AccountsService {
    func addMemberRoutes(to r: inout BusRouter) {
        r.on(Members.Invite.self) { [self] req, context in
            let email = try AccountRules.checkEmail(req.email)
            return try await pool.transaction { [config, keyring] tx in
                var made = try MemberStore.invite(tx, email: email, role: req.role, app: DefaultApp.of(req.app))
                try Self.audit(
                    tx, req.actor, .memberInvite, made.invite.id.uppercasedString, before: nil, after: made.invite,
                    context, req.mode, app: req.app)
                // With mail, the invitation goes out from the outbox, in this transaction: it is
                // mailed exactly when it exists. The answer still carries the URL, shown once.
                if let mail = config.mail, let dashboard = req.dashboardUrl {
                    let message = MailMessage.invitation(
                        url: dashboard + "#invite=" + made.token, role: req.role, to: email, from: mail.from)
                    try MailOutbox.enqueue(
                        tx, account: nil, kind: .memberInvite, recipient: email, message: message,
                        expiresAt: made.invite.expiresAt, keyring: keyring)
                    made.mailed = true
                } else {
                    made.mailed = false
                }
                return made
            }
        }
        r.on(Members.Accept.self) { [self] req, context in try await accept(req, context) }
        r.on(Members.List.self) { [self] req, _ in try await pool.withConnection { try MemberStore.list($0, req) } }
        r.on(Members.ListInvites.self) { [self] req, _ in try await pool.withConnection { try MemberStore.listInvites($0, req) } }
        r.on(Members.RevokeInvite.self) { [self] req, context in
            try await pool.transaction { tx in
                let before = try MemberStore.revokeInvite(tx, id: req.id, app: DefaultApp.of(req.app))
                try Self.audit(
                    tx, req.actor, .memberInviteRevoke, req.id.uppercasedString, before: before, after: nil, context,
                    req.mode, app: req.app)
                return Empty()
            }
        }
        r.on(Members.Update.self) { [self] req, context in
            let (view, revoked) = try await pool.transaction { [sessions] tx in
                let app = DefaultApp.of(req.app)
                guard let before = try MemberStore.get(tx, id: req.id, app: app, lock: true) else {
                    throw MemberStore.notFound
                }
                try MemberStore.setRole(tx, id: req.id, app: app, role: req.role)
                guard let after = try MemberStore.get(tx, id: req.id, app: app) else { throw ServiceError.internal }
                try Self.audit(
                    tx, req.actor, .memberUpdate, req.id.uppercasedString, before: before, after: after, context,
                    req.mode, app: app)
                let revoked = before.role == after.role ? [] : try sessions.revokeAll(tx, account: req.id, reason: "roleChanged")
                return (after, revoked)
            }
            for event in revoked { events.publish(event) }
            return view
        }
        r.on(Members.AppRole.self) { [self] req, _ in
            try await pool.withConnection { .init(role: try MemberStore.appRole($0, req)) }
        }
        addTOTPRoutes(to: &r)
        r.on(Members.Remove.self) { [self] req, context in
            let revoked = try await pool.transaction { [sessions] tx in
                let app = DefaultApp.of(req.app)
                guard try MemberStore.isMember(tx, id: req.id, lock: true),
                      let before = try MemberStore.get(tx, id: req.id, app: app, lock: true)
                else { throw MemberStore.notFound }
                try MemberStore.remove(tx, id: req.id, app: app)
                try Self.audit(
                    tx, req.actor, .memberRemove, req.id.uppercasedString, before: before, after: nil, context,
                    req.mode, app: app)
                return try sessions.revokeAll(tx, account: req.id, reason: "memberRemoved")
            }
            for event in revoked { events.publish(event) }
            return Empty()
        }
    }

    /// A new account for the invited email with `password`, or the existing one when `password`
    /// is its password (any other answer is `invalidCredentials`, as at sign-in); then a session
    /// that carries the role. The invited email must be proven: the invitation link, mailed to
    /// it, proves it for a new account; an existing one must have verified it (403
    /// `emailUnverified`), since whoever made it may not own the mailbox, and may have linked
    /// their own Apple ID to it (docs/security.md).
    func accept(_ req: Members.Accept, _ context: BusContext) async throws -> AuthResult {
        // The invitation is read first without spending it: a wrong password must not use it up.
        let hash = PGBytes(Data(Crypto.sha256(Array(req.token.utf8))))
        guard let pending = try await pool.query("""
            SELECT email FROM accounts.member_invites WHERE token_hash = $1 AND \(MemberStore.pending)
            """, [hash]).first else { throw ServiceError(.invalidToken, "the invitation is not valid, was used, or has expired") }
        let email: String = try pending.decode("email")
        let existing = try await pool.withConnection { try AccountStore.find($0, email: email) }
        var newHash: String?
        if let existing {
            let ok = try await hasher.verifyAsync(req.password, against: existing.passwordHash ?? decoyHash)
            guard ok, existing.passwordHash != nil else {
                throw ServiceError(.invalidCredentials, "an account with this email exists: give its password to join", field: "password")
            }
            guard existing.emailVerified else {
                throw ServiceError(.emailUnverified, "verify this account's email (or reset its password) before joining", field: "email")
            }
        } else {
            try AccountRules.checkPassword(req.password)
            newHash = try await hasher.hashAsync(req.password)
        }
        let passwordHash = newHash
        return try await pool.transaction { [sessions] tx in
            let invite = try MemberStore.spend(tx, token: req.token)
            let account = try existing?.id ?? AccountStore.create(tx, email: invite.email, emailVerified: true, passwordHash: passwordHash, recordName: nil)
            let member = try MemberStore.add(
                tx, account: account, role: invite.role, app: invite.app, invite: invite.id)
            try Self.audit(tx, AuditActor(type: .member, id: account), .memberJoin, account.uppercasedString, before: nil, after: member,
                           context, .live, app: invite.app)
            return AuthResult(account: try AccountStore.view(tx, account: account), session: try sessions.open(tx, account: account, password: true),
                              created: existing == nil)
        }
    }

    /// TOTP for members, and the setting that requires it of all of them.
    func addTOTPRoutes(to r: inout BusRouter) {
        r.on(Members.StartTOTP.self) { [self] req, _ in
            try await pool.transaction { [keyring] tx in
                let account = try AccountStore.view(tx, account: req.accountId)
                return try MemberTOTP.start(tx, account: req.accountId, email: account.email ?? req.accountId.uppercasedString, keyring: keyring)
            }
        }
        r.on(Members.ConfirmTOTP.self) { [self] req, context in
            let (codes, revoked) = try await pool.transaction { [sessions, keyring] tx in
                let codes = try MemberTOTP.confirm(tx, account: req.accountId, code: req.code, keyring: keyring, now: Date())
                try Self.audit(tx, AuditActor(type: .member, id: req.accountId), .memberTOTPEnable, req.accountId.uppercasedString,
                               before: nil, after: nil, context, .live)
                return (codes, try sessions.revokeAll(tx, account: req.accountId, reason: "secondFactorEnabled"))
            }
            for event in revoked { events.publish(event) }
            return .init(recoveryCodes: codes)
        }
        r.on(Members.DisableTOTP.self) { [self] req, context in
            try await pool.transaction { [keyring] tx in
                try MemberTOTP.disable(tx, account: req.accountId, code: req.code, keyring: keyring, now: Date())
                try Self.audit(tx, AuditActor(type: .member, id: req.accountId), .memberTOTPDisable, req.accountId.uppercasedString,
                               before: nil, after: nil, context, .live)
                return Empty()
            }
        }
        r.on(Members.GetSettings.self) { [self] _, _ in
            try await pool.withConnection { Members.Settings(requireTotp: try MemberTOTP.required($0)) }
        }
        r.on(Members.SetSettings.self) { [self] req, context in
            let (after, revoked) = try await pool.transaction { [sessions] tx in
                let before = Members.Settings(requireTotp: try MemberTOTP.required(tx))
                try tx.query("UPDATE accounts.member_settings SET require_totp = $1, updated_at = now()", [req.requireTotp])
                let after = Members.Settings(requireTotp: req.requireTotp)
                try Self.audit(tx, req.actor, .memberSettingsUpdate, "members", before: before, after: after, context, req.mode)
                // Sessions members opened without a second factor lose their role now, not at their next refresh.
                var revoked: [SessionRevoked] = []
                if req.requireTotp && !before.requireTotp {
                    for row in try tx.query("""
                        SELECT s.id FROM accounts.sessions s JOIN accounts.members m ON m.account_id = s.account_id
                        WHERE s.revoked_at IS NULL AND NOT s.second_factor
                        """).rows {
                        if let event = try sessions.revoke(tx, session: try row.decode("id"), reason: "secondFactorRequired") { revoked.append(event) }
                    }
                }
                return (after, revoked)
            }
            for event in revoked { events.publish(event) }
            return after
        }
    }
}

