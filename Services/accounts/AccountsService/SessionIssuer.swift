import Core
import Cryptography
import Database
import Foundation
import Synchronization

/// Sessions: access tokens signed with the service's RSA key (RS256), refresh tokens that are random,
/// stored only as SHA-256 hashes and rotated on every use (a retry within the grace window gets
/// the same pair again, `RefreshRetry`), and revocation.
final class SessionIssuer: Sendable {
    private let config: AccountsConfig
    /// The key new tokens are signed with, and every key tokens may still carry.
    private let keys = Mutex<(signing: SigningKeyStore.Stored, all: [SigningKeyStore.Stored])?>(nil)

    /// Seals and opens the private keys as they are stored.
    private let keyring: SecretKeyring

    init(config: AccountsConfig, keyring: SecretKeyring) {
        self.config = config
        self.keyring = keyring
    }

    /// Loads the signing keys, creating the RS256 key on first start. Several instances starting
    /// together agree on one key: the insert of its key id is a no-op for all but one of them.
    /// Keys stored plain (before keys were sealed) or under a previous secret key are sealed again
    /// under the current one first. Answers how many were.
    @discardableResult
    func loadSigningKey(_ pool: PGPool) async throws -> Int {
        let keyring = self.keyring
        let resealed = try await pool.withConnection { try SigningKeyStore.reseal($0, keyring: keyring) }
        var stored = try await pool.withConnection { try SigningKeyStore.all($0, keyring: keyring) }
        if !stored.contains(where: { $0.key.algorithm == .rs256 }) {
            guard let fresh = AsymmetricKey.generateRSA(bits: 2048)?.privateKeyDER else { throw ServiceError.internal }
            stored = try await pool.transaction { tx in
                try SigningKeyStore.insert(tx, kid: "r1", algorithm: "RS256", privateKey: fresh, keyring: keyring)
                return try SigningKeyStore.all(tx, keyring: keyring)
            }
        }
        guard let current = stored.first(where: { $0.key.algorithm == .rs256 }) else { throw ServiceError.internal }
        keys.withLock { $0 = (current, stored) }
        return resealed
    }

    func publicKeys() throws -> Accounts.SigningKeys.Response {
        guard let all = keys.withLock({ $0?.all }) else { throw ServiceError.unavailable }
        return .init(keys: try all.map { k in
            guard let der = k.key.publicKeyDER else { throw ServiceError.internal }
            return .init(kid: k.kid, alg: JWT.algorithmName(k.key.algorithm), publicKey: Base64URL.encode(der))
        })
    }

    /// A member's role in `app` (an SQL uuid; the default app's is the one access tokens carry)
    /// as a session has it: only a session opened with the second factor (`secondFactor`, an SQL
    /// boolean) has it when the member has TOTP turned on or every member must (docs/security.md,
    /// "Members").
    static func memberRole(account: String, secondFactor: String, app: String = "'\(DefaultApp.id)'::uuid") -> String {
        """
        (SELECT m.role FROM accounts.member_apps m WHERE m.account_id = \(account) AND m.app_id = \(app) AND (\(secondFactor)
            OR NOT (EXISTS (SELECT 1 FROM accounts.member_totp t WHERE t.account_id = m.account_id AND t.enabled_at IS NOT NULL)
                    OR (SELECT require_totp FROM accounts.member_settings))))
        """
    }

