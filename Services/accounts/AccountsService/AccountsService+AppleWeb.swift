import Bus
import Core
import Cryptography
import Database
import Foundation
import Runtime

/// Sign in with Apple on the web and Android: the REST flow's start and callback,
/// the one-time sign-in codes that hand its session over, linking Apple to a signed-in account,
/// and the revocation of Apple's token that deleting an account owes Apple.
extension AccountsService {
    /// Seconds a sign-in code may wait for its exchange.
    static let signInCodeLifetime: Double = 120

    func addAppleWebRoutes(to r: inout BusRouter) {
        r.on(Accounts.AppleWebStart.self) { [self] req, _ in try appleWebStart(req) }
        r.on(Accounts.AppleWebCallback.self) { [self] req, _ in try await appleWebCallback(req) }
        r.on(Accounts.ExchangeSignInCode.self) { [self] req, _ in try await exchangeSignInCode(req) }
        r.on(Accounts.LinkApple.self) { [self] req, _ in try await linkApple(req) }
    }

    private func webFlow() throws -> AppleAuthClient {
        guard let appleWeb else { throw ServiceError(.notFound, "Sign in with Apple on the web is not configured on this server") }
        return appleWeb
    }

    func appleWebStart(_ req: Accounts.AppleWebStart) throws -> Accounts.AppleWebStart.Response {
        let flow = try webFlow()
        let back = try flow.settings.returns.check(req.returnURL)
        if let method = req.codeChallengeMethod, method != "S256" {
            throw ServiceError(.invalid, "code_challenge_method must be S256", field: "code_challenge_method")
        }
        if req.codeChallengeMethod != nil, req.codeChallenge == nil {
            throw ServiceError(.invalid, "code_challenge_method comes with a code_challenge", field: "code_challenge")
        }
        if let challenge = req.codeChallenge, !AppleSignInBinding.isChallenge(challenge) {
            throw ServiceError(.invalid, "code_challenge must be the base64url SHA-256 of a verifier (43 characters)", field: "code_challenge")
        }
        let binding = AppleSignInBinding(returnURL: back, challenge: req.codeChallenge, now: Date())
        return .init(authorizeURL: flow.settings.authorize(binding), cookie: binding.cookie, cookieMaxAge: AppleSignInBinding.lifetime)
    }

    /// Checks the state against the browser's cookie, exchanges the code, verifies the id_token
    /// (signature, issuer, the Services ID as audience, expiry, this sign-in's nonce), signs in or
    /// makes the account, keeps Apple's refresh token sealed, and answers the return URL with a
    /// one-time sign-in code: no token travels in a URL.
    func appleWebCallback(_ req: Accounts.AppleWebCallback) async throws -> Accounts.AppleWebCallback.Response {
        let flow = try webFlow()
        guard let cookie = req.cookie, let binding = AppleSignInBinding(cookie: cookie, now: Date()) else {
            throw ServiceError(.stateMismatch, "this sign-in was not started in this browser, or took too long; start again", field: "state")
        }
        guard let state = req.state, binding.matches(state: state) else {
            throw ServiceError(.stateMismatch, "the state does not match this browser's sign-in; start again", field: "state")
        }
        let back = try flow.settings.returns.check(binding.returnURL)
        if let error = req.error {
            // Apple's reason (`user_cancelled_authorize`) goes back to the page or app as it is.
            let reason = String(error.unicodeScalars.filter { CharacterSet.alphanumerics.contains($0) || $0 == "_" }.prefix(64).map(Character.init))
            return .init(location: ReturnURLRule.appending(back, "error", reason.isEmpty ? "unknown" : reason))
        }
        guard let code = req.code, !code.isEmpty, code.utf8.count <= 2048 else {
            throw ServiceError(.invalid, "Apple posted no authorization code", field: "code")
        }
        let tokens = try await flow.exchange(code: code)
        let claims = try await apple.verify(tokens.id_token, nonce: binding.nonce)
        guard claims.aud.contains(flow.settings.servicesId) else {
            throw ServiceError(.invalidIdentityToken, "the identity token is for another app")
        }
        let (account, created) = try await appleAccount(claims, recordName: nil)
        let signInCode = Crypto.randomToken(bytes: 32)
        let servicesId = flow.settings.servicesId
        try await pool.transaction { [keyring] tx in
            if let refresh = tokens.refresh_token {
                let sealed = keyring.seal(Array(refresh.utf8), context: Self.appleTokenContext(claims.sub))
                try tx.query("UPDATE accounts.apple_identities SET client_id = $2, refresh_token = $3, refresh_key_id = $4 WHERE subject = $1",
                             [claims.sub, servicesId, PGBytes(Data(sealed.sealed)), sealed.keyId])
            }
            try tx.query("""
                INSERT INTO accounts.sign_in_codes (code_hash, account_id, expires_at, challenge) VALUES ($1, $2, now() + make_interval(secs => $3), $4)
                """, [Self.signInCodeHash(signInCode), account, Self.signInCodeLifetime, PGBytes(Data(binding.exchangeChallenge))])
        }
        runtime.logger.info("signed in with Apple on the web", ["account.id": account.lowercasedString, "account.created": created])
        return .init(location: ReturnURLRule.appending(back, "code", signInCode), keepCookieFor: Int(Self.signInCodeLifetime))
    }

