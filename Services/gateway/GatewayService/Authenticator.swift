import Bus
import Core
import Cryptography
import Foundation
import HTTP
import Runtime
import Synchronization
import Telemetry

/// Who made a request.
enum Principal: Sendable {
    /// `role`: a member's session (an operator account), which reaches the operator routes as a
    /// key of that role.
    case user(account: UUID, appUserId: String, session: UUID, role: Role?)
    case apiKey(id: UUID, role: Role, mode: Mode, app: UUID)
}

/// Authenticates requests at the gateway:
/// - access tokens are verified locally with the accounts service's public key (fetched once over
///   the bus), and refused while their session is revoked — learnt from `session.revoked` events
///   at once, and from a periodic catch-up in case an event was missed;
/// - API keys are resolved by their hash over the bus and cached briefly; a revocation event
///   drops them from the cache at once.
final class Authenticator: Sendable {
    private let accounts: BusClient
    private let logger: Logger
    private let keys = Mutex<[String: AsymmetricKey]>([:])
    private let revoked = Mutex<[UUID: Date]>([:])
    private let apiKeyCache = Mutex<[String: (APIKeys.Authenticate.Response, Date)]>([:])
    private let syncedUntil = Mutex<Date?>(nil)
    static let apiKeyCacheSeconds: TimeInterval = 30

    init(accounts: BusClient, logger: Logger) {
        self.accounts = accounts
        self.logger = logger
    }

    // MARK: - Events and background sync

    func sessionRevoked(_ event: SessionRevoked) {
        revoked.withLock { $0[event.sessionId] = event.until }
    }

    func apiKeyRevoked(_ id: UUID) {
        apiKeyCache.withLock { cache in cache = cache.filter { $0.value.0.id != id } }
    }

    /// Fetches signing keys and catches up on revocations every `interval` until cancelled.
    func runSync(interval: Duration = .seconds(2)) async {
        await Periodic(every: interval).run { await syncOnce() }
    }

    func syncOnce() async {
        if keys.withLock({ $0.isEmpty }) { await loadKeys() }
        do {
            // Overlap the previous window a little: clocks and commit order are not exact.
            let since = syncedUntil.withLock { $0 }.map { $0.addingTimeInterval(-5) } ?? Date(timeIntervalSince1970: 0)
            let answer = try await accounts.request(Accounts.Revocations(since: since), timeout: .seconds(2))
            for r in answer.revoked { sessionRevoked(r) }
            syncedUntil.withLock { $0 = answer.asOf }
            let now = Date()
            revoked.withLock { $0 = $0.filter { $0.value > now } }
        } catch {
            logger.debug("revocation sync failed", ["error": String(describing: error)])
        }
    }

    private func loadKeys() async {
        do {
            let answer = try await accounts.request(Accounts.SigningKeys(), timeout: .seconds(2))
            var loaded: [String: AsymmetricKey] = [:]
            for k in answer.keys {
                if let der = Base64URL.decode(k.publicKey), let key = AsymmetricKey.publicKey(der: der), JWT.algorithmName(key.algorithm) == k.alg {
                    loaded[k.kid] = key
                }
            }
            keys.withLock { $0.merge(loaded) { $1 } }
        } catch {
            logger.debug("signing keys not loaded yet", ["error": String(describing: error)])
        }
    }

    // MARK: - Requests

    static let notIdentified = ServiceError(.notIdentified, "sign in or send an API key")
    static let forbidden = ServiceError(.forbidden, "this credential may not do that")
    static let invalidToken = ServiceError(.invalidToken, "the token is invalid, expired or revoked")

    /// The principal of a request; nil when it carries no credential.
    func principal(_ request: HTTPRequest) async throws -> Principal? {
        guard let header = request.header("authorization") else { return nil }
        // Its length in bytes: counting the characters of a 600-byte token walks all of it.
        guard header.utf8.count > 7, header.prefix(7).lowercased() == "bearer " else { throw Self.invalidToken }
        let token = String(header.dropFirst(7).trimmingSpaces)
        if token.hasPrefix("sk_") { return try await apiKey(token) }
        return try await user(token)
    }

    /// Tokens verified already, until they expire: a client sends the same access token with
    /// many requests, and re-checking its signature each time is most of a request's CPU.
    /// Revocation is still checked on every request.
    /// Keyed by the token's SHA-256, bounded, in two generations (`VerifiedTokens`).
    private let verifiedTokens = Mutex(VerifiedTokens(limit: Authenticator.verifiedCacheLimit))
    static let verifiedCacheLimit = 50_000