    /// Starts a session for an account inside the caller's transaction; `secondFactor` when the
    /// member gave a TOTP or recovery code. `password`: the account's password was given to open it
    /// (sign-up, sign-in, a reset, an invitation), which makes it a fresh sign-in for a while
    /// (`AccountStore.requireFreshSignIn`).
    func open(_ tx: PGConnection, account: UUID, secondFactor: Bool = false, password: Bool = false) throws -> SessionTokens {
        let session = UUID.random()
        let refresh = "rt_" + Crypto.randomToken(bytes: 32)
        let row = try tx.query("""
            INSERT INTO accounts.sessions (id, account_id, refresh_hash, expires_at, second_factor, password_at)
            VALUES ($1, $2, $3, now() + make_interval(secs => $4), $5, CASE WHEN $6 THEN now() END)
            RETURNING (SELECT app_user_id FROM accounts.accounts WHERE id = $2) AS app_user_id,
                      \(Self.memberRole(account: "$2", secondFactor: "$5::boolean")) AS role
            """, [session, account, Self.hash(refresh), config.refreshTokenTTL, secondFactor, password]).first!
        return try tokens(account: account, appUserId: try row.decode("app_user_id"), session: session, refresh: refresh,
                          role: try row.decodeIfPresent("role", as: String.self).flatMap(Role.init(rawValue:)))
    }

    /// `role`: a member's, which its access tokens carry (a change of role ends its sessions).
    private func tokens(account: UUID, appUserId: String, session: UUID, refresh: String, role: Role?) throws -> SessionTokens {
        guard let signing = keys.withLock({ $0?.signing }) else { throw ServiceError.unavailable }
        let now = Date()
        let expires = now.addingTimeInterval(config.accessTokenTTL)
        let access = try JWT.sign(AccessClaims(account: account, appUserId: appUserId, session: session, issuedAt: now, expiresAt: expires, role: role), key: signing.key, kid: signing.kid)
        return SessionTokens(accessToken: access, refreshToken: refresh, expiresAt: Date(timeIntervalSince1970: expires.timeIntervalSince1970.rounded(.down)))
    }

    enum RefreshOutcome: Sendable {
        case rotated(account: UUID, tokens: SessionTokens)
        /// A spent token presented again within the grace window, its successor still unused:
        /// the pair it was exchanged for, again (`RefreshRetry`).
        case retried(account: UUID, tokens: SessionTokens)
        /// A spent token was presented again: its session is now revoked.
        case replayed(SessionRevoked?)
        case invalid
    }

    private static func hash(_ token: String) -> PGBytes { PGBytes(Data(Crypto.sha256(Array(token.utf8)))) }

    /// Exchanges a refresh token for new tokens. The conditional update makes one exchange win
    /// even when the same token is presented twice at once; the loser finds it spent, and, within
    /// the grace window, is answered the winner's pair.
    func refresh(_ tx: PGConnection, token: String) throws -> RefreshOutcome {
        let old = Self.hash(token)
        let next = "rt_" + Crypto.randomToken(bytes: 32)
        let rotated = try tx.query("""
            UPDATE accounts.sessions SET refresh_hash = $2, refreshed_at = now()
            WHERE refresh_hash = $1 AND revoked_at IS NULL AND expires_at > now()
            RETURNING id, account_id, (SELECT app_user_id FROM accounts.accounts a WHERE a.id = account_id) AS app_user_id,
                      \(Self.memberRole(account: "sessions.account_id", secondFactor: "sessions.second_factor")) AS role
            """, [old, Self.hash(next)]).first
        if let rotated {
            let session = try rotated.decode("id", as: UUID.self)
            let account = try rotated.decode("account_id", as: UUID.self)
            let appUserId = try rotated.decode("app_user_id", as: String.self)
            let tokens = try tokens(account: account, appUserId: appUserId, session: session, refresh: next,
                                    role: try rotated.decodeIfPresent("role", as: String.self).flatMap(Role.init(rawValue:)))
            // The previous token's pair is stale now (its successor, this token, is spent): one
            // sealed pair per session at most.
            try tx.query("UPDATE accounts.spent_refresh_tokens SET retry_pair = NULL WHERE session_id = $1 AND retry_pair IS NOT NULL", [session])
            let sealed = config.refreshGrace > 0 ? PGBytes(Data(try RefreshRetry.seal(tokens, spentToken: token, session: session))) : nil
            try tx.query("INSERT INTO accounts.spent_refresh_tokens (hash, session_id, retry_pair) VALUES ($1, $2, $3)", [old, session, sealed])
            return .rotated(account: account, tokens: tokens)
        }
        guard let spent = try tx.query("SELECT session_id FROM accounts.spent_refresh_tokens WHERE hash = $1", [old]).first else {
            return .invalid
        }
        let session = try spent.decode("session_id", as: UUID.self)
        // The session's row lock orders this retry against an exchange of the successor token
        // (whose update takes the same lock): the reads below see that exchange either wholly or
        // not at all.
        guard let current = try tx.query("""
            SELECT account_id, refresh_hash, revoked_at IS NULL AND expires_at > now() AS live, now() AS now
            FROM accounts.sessions WHERE id = $1 FOR UPDATE
            """, [session]).first,
              let entry = try tx.query("SELECT spent_at, retry_pair FROM accounts.spent_refresh_tokens WHERE hash = $1", [old]).first else {
            return .invalid
        }
        let pair = try entry.decodeIfPresent("retry_pair", as: PGBytes.self).flatMap {
            RefreshRetry.open(Array($0.data), spentToken: token, session: session)
        }
        let live = try current.decode("live", as: Bool.self)
        let currentHash = try current.decode("refresh_hash", as: PGBytes.self)
        let successorIsLive = live && pair.map { Self.hash($0.refreshToken) } == currentHash
        switch RefreshRetry.decide(spentAt: try entry.decode("spent_at"), now: try current.decode("now"), window: config.refreshGrace, successorIsLive: successorIsLive) {
        case .answerAgain:
            guard let pair else { return .invalid }  // successorIsLive needs the pair
            return .retried(account: try current.decode("account_id"), tokens: pair)
        case .revoke:
            return .replayed(try revoke(tx, session: session, reason: "refreshTokenReplayed"))
        }
    }

