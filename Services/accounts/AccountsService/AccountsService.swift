import Backend
import Bus
import Core
import Cryptography
import Database
import Foundation
import Outbound
import Runtime
import Synchronization

/// Accounts, identities, sessions and API keys. Owns schema `accounts`.
public final class AccountsService: BackendService {
    public static let name = "accounts"
    /// Two malloc heaps: sign-ups hash with argon2id in parallel, and more heaps would each keep
    /// what a burst freed (`ServiceMain.boundMallocRetention`). Accounts is off the request path.
    public static let mallocArenas = 2
    public static let migrator = Migrator(
        schema: "accounts", migrations: AccountsMigrations.all, functions: AccountsFunctions.all)

    let runtime: ServiceRuntime
    let config: AccountsConfig
    let sessions: SessionIssuer
    let apple: AppleIdentity
    /// Sign in with Apple's REST flow (web and Android); nil unless `REDEEM_APPLE_SERVICES_ID` is set.
    let appleWeb: AppleAuthClient?
    /// CloudKit Web Services, which proves record names; nil unless `REDEEM_CLOUDKIT_CONTAINER` is set.
    let cloudKit: CloudKitClient?
    /// Seals stored secrets (signing keys, Apple's refresh tokens, waiting mail) under `REDEEM_SECRET_KEY`.
    let keyring: SecretKeyring
    /// Rung when a deletion queued Apple tokens to revoke.
    let appleRevocations = Doorbell()
    let events: EventPublisher
    /// Sends the mail outbox (its messages sealed with `keyring`); nil without SMTP settings.
    let mailSender: MailSender?
    /// The grants service: the store's view of an id, and moving a holder.
    let grants: BusClient
    let hasher: PasswordHasher
    /// Verified against when an email is unknown, so both failures take the same time.
    let decoyHash: String

    var pool: PGPool { runtime.pool }
    var idempotencyKeys: IdempotencyStore { IdempotencyStore(pool: pool, keyring: keyring) }

    public init(runtime: ServiceRuntime, env: Environment) throws {
        self.runtime = runtime
        config = try AccountsConfig(env: env)
        let keyring = try SecretKeyring(env: env)
        self.keyring = keyring
        sessions = SessionIssuer(config: config, keyring: keyring)
        mailSender = config.mail.map { MailSender(pool: runtime.pool, logger: runtime.logger, metrics: runtime.metrics, client: SMTPClient(config: $0), keyring: keyring) }
        apple = AppleIdentity(clientIds: config.appleClientIds, jwks: config.appleJWKS)
        appleWeb = try AppleWebSettings(env: env, clientIds: config.appleClientIds, jwks: config.appleJWKS).map { AppleAuthClient(settings: $0) }
        if case .cloudKit(let settings) = config.recordNames { cloudKit = CloudKitClient(settings: settings) } else { cloudKit = nil }
        events = try EventPublisher(bus: runtime.bus, bind: config.eventsBind)
        grants = try BusClient(bus: runtime.bus, service: "grants", connect: config.grantsBus, metrics: runtime.metrics)
        hasher = PasswordHasher(concurrency: config.passwordHashConcurrency)
        decoyHash = try hasher.hash(Crypto.randomToken())
    }

    public func start() async throws {
        switch config.recordNames {
        case .trustClient:
            runtime.logger.warning("REDEEM_CLOUDKIT_TRUST_CLIENT=1: record names are taken on the client's word; anyone can claim a subscriber's. Unsafe outside development")
        case .notConfigured:
            runtime.logger.info("CloudKit is not configured: record names are refused (cloudKitNotConfigured)")
        case .cloudKit(let settings):
            runtime.logger.info("record names are proven by CloudKit", ["cloudkit.container": settings.container, "cloudkit.environment": settings.environment])
        }
        let resealed = try await sessions.loadSigningKey(pool)
        if resealed > 0 { runtime.logger.info("signing keys sealed under the current secret key", ["keys.resealed": resealed]) }
        let tokens = try await pool.withConnection { [keyring] in try Self.resealAppleTokens($0, keyring: keyring) }
        if tokens > 0 { runtime.logger.info("Apple tokens sealed under the current secret key", ["tokens.resealed": tokens]) }
        if let key = config.adminKey {
            _ = try await pool.withConnection {
                try APIKeyStore.insert($0, secret: key, name: "bootstrap admin", role: .admin)
            }
            runtime.logger.info("bootstrap admin key present", ["apiKey.prefix": APIKeySecret.prefix(of: key)])
        }
        if let mail = config.mail { runtime.logger.info("mail is sent through SMTP", ["smtp.server": mail.redacted]) }
    }