    private func user(_ token: String) async throws -> Principal {
        let digest = VerifiedTokens.Digest(token: token)
        if let known = verifiedTokens.withLock({ $0.claims(of: digest, now: Date()) }) {
            if let until = revoked.withLock({ $0[known.session] }), until > Date() { throw Self.invalidToken }
            return .user(account: known.account, appUserId: known.appUserId, session: known.session, role: known.role)
        }
        if keys.withLock({ $0.isEmpty }) { await loadKeys() }
        var known = keys.withLock { $0 }
        var verified: AccessClaims?
        for attempt in 0..<2 {
            do {
                verified = try JWT.verify(token, as: AccessClaims.self, algorithms: [.rs256, .ed25519]) { kid in kid.flatMap { known[$0] } }.1
                break
            } catch JWT.Failure.unknownKey where attempt == 0 {
                await loadKeys()  // a key created since we last asked
                known = keys.withLock { $0 }
            } catch {
                throw Self.invalidToken
            }
        }
        guard let claims = verified, claims.typ == "access", let account = claims.accountId, let session = claims.sessionId,
              claims.expiresAt > Date() else { throw Self.invalidToken }
        if let until = revoked.withLock({ $0[session] }), until > Date() { throw Self.invalidToken }
        let kept = VerifiedTokens.Claims(
            account: account, session: session, appUserId: claims.app, expiresAt: claims.expiresAt, role: claims.role)
        // A generation it drops (25,000 tokens) is freed here, after the lock, not under it.
        _ = verifiedTokens.withLock { $0.insert(kept, for: digest) }
        return .user(account: account, appUserId: claims.app, session: session, role: claims.role)
    }

    private func apiKey(_ key: String) async throws -> Principal {
        let hash = Crypto.sha256(Array(key.utf8)).hex
        if let (cached, at) = apiKeyCache.withLock({ $0[hash] }), Date().timeIntervalSince(at) < Self.apiKeyCacheSeconds {
            return .apiKey(id: cached.id, role: cached.role, mode: cached.mode, app: DefaultApp.of(cached.app))
        }
        let answer = try await accounts.request(APIKeys.Authenticate(keyHash: hash))
        apiKeyCache.withLock { $0[hash] = (answer, Date()) }
        return .apiKey(id: answer.id, role: answer.role, mode: answer.mode, app: DefaultApp.of(answer.app))
    }

    /// A signed-in user, as a route's handler gets it (`Access.user`), and the app its request
    /// names (`Redeem-App`; the default app without it).
    typealias User = (account: UUID, appUserId: String, session: UUID, app: UUID)
    /// An operator, as a route's handler gets it (`Access.key`): an API key, the mode and app it
    /// works in, and who it is for the audit log.
    struct Key: Sendable {
        let id: UUID
        let role: Role
        let mode: Mode
        let app: UUID
        let actor: AuditActor
        /// May make and list apps: an admin of the whole deployment, i.e. a live admin key of the
        /// default app, or an admin member of the default app (who works in every app as admin).
        let deploymentAdmin: Bool
    }

    /// The mode a member works in: the `Redeem-Mode` header (`live`, the default, or `test`), the
    /// dashboard's switch. A member reaches both, as a live key manages keys of both modes.
    static func memberMode(_ request: HTTPRequest) throws -> Mode {
        guard let text = request.header("redeem-mode") else { return .live }
        guard let mode = Mode(rawValue: text.lowercased()) else { throw HTTPError.invalid("Redeem-Mode", "the Redeem-Mode header must be live or test") }
        return mode
    }

    /// The app a request names with `Redeem-App` (an app id), or nil without the header; 422 for
    /// a text that is not an id. Whether the app exists is checked by `requireRole`.
    static func requestedApp(_ request: HTTPRequest) throws -> UUID? {
        guard let text = request.header("redeem-app"), !text.trimmingSpaces.isEmpty else { return nil }
        guard let id = UUID(parsing: text.trimmingSpaces) else { throw HTTPError.invalid("Redeem-App",
            "the Redeem-App header must be an app id") }
        return id
    }

    static let otherApp = ServiceError(.forbidden, "this key belongs to another app than Redeem-App names")
    static let noSuchApp = ServiceError(.notFound, "no such app")
    static let defaultAppOnly = ServiceError(.forbidden, "this route serves the default app only")

    /// Apps known to exist: an app is never deleted, so one found stays found.
    private let knownApps = Mutex<Set<UUID>>([DefaultApp.id])

    /// Whether `app` exists, asking accounts once per app.
    private func checkExists(_ app: UUID) async throws {
        if knownApps.withLock({ $0.contains(app) }) { return }
        do {
            _ = try await accounts.request(Apps.Get(id: app))
        } catch let error as ServiceError where error.code == .notFound {
            throw Self.noSuchApp
        }
        knownApps.withLock { _ = $0.insert(app) }
    }

    /// Members' roles in apps other than the default one, by session and app, kept
    /// `memberRoleCacheSeconds`. A change of a member's role (or removal) in any app ends their
    /// sessions, and a revoked session is refused before this is read, so no stale role is used.
    private let memberRoles = Mutex<[MemberApp: (Role?, Date)]>([:])
    private struct MemberApp: Hashable { let session: UUID, app: UUID }
    static let memberRoleCacheSeconds: TimeInterval = 30
    static let memberRoleCacheLimit = 10_000

