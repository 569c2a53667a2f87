import Bus
import Core
import Cryptography
import Database
import Foundation

/// Email verification and password reset. Each mails a token (`EmailTokens`) through
/// the outbox (`MailOutbox`, sent by `MailSender`). Without SMTP settings neither is offered:
/// `mailNotConfigured`, the same for every account and address.
extension AccountsService {
    func addEmailRoutes(to r: inout BusRouter) {
        r.on(Accounts.SendEmailVerification.self) { [self] req, _ in
            try await sendVerification(account: req.accountId, client: req.clientAddress)
            return Empty()
        }
        r.on(Accounts.ConfirmEmail.self) { [self] req, _ in
            try await confirmEmail(token: req.token)
            return Empty()
        }
        r.on(Accounts.RequestPasswordReset.self) { [self] req, _ in
            try await requestPasswordReset(email: req.email, client: req.clientAddress)
            return Empty()
        }
        r.on(Accounts.ResetPassword.self) { [self] req, _ in try await resetPassword(req) }
    }

    private func mailSettings() throws -> MailConfig {
        guard let mail = config.mail else {
            throw ServiceError(.mailNotConfigured, "this server sends no mail: email verification and password reset are not offered")
        }
        return mail
    }

    static let invalidCode = ServiceError(.invalidToken, "the code is not valid, was used already, or has expired")

    /// Mails a verification code, within the mail limits of the account's email and of `client`.
    func sendVerification(account: UUID, client: String? = nil) async throws {
        let from = try mailSettings().from
        let keyring = self.keyring, limits = config.mailLimits
        try await pool.transaction { tx in
            guard let row = try tx.query("SELECT email, email_verified FROM accounts.accounts WHERE id = $1 AND deleted_at IS NULL FOR UPDATE",
                                         [account]).first else { throw ServiceError(.notFound, "no such account") }
            guard let email = try row.decodeIfPresent("email", as: String.self) else {
                throw ServiceError(.invalidState, "the account has no email address to verify")
            }
            guard try !row.decode("email_verified", as: Bool.self) else { throw ServiceError(.invalidState, "the email address is verified already") }
            try limits.take(tx, email: email, client: client)
            try EmailTokens.issue(tx, .verifyEmail, account: account, email: email, keyring: keyring, from: from)
        }
        mailSender?.nudge()
    }

    func confirmEmail(token: String) async throws {
        let confirmed = try await pool.transaction { tx -> Bool in
            guard let spent = try EmailTokens.spend(tx, .verifyEmail, token: token) else { return false }
            try tx.query("UPDATE accounts.accounts SET email_verified = true WHERE id = $1", [spent.account])
            return true
        }
        guard confirmed else { throw Self.invalidCode }
    }

    /// Writes a reset mail when a live account has this email; answers alike when none has.
    /// The mail limits are taken before the account is looked up, so an email with no account
    /// runs out alike (no enumeration).
    func requestPasswordReset(email given: String, client: String? = nil) async throws {
        let from = try mailSettings().from
        let email = try AccountRules.checkEmail(given)
        let keyring = self.keyring, limits = config.mailLimits
        let queued = try await pool.transaction { tx -> Bool in
            try limits.take(tx, email: email, client: client)
            guard let row = try tx.query("SELECT id, email FROM accounts.accounts WHERE lower(email) = lower($1) AND deleted_at IS NULL",
                                         [email]).first else { return false }
            try EmailTokens.issue(tx, .resetPassword, account: try row.decode("id"), email: try row.decode("email"), keyring: keyring, from: from)
            return true
        }
        if queued { mailSender?.nudge() }
    }

    /// Sets the password the reset mail's owner chose. The token proved the mailbox, so the email
    /// is verified too; every session of the account ends (whoever knew the old password is out),
    /// and a new one is answered. When the email was unproven until now, every other way in goes
    /// too (`AccountTakeBack`): whoever signed up with it may not have owned the mailbox.
    func resetPassword(_ req: Accounts.ResetPassword) async throws -> AuthResult {
        try AccountRules.checkPassword(req.password)  // before the token is spent
        // A code that can't work is refused before the password is hashed (argon2id's time and
        // memory are not spent on guesses); the spend below decides.
        guard try await pool.withConnection({ try EmailTokens.usable($0, .resetPassword, token: req.token) }) else { throw Self.invalidCode }
        let hash = try await hasher.hashAsync(req.password)
        let done = try await pool.transaction { [sessions] tx -> (AuthResult, [SessionRevoked], AccountTakeBack?)? in
            guard let spent = try EmailTokens.spend(tx, .resetPassword, token: req.token) else { return nil }
            let unproven = try tx.query("SELECT NOT email_verified AS unproven FROM accounts.accounts WHERE id = $1 FOR UPDATE", [spent.account])
                .first?.decode("unproven", as: Bool.self) ?? false
            let takeBack = unproven ? try AccountTakeBack.strip(tx, account: spent.account) : nil
            try tx.query("UPDATE accounts.accounts SET password_hash = $2, email_verified = true WHERE id = $1", [spent.account, hash])
            try EmailTokens.retire(tx, .resetPassword, account: spent.account)
            let revoked = try sessions.revokeAll(tx, account: spent.account, reason: "passwordReset")
            let result = AuthResult(account: try AccountStore.view(tx, account: spent.account),
                                    session: try sessions.open(tx, account: spent.account, password: true), created: false)
            return (result, revoked, takeBack)
        }
        guard let (result, revoked, takeBack) = done else { throw Self.invalidCode }
        revoked.forEach(events.publish)
        let account = result.account.id
        runtime.logger.info("password reset; every earlier session revoked", ["account.id": account.lowercasedString, "sessions.revoked": revoked.count])
        if let takeBack {
            takeBack.revokedKeys.forEach { events.publish(APIKeyRevoked(id: $0)) }
            if takeBack.appleRevocationsQueued > 0 { appleRevocations.ring() }
            if let change = takeBack.appUserIdChange { await moveHolder(account: account, from: change.from, to: change.to) }
            runtime.logger.warning("password reset proved an unproven email: the account was taken back", [
                "account.id": account.lowercasedString, "apple.identities.removed": takeBack.appleIdentities,
                "recordNames.removed": takeBack.recordNames, "apiKeys.revoked": takeBack.revokedKeys.count,
                "signInCodes.spent": takeBack.signInCodes, "appUserId.changed": takeBack.appUserIdChange != nil,
            ])
        }
        return result
    }
}