    public func workers() -> [any Service] {
        [Worker("holder moves") { [self] in await relayMoves() },
         Worker("Apple revocations") { [self] in await revokeAtApple() },
         Worker("idempotency keys pruning") { [self] in await pruneIdempotencyKeys() }]
            + (mailSender.map { sender in [Worker("mail sender") { await sender.run() }] } ?? [])
    }

    /// Forgets Idempotency-Keys past their 24 hours, every 10 minutes.
    func pruneIdempotencyKeys() async {
        await Periodic(every: .seconds(600)).run { [self] in
            do {
                let gone = try await idempotencyKeys.prune()
                if gone > 0 { runtime.logger.debug("idempotency keys pruned", ["idempotencyKeys.pruned": gone]) }
            } catch {
                runtime.logger.warning("idempotency keys not pruned", ["error": String(describing: error)])
            }
        }
    }

    public func stop() async {
        events.stop()
        grants.stop()
    }

    public func router() -> BusRouter {
        var r = BusRouter(logger: runtime.logger)
        r.on(Accounts.SignUp.self) { [self] req, _ in try await signUp(req) }
        r.on(Accounts.SignIn.self) { [self] req, _ in try await signIn(req) }
        r.on(Accounts.SignInWithApple.self) { [self] req, _ in try await signInWithApple(req) }
        r.on(Accounts.Refresh.self) { [self] req, _ in try await refresh(req) }
        r.on(Accounts.SignOut.self) { [self] req, _ in
            if let event = try await pool.transaction({ [sessions] tx in try sessions.revoke(tx, session: req.sessionId, reason: "signOut") }) {
                events.publish(event)
            }
            return Empty()
        }
        r.on(Accounts.Delete.self) { [self] req, context in
            // Apple's tokens go to the revocation outbox in the deletion's transaction: Apple
            // being down never fails a deletion, and the revocation outlives a restart.
            let (revoked, owed) = try await pool.transaction { [sessions] tx in
                // A member who deletes their account leaves every app's members, in each app's audit log too.
                if try MemberStore.isMember(tx, id: req.accountId, lock: true) {
                    for (app, member) in try MemberStore.memberships(tx, id: req.accountId) {
                        try MemberStore.remove(tx, id: req.accountId, app: app)
                        try Self.audit(
                            tx, AuditActor(type: .member, id: req.accountId), .memberRemove,
                            req.accountId.uppercasedString, before: member, after: nil, context, .live, app: app)
                    }
                }
                let owed = try Self.queueAppleRevocations(tx, account: req.accountId)
                return (try AccountStore.delete(tx, account: req.accountId, sessions: sessions), owed)
            }
            revoked.forEach(events.publish)
            if owed > 0 { appleRevocations.ring() }
            runtime.logger.info("account deleted", ["account.id": req.accountId.lowercasedString, "sessions.revoked": revoked.count,
                                                    "apple.revocations": owed])
            return Empty()
        }
        r.on(Accounts.Me.self) { [self] req, _ in try await pool.withConnection { try AccountStore.view($0, account: req.accountId) } }
        r.on(Accounts.Customers.self) { [self] req, _ in
            try await pool.withConnection { try AccountStore.customers($0, req) }
        }
        r.on(Accounts.LinkCloudKit.self) { [self] req, _ in
            _ = try AccountRules.checkRecordName(req.recordName, field: "recordName")
            try await pool.withConnection { try AccountStore.requireFreshSignIn($0, account: req.accountId, session: req.sessionId) }
            let recordName = try await provenRecordName(req.recordName, webAuthToken: req.cloudkitWebAuthToken, field: "recordName")!
            return try await linkRecordName(account: req.accountId, recordName: recordName)
        }
        r.on(Accounts.SigningKeys.self) { [self] _, _ in try sessions.publicKeys() }
        r.on(Accounts.Revocations.self) { [self] req, _ in try await sessions.revocations(pool, since: req.since) }
        r.on(APIKeys.Create.self) { [self] req, context in
            let caller = Mode.of(req.callerMode)
            return try await pool.transaction { tx in
                let made = try APIKeyStore.create(tx, name: req.name, role: req.role, mode: req.mode,
                    app: DefaultApp.of(req.app), by: caller)
                try Self.audit(
                    tx, req.actor, .apiKeyCreate, made.apiKey.id.uppercasedString, before: nil,
                    after: made.apiKey, context, caller,
                               app: req.app)
                return made
            }
        }
        r.on(APIKeys.List.self) { [self] req, _ in try await APIKeyStore.list(pool, req) }
        r.on(APIKeys.Revoke.self) { [self] req, context in
            let caller = Mode.of(req.callerMode)
            try await pool.transaction { tx in
                let gone = try APIKeyStore.revoke(tx, id: req.id, app: DefaultApp.of(req.app), by: caller)
                try Self.audit(
                    tx, req.actor, .apiKeyRevoke, req.id.uppercasedString, before: gone, after: nil,
                    context, caller, app: req.app)
            }
            events.publish(APIKeyRevoked(id: req.id))
            return Empty()
        }
        r.on(Audit.ReadAccounts.self) { [self] req, _ in try await pool.withConnection { try AuditTable.read($0, schema: "accounts", req.query) } }
        addMemberRoutes(to: &r)
        addAppRoutes(to: &r)
        addAppleWebRoutes(to: &r)
        addEmailRoutes(to: &r)
        r.on(APIKeys.Authenticate.self) { [self] req, _ in try await APIKeyStore.authenticate(pool, keyHash: req.keyHash) }
        r.on(Idempotency.Begin.self) { [self] req, _ in try await idempotencyKeys.begin(req) }
        r.on(Idempotency.Finish.self) { [self] req, _ in
            try await idempotencyKeys.finish(req)
            return Empty()
        }
        r.on(Idempotency.Release.self) { [self] req, _ in
            try await idempotencyKeys.release(req)
            return Empty()
        }
        return r
    }