    /// Seals again under the current secret key the Apple tokens sealed under another one (a
    /// rotation, docs/security.md), in the identities and in the revocation outbox; the rows are
    /// locked, so instances starting together each reseal a row at most once. Answers how many.
    static func resealAppleTokens(_ c: PGConnection, keyring: SecretKeyring) throws -> Int {
        try c.transaction { tx in
            var count = 0
            for (table, key, token, keyColumn) in [("apple_identities", "subject", "refresh_token", "refresh_key_id"),
                                                   ("apple_revocations", "id", "token", "secret_key_id")] {
                let rows = try tx.query("""
                    SELECT \(key)::text AS row_key, subject, \(token) AS token, \(keyColumn) AS key_id FROM accounts.\(table)
                    WHERE \(token) IS NOT NULL AND \(keyColumn) IS DISTINCT FROM $1 FOR UPDATE
                    """, [keyring.current.id]).rows
                for row in rows {
                    let subject: String = try row.decode("subject")
                    let plain = try keyring.open(Array(try row.decode("token", as: PGBytes.self).data), keyId: try row.decodeIfPresent("key_id", as: String.self),
                                                 context: appleTokenContext(subject))
                    let sealed = keyring.seal(plain, context: appleTokenContext(subject))
                    try tx.query("UPDATE accounts.\(table) SET \(token) = $2, \(keyColumn) = $3 WHERE \(key)::text = $1",
                                 [try row.decode("row_key", as: String.self), PGBytes(Data(sealed.sealed)), sealed.keyId])
                }
                count += rows.count
            }
            return count
        }
    }

    /// What a sealed Apple token is bound to: its Apple user.
    static func appleTokenContext(_ subject: String) -> String { "accounts.apple_identities/\(subject)" }

    static func signInCodeHash(_ code: String) -> PGBytes { PGBytes(Data(Crypto.sha256(Array(code.utf8)))) }

    /// A sign-in code for a session, once, and only for whoever started its flow: the verifier
    /// (the app's, or the one the browser's cookie derives) must be the one the code was stored
    /// with, else 400 `stateMismatch`, and the code stays unused (someone holding a code alone
    /// can't spend it). The conditional update lets one of two exchanges at once win; the
    /// other, and any later one, is refused `signInCodeUsed`.
    func exchangeSignInCode(_ req: Accounts.ExchangeSignInCode) async throws -> AuthResult {
        let hash = Self.signInCodeHash(req.code)
        if let verifier = req.codeVerifier, !AppleSignInBinding.isVerifier(verifier) {
            throw ServiceError(.invalid, "codeVerifier must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~", field: "codeVerifier")
        }
        let verifier = req.codeVerifier
            ?? req.cookie.flatMap { AppleSignInBinding(cookie: $0, now: Date(), grace: Int(Self.signInCodeLifetime)) }?.verifier
        return try await pool.transaction { [sessions] tx in
            if let row = try tx.query("SELECT challenge FROM accounts.sign_in_codes WHERE code_hash = $1", [hash]).first {
                let challenge = try row.decodeIfPresent("challenge", as: PGBytes.self).map { Array($0.data) }
                guard let challenge, let verifier, AppleSignInBinding.verifies(verifier, challenge: challenge) else {
                    throw ServiceError(.stateMismatch, "this sign-in code belongs to a sign-in started elsewhere: exchange it where it began "
                                       + "(the browser's cookie, or the app's codeVerifier)", field: "code")
                }
            }
            if let row = try tx.query("""
                UPDATE accounts.sign_in_codes SET used_at = now()
                WHERE code_hash = $1 AND used_at IS NULL AND expires_at > now() RETURNING account_id
                """, [hash]).first {
                let account = try row.decode("account_id", as: UUID.self)
                return AuthResult(account: try AccountStore.view(tx, account: account), session: try sessions.open(tx, account: account), created: false)
            }
            guard let row = try tx.query("SELECT used_at IS NOT NULL AS used FROM accounts.sign_in_codes WHERE code_hash = $1", [hash]).first else {
                throw ServiceError(.invalidSignInCode, "this sign-in code is not one this server gave out", field: "code")
            }
            if try row.decode("used", as: Bool.self) {
                throw ServiceError(.signInCodeUsed, "this sign-in code was already used; sign in again", field: "code")
            }
            throw ServiceError(.signInCodeExpired, "this sign-in code has expired; sign in again", field: "code")
        }
    }