    /// A member's role in the app `request` names (`Redeem-App`; the default app without it), and
    /// that app: the access token carries the default app's role (`claimed`), with which an admin
    /// is the deployment's and admin in every app; another app's role is asked of accounts.
    func memberRole(
        _ request: HTTPRequest, account: UUID, session: UUID, claimed: Role?
    ) async throws -> (role: Role?, app: UUID) {
        let app = try Self.requestedApp(request) ?? DefaultApp.id
        if app == DefaultApp.id { return (claimed, app) }
        try await checkExists(app)
        if claimed == .admin { return (.admin, app) }
        return (try await memberRole(account: account, session: session, app: app), app)
    }

    /// A member's role in `app` as `session` has it (nil: none), asked of accounts.
    private func memberRole(account: UUID, session: UUID, app: UUID) async throws -> Role? {
        let slot = MemberApp(session: session, app: app)
        if let (role, at) = memberRoles.withLock({ $0[slot] }),
            Date().timeIntervalSince(at) < Self.memberRoleCacheSeconds
        {
            return role
        }
        let role = try await accounts.request(Members.AppRole(account: account, session: session, app: app)).role
        memberRoles.withLock { cache in
            if cache.count >= Self.memberRoleCacheLimit {
                let now = Date()
                cache = cache.filter { now.timeIntervalSince($0.value.1) < Self.memberRoleCacheSeconds }
                if cache.count >= Self.memberRoleCacheLimit { cache.removeAll() }
            }
            cache[slot] = (role, Date())
        }
        return role
    }

    /// Whose apps `GET /v1/apps` lists: every app for a deployment admin (nil), or a member's
    /// (their account and session): the apps they have a role in. 401 without a credential, 403
    /// for a key that is no deployment admin.
    func requireAppsReader(_ request: HTTPRequest) async throws -> (account: UUID, session: UUID)? {
        switch try await principal(request) {
        case .user(_, _, _, .admin?)?: return nil
        case .user(let account, _, let session, _)?: return (account, session)
        case .apiKey(_, .admin, .live, DefaultApp.id)?: return nil
        case .apiKey?: throw Self.forbidden
        case nil: throw Self.notIdentified
        }
    }

    /// The app an end user's request names with `Redeem-App`, the default app without it: an
    /// account is shared by every app, so the header, not the account, says whose coupons and
    /// entitlements it reaches. 422 for a text that is not an id, 404 for an id of no app.
    func endUserApp(_ request: HTTPRequest) async throws -> UUID {
        guard let named = try Self.requestedApp(request) else { return DefaultApp.id }
        try await checkExists(named)
        return named
    }

    /// The signed-in user, or 401 `notIdentified` / 403 `forbidden` for an operator key.
    func requireUser(_ request: HTTPRequest) async throws -> User {
        switch try await principal(request) {
        case .user(let account, let appUserId, let session, _)?:
            return (account, appUserId, session, try await endUserApp(request))
        case .apiKey?: throw Self.forbidden
        case nil: throw Self.notIdentified
        }
    }

    /// An API key with at least `role`, or 401 / 403, in the app it works in: a key's own (a
    /// `Redeem-App` naming another is 403), or for a member the app `Redeem-App` names (the default
    /// one without it), with the member's role there (`memberRole`; 403 with none). A deployment
    /// admin, key or member, works in any app it names, as admin.
    /// `anyApp` false (a route not yet scoped by app): the default app only, 403 for any other.
    @discardableResult
    func requireRole(_ request: HTTPRequest, _ role: Role, anyApp: Bool = false) async throws -> Key {
        // Who asks comes first: without a credential the answer is 401, whatever the header says.
        // Then a key's role (403 below the route's), and only then the header it sends.
        let key: Key
        switch try await principal(request) {
        case .apiKey(let id, let r, let mode, let own)? where r >= role:
            let deploymentAdmin = r == .admin && mode == .live && own == DefaultApp.id
            var app = own
            if let named = try Self.requestedApp(request), named != own {
                // A deployment admin works in any app, as an admin member does: how an app gets its first key.
                guard deploymentAdmin else { throw Self.otherApp }
                try await checkExists(named)
                app = named
            }
            key = Key(
                id: id, role: r, mode: mode, app: app, actor: AuditActor(type: .apiKey, id: id),
                deploymentAdmin: deploymentAdmin)
        case .user(let account, _, let session, let claimed)?:
            // A member's role is per app: the header comes first, to know which app's.
            let (r, app) = try await memberRole(request, account: account, session: session, claimed: claimed)
            guard let r, r >= role else { throw Self.forbidden }
            key = Key(
                id: account, role: r, mode: try Self.memberMode(request), app: app,
                actor: AuditActor(type: .member, id: account), deploymentAdmin: claimed == .admin)
        case .apiKey?: throw Self.forbidden
        case nil: throw Self.notIdentified
        }
        if !anyApp && key.app != DefaultApp.id { throw Self.defaultAppOnly }
        return key
    }
}