    // MARK: - Email and password

    func signUp(_ req: Accounts.SignUp) async throws -> AuthResult {
        let email = try AccountRules.checkEmail(req.email)
        try AccountRules.checkPassword(req.password)
        let recordName = try await provenRecordName(req.cloudkitRecordName, webAuthToken: req.cloudkitWebAuthToken, field: "cloudkitRecordName")
        let hash = try await hasher.hashAsync(req.password)
        return try await pool.transaction { [sessions] tx in
            let account = try AccountStore.create(tx, email: email, emailVerified: false, passwordHash: hash, recordName: recordName)
            return AuthResult(account: try AccountStore.view(tx, account: account), session: try sessions.open(tx, account: account, password: true),
                              created: true)
        }
    }

    func signIn(_ req: Accounts.SignIn) async throws -> AuthResult {
        let found = try await pool.withConnection { try AccountStore.find($0, email: req.email) }
        // An unknown email, an account without a password and a wrong password cost the same.
        let ok = try await hasher.verifyAsync(req.password, against: found?.passwordHash ?? decoyHash)
        guard ok, let account = found?.id, found?.passwordHash != nil else {
            throw ServiceError(.invalidCredentials, "the email or password is not right")
        }
        // A member with TOTP gives a code too; the session then carries the member's role.
        let secondFactor = try await pool.withConnection { try MemberTOTP.isOn($0, account: account) }
        let code = req.totpCode ?? ""
        if secondFactor, code.isEmpty {
            throw ServiceError(.totpRequired, "this account has two-step verification: send totpCode, from the authenticator app or a recovery code",
                               field: "totpCode")
        }
        return try await pool.transaction { [sessions, keyring] tx in
            if secondFactor, try !MemberTOTP.verify(tx, account: account, code: code, keyring: keyring, now: Date()) {
                throw ServiceError(.invalidCredentials, "the code is not right, or was used already", field: "totpCode")
            }
            return AuthResult(account: try AccountStore.view(tx, account: account),
                              session: try sessions.open(tx, account: account, secondFactor: secondFactor, password: true),
                              created: false)
        }
    }

    func refresh(_ req: Accounts.Refresh) async throws -> AuthResult {
        let outcome = try await pool.transaction { [sessions] tx -> (SessionIssuer.RefreshOutcome, AccountView?) in
            let outcome = try sessions.refresh(tx, token: req.refreshToken)
            switch outcome {
            case .rotated(let account, _), .retried(let account, _): return (outcome, try AccountStore.view(tx, account: account))
            case .replayed, .invalid: return (outcome, nil)
            }
        }
        switch outcome {
        case (.rotated(_, let tokens), let view?):
            return AuthResult(account: view, session: tokens, created: false)
        case (.retried(_, let tokens), let view?):
            runtime.logger.info("refresh retried within the grace window; the same tokens answered", ["account.id": view.id.lowercasedString])
            return AuthResult(account: view, session: tokens, created: false)
        case (.replayed(let event), _):
            if let event {
                events.publish(event)
                runtime.logger.warning("refresh token replayed; session revoked", ["session.id": event.sessionId.lowercasedString])
            }
            throw ServiceError(.invalidToken, "the refresh token was already used")
        default:
            throw ServiceError(.invalidToken, "the refresh token is not valid")
        }
    }