    /// Links the Apple user of a native identity token to the account (idempotent); 409
    /// `appleIdInUse` when that Apple user signs in to another account; 403
    /// `reauthenticationRequired` when the account's email is unproven and the password not fresh.
    func linkApple(_ req: Accounts.LinkApple) async throws -> AccountView {
        try await pool.withConnection { try AccountStore.requireFreshSignIn($0, account: req.accountId, session: req.sessionId) }
        let claims = try await apple.verify(req.identityToken)
        let email = claims.email.flatMap { try? AccountRules.checkEmail($0) }
        let inUse = ServiceError(.appleIdInUse, "this Apple ID signs in to another account", field: "identityToken")
        do {
            return try await pool.transaction { tx in
                _ = try AccountStore.view(tx, account: req.accountId)  // a deleted account is 404
                if let row = try tx.query("SELECT account_id FROM accounts.apple_identities WHERE subject = $1", [claims.sub]).first {
                    guard try row.decode("account_id", as: UUID.self) == req.accountId else { throw inUse }
                } else {
                    try AccountStore.addAppleIdentity(tx, subject: claims.sub, account: req.accountId, email: email)
                }
                return try AccountStore.view(tx, account: req.accountId)
            }
        } catch let e as PGError where e.isUniqueViolation && e.constraint == "apple_identities_pkey" {
            throw inUse  // linked to another account at the same moment
        }
    }

    /// Moves the Apple tokens of an account being deleted into the revocation outbox, in the
    /// deletion's transaction; answers how many.
    static func queueAppleRevocations(_ tx: PGConnection, account: UUID) throws -> Int {
        try tx.query("""
            INSERT INTO accounts.apple_revocations (id, subject, client_id, token, secret_key_id)
            SELECT gen_random_uuid(), subject, client_id, refresh_token, refresh_key_id FROM accounts.apple_identities
            WHERE account_id = $1 AND refresh_token IS NOT NULL AND client_id IS NOT NULL AND refresh_key_id IS NOT NULL
            RETURNING id
            """, [account]).rows.count
    }

    /// Revokes the queued tokens at Apple, every few seconds or when a deletion rings: a token
    /// Apple took, or refused for good, leaves the outbox; one Apple could not take (down, slow,
    /// throttling) is tried again after a growing pause. Rows are claimed for a minute, so
    /// instances share the work and one killed mid-call leaves its rows to the next.
    func revokeAtApple() async {
        let backoff = Backoff(initial: 1, max: 3600, jitter: 0.2)
        var lastSweep = Date.distantPast
        await Periodic(every: .seconds(2), doorbell: appleRevocations).poll { [self] () async -> Periodic.Next in
            if Date().timeIntervalSince(lastSweep) > 60 {
                lastSweep = Date()
                _ = try? await pool.query("DELETE FROM accounts.sign_in_codes WHERE expires_at < now() - interval '1 day'")
            }
            guard let flow = appleWeb else { return .pause }
            let due: [PGRow]
            do {
                due = try await pool.query("""
                    UPDATE accounts.apple_revocations SET attempts = attempts + 1, next_attempt_at = now() + interval '60 seconds'
                    WHERE id IN (SELECT id FROM accounts.apple_revocations WHERE next_attempt_at <= now()
                                 ORDER BY next_attempt_at LIMIT 20 FOR UPDATE SKIP LOCKED)
                    RETURNING id, subject, token, secret_key_id, attempts
                    """).rows
            } catch {
                return .pause
            }
            for row in due { await revoke(row, flow: flow, backoff: backoff) }
            return due.isEmpty ? .pause : .again
        }
    }

    private func revoke(_ row: PGRow, flow: AppleAuthClient, backoff: Backoff) async {
        guard let id = try? row.decode("id", as: UUID.self), let subject = try? row.decode("subject", as: String.self),
              let sealed = try? row.decode("token", as: PGBytes.self), let keyId = try? row.decode("secret_key_id", as: String.self),
              let attempts = try? row.decode("attempts", as: Int.self) else { return }
        let log: [String: any Sendable] = ["revocation.id": id.lowercasedString, "revocation.attempts": attempts]
        let token: String
        do {
            token = String(decoding: try keyring.open(Array(sealed.data), keyId: keyId, context: Self.appleTokenContext(subject)), as: UTF8.self)
        } catch {
            runtime.logger.error("an Apple token to revoke cannot be opened; tried again in a minute", log.merging(["error": String(describing: error)]) { $1 })
            return
        }
        switch await flow.revoke(refreshToken: token) {
        case .ok:
            _ = try? await pool.query("DELETE FROM accounts.apple_revocations WHERE id = $1", [id])
            runtime.logger.info("Apple token revoked", log)
        case .refused(let status, let error):
            // Apple will not take it later either (revoked already, or the app's key changed).
            _ = try? await pool.query("DELETE FROM accounts.apple_revocations WHERE id = $1", [id])
            runtime.logger.warning("Apple refused to revoke a token; given up", log.merging(["http.status": status, "apple.error": error ?? ""]) { $1 })
        case .unavailable(let why):
            let pause = backoff.delay(afterFailures: attempts, random: Double.random(in: 0..<1))
            _ = try? await pool.query("UPDATE accounts.apple_revocations SET next_attempt_at = now() + make_interval(secs => $2) WHERE id = $1", [id, pause])
            runtime.logger.warning("Apple token not revoked yet; tried again", log.merging(["reason": why, "retry.seconds": pause]) { $1 })
        }
    }
}
