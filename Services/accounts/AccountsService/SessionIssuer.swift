import Foundation
import Shared
import Synchronization

/// Sessions: access tokens signed with the service's RSA key (RS256), refresh tokens that are random,
/// stored only as SHA-256 hashes and rotated on every use, and revocation.
final class SessionIssuer: Sendable {
    private let config: AccountsConfig
    /// The key new tokens are signed with, and every key tokens may still carry.
    private let keys = Mutex<(signing: AccessTokenKeys.Stored, all: [AccessTokenKeys.Stored])?>(nil)

    init(config: AccountsConfig) { self.config = config }

    /// Loads the signing keys, creating the RS256 key on first start. Several instances starting
    /// together agree on one key: the insert of its key id is a no-op for all but one of them.
    func loadSigningKey(_ pool: PGPool) async throws {
        var stored = try await pool.withConnection { try AccessTokenKeys.all($0) }
        if !stored.contains(where: { $0.key.algorithm == .rs256 }) {
            guard let fresh = AsymmetricKey.generateRSA(bits: 2048)?.privateKeyDER else { throw ServiceError.internal }
            stored = try await pool.transaction { tx in
                try tx.query("INSERT INTO accounts.signing_keys (kid, algorithm, private_key) VALUES ('r1', 'RS256', $1) ON CONFLICT (kid) DO NOTHING",
                             [PGBytes(Data(fresh))])
                return try AccessTokenKeys.all(tx)
            }
        }
        guard let current = stored.first(where: { $0.key.algorithm == .rs256 }) else { throw ServiceError.internal }
        keys.withLock { $0 = (current, stored) }
    }

    func publicKeys() throws -> Accounts.SigningKeys.Response {
        guard let all = keys.withLock({ $0?.all }) else { throw ServiceError.unavailable }
        return .init(keys: try all.map { k in
            guard let der = k.key.publicKeyDER else { throw ServiceError.internal }
            return .init(kid: k.kid, alg: JWT.algorithmName(k.key.algorithm), publicKey: Base64URL.encode(der))
        })
    }

    /// Starts a session for an account inside the caller's transaction.
    func open(_ tx: PGConnection, account: UUID) throws -> SessionTokens {
        let session = UUID.random()
        let refresh = "rt_" + Crypto.randomToken(bytes: 32)
        let row = try tx.query("""
            INSERT INTO accounts.sessions (id, account_id, refresh_hash, expires_at) VALUES ($1, $2, $3, now() + make_interval(secs => $4))
            RETURNING (SELECT app_user_id FROM accounts.accounts WHERE id = $2) AS app_user_id
            """, [session, account, PGBytes(Data(Crypto.sha256(Array(refresh.utf8)))), config.refreshTokenTTL]).first!
        return try tokens(account: account, appUserId: try row.decode("app_user_id"), session: session, refresh: refresh)
    }

    private func tokens(account: UUID, appUserId: String, session: UUID, refresh: String) throws -> SessionTokens {
        guard let signing = keys.withLock({ $0?.signing }) else { throw ServiceError.unavailable }
        let now = Date()
        let expires = now.addingTimeInterval(config.accessTokenTTL)
        let access = try JWT.sign(AccessClaims(account: account, appUserId: appUserId, session: session, issuedAt: now, expiresAt: expires), key: signing.key, kid: signing.kid)
        return SessionTokens(accessToken: access, refreshToken: refresh, expiresAt: Date(timeIntervalSince1970: expires.timeIntervalSince1970.rounded(.down)))
    }

    enum RefreshOutcome: Sendable {
        case rotated(account: UUID, tokens: SessionTokens)
        /// A spent token was presented again: its session is now revoked.
        case replayed(SessionRevoked?)
        case invalid
    }

    /// Exchanges a refresh token for new tokens. The conditional update makes one exchange win
    /// even when the same token is presented twice at once; the loser finds it spent.
    func refresh(_ tx: PGConnection, token: String) throws -> RefreshOutcome {
        let old = PGBytes(Data(Crypto.sha256(Array(token.utf8))))
        let next = "rt_" + Crypto.randomToken(bytes: 32)
        let rotated = try tx.query("""
            UPDATE accounts.sessions SET refresh_hash = $2, refreshed_at = now()
            WHERE refresh_hash = $1 AND revoked_at IS NULL AND expires_at > now()
            RETURNING id, account_id, (SELECT app_user_id FROM accounts.accounts a WHERE a.id = account_id) AS app_user_id
            """, [old, PGBytes(Data(Crypto.sha256(Array(next.utf8))))]).first
        if let rotated {
            let session = try rotated.decode("id", as: UUID.self)
            let account = try rotated.decode("account_id", as: UUID.self)
            try tx.query("INSERT INTO accounts.spent_refresh_tokens (hash, session_id) VALUES ($1, $2)", [old, session])
            let appUserId = try rotated.decode("app_user_id", as: String.self)
            return .rotated(account: account, tokens: try tokens(account: account, appUserId: appUserId, session: session, refresh: next))
        }
        guard let spent = try tx.query("SELECT session_id FROM accounts.spent_refresh_tokens WHERE hash = $1", [old]).first else {
            return .invalid
        }
        return .replayed(try revoke(tx, session: try spent.decode("session_id", as: UUID.self), reason: "refreshTokenReplayed"))
    }

    /// Revokes a session; answers the event to publish (nil when it was revoked already).
    func revoke(_ tx: PGConnection, session: UUID, reason: String) throws -> SessionRevoked? {
        let row = try tx.query("""
            UPDATE accounts.sessions SET revoked_at = now(), revoked_reason = $2
            WHERE id = $1 AND revoked_at IS NULL RETURNING revoked_at
            """, [session, reason]).first
        guard let row else { return nil }
        return SessionRevoked(sessionId: session, until: try row.decode("revoked_at", as: Date.self).addingTimeInterval(config.accessTokenTTL + 1))
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