    // MARK: - Sign in with Apple

    func signInWithApple(_ req: Accounts.SignInWithApple) async throws -> AuthResult {
        let claims = try await apple.verify(req.identityToken)
        // The identity token given in this request is a fresh sign-in of its own.
        let recordName = try await provenRecordName(req.cloudkitRecordName, webAuthToken: req.cloudkitWebAuthToken, field: "cloudkitRecordName")
        let (account, created) = try await appleAccount(claims, recordName: recordName)
        // An iOS sign-in to an account made elsewhere links the device's record name, which the
        // account adopts as its appUserId when it may. A provider that cannot be
        // read leaves the id for a later link; the sign-in goes on.
        if let recordName, !created {
            do { _ = try await linkRecordName(account: account, recordName: recordName) } catch let e as ServiceError where e.code == .unavailable || e.code == .timeout {
                runtime.logger.info("record name linked without adopting it: the provider could not be read", ["account.id": account.lowercasedString])
            }
        }
        return try await pool.transaction { [sessions] tx in
            AuthResult(account: try AccountStore.view(tx, account: account), session: try sessions.open(tx, account: account), created: created)
        }
    }

    /// The account an Apple identity signs in to (made now when it is new), and whether it was
    /// made now. Two first sign-ins of one Apple user at once: the loser of the insert tries
    /// again and finds the account the winner made.
    func appleAccount(_ claims: AppleClaims, recordName: String?) async throws -> (UUID, Bool) {
        let email = claims.email.flatMap { try? AccountRules.checkEmail($0) }
        var found: (UUID, Bool)?
        for attempt in 0..<2 where found == nil {
            do {
                found = try await pool.transaction { tx in
                    try Self.appleAccount(tx, subject: claims.sub, email: email, emailVerified: claims.emailVerified, recordName: recordName)
                }
            } catch let e as PGError where e.isUniqueViolation && e.constraint == "apple_identities_pkey" && attempt == 0 {
                continue
            }
        }
        guard let found else { throw ServiceError.internal }
        return found
    }

    /// The account a Sign in with Apple opens, and whether it was made now. An email another
    /// account holds is joined only when that account's email was proven (`AccountRules.appleEmailMatch`).
    static func appleAccount(_ tx: PGConnection, subject: String, email: String?, emailVerified: Bool, recordName: String?) throws -> (UUID, Bool) {
        if let row = try tx.query("SELECT account_id FROM accounts.apple_identities WHERE subject = $1", [subject]).first {
            let account = try row.decode("account_id", as: UUID.self)
            if let recordName { _ = try linkForApple(tx, account: account, recordName: recordName) }
            return (account, false)
        }
        var accountEmail = email
        if let email, let existing = try AccountStore.find(tx, email: email) {
            switch AccountRules.appleEmailMatch(appleEmailVerified: emailVerified, accountEmailVerified: existing.emailVerified) {
            case .refuse:
                throw ServiceError(.emailInUse, "an account with this email exists; sign in to it first", field: "email")
            case .join:
                try AccountStore.addAppleIdentity(tx, subject: subject, account: existing.id, email: email)
                if let recordName { _ = try linkForApple(tx, account: existing.id, recordName: recordName) }
                return (existing.id, false)
            case .separateAccount:
                accountEmail = nil  // the existing account keeps the email; the Apple identity records it
            }
        }
        let account = try AccountStore.create(tx, email: accountEmail, emailVerified: accountEmail != nil && emailVerified, passwordHash: nil, recordName: recordName)
        try AccountStore.addAppleIdentity(tx, subject: subject, account: account, email: email)
        return (account, true)
    }

    private static func linkForApple(_ tx: PGConnection, account: UUID, recordName: String) throws -> String {
        do {
            return try AccountStore.linkRecordName(tx, account: account, recordName: recordName)
        } catch var e as ServiceError where e.code == .recordNameInUse {
            e.field = "cloudkitRecordName"
            throw e
        }
    }
}