    /// Revokes a session; answers the event to publish (nil when it was revoked already).
    func revoke(_ tx: PGConnection, session: UUID, reason: String) throws -> SessionRevoked? {
        let row = try tx.query("""
            UPDATE accounts.sessions SET revoked_at = now(), revoked_reason = $2
            WHERE id = $1 AND revoked_at IS NULL RETURNING revoked_at
            """, [session, reason]).first
        guard let row else { return nil }
        try tx.query("UPDATE accounts.spent_refresh_tokens SET retry_pair = NULL WHERE session_id = $1 AND retry_pair IS NOT NULL", [session])
        return SessionRevoked(sessionId: session, until: try row.decode("revoked_at", as: Date.self).addingTimeInterval(config.accessTokenTTL + 1))
    }

    /// Revokes every live session of an account (its role changed or ended); answers the events to publish.
    func revokeAll(_ tx: PGConnection, account: UUID, reason: String) throws -> [SessionRevoked] {
        let ids = try tx.query("SELECT id FROM accounts.sessions WHERE account_id = $1 AND revoked_at IS NULL", [account]).rows
        return try ids.compactMap { try revoke(tx, session: try $0.decode("id"), reason: reason) }
    }

    /// Revocations since `since` whose access tokens may still be unexpired.
    func revocations(_ pool: PGPool, since: Date) async throws -> Accounts.Revocations.Response {
        let ttl = config.accessTokenTTL
        return try await pool.withConnection { c in
            let asOf = try c.query("SELECT now() AS now").first!.decode("now", as: Date.self)
            let rows = try c.query("""
                SELECT id, revoked_at FROM accounts.sessions
                WHERE revoked_at IS NOT NULL AND revoked_at >= $1 AND revoked_at > now() - make_interval(secs => $2)
                """, [since, ttl + 1]).rows
            let revoked = try rows.map { SessionRevoked(sessionId: try $0.decode("id", as: UUID.self), until: try $0.decode("revoked_at", as: Date.self).addingTimeInterval(ttl + 1)) }
            return .init(revoked: revoked, asOf: asOf)
        }
    }
}
