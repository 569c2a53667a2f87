import Core
import Cryptography
import Database
import Foundation

/// Members' second factor (docs/security.md, "Members"): TOTP (RFC 6238: HMAC-SHA1, 30 s, 6
/// digits) with ten recovery codes. The secret is sealed under `REDEEM_SECRET_KEY`, bound to its
/// account; a code is taken once (the step it was made for must be later than the last one
/// taken); recovery codes are stored as their SHA-256 only and work once each.
enum MemberTOTP {
    static let recoveryCodeCount = 10
    static let issuer = "Redeem"

    /// What a sealed secret is bound to: its account.
    static func context(_ account: UUID) -> String { "accounts.member_totp/\(account.lowercasedString)" }

    /// Whether the account has TOTP turned on.
    static func isOn(_ c: PGConnection, account: UUID) throws -> Bool {
        try c.query("SELECT 1 FROM accounts.member_totp WHERE account_id = $1 AND enabled_at IS NOT NULL", [account])
            .first != nil
    }

    /// Whether every member must have TOTP.
    static func required(_ c: PGConnection) throws -> Bool {
        try c.query("SELECT require_totp FROM accounts.member_settings").first?.decode("require_totp") ?? false
    }

    /// A new secret for a member, waiting for its first code (`confirm`); one already on is 409.
    static func start(
        _ tx: PGConnection, account: UUID, email: String, keyring: SecretKeyring
    ) throws -> Members.TOTPSetup {
        guard try MemberStore.isMember(tx, id: account, lock: true) else {
            throw ServiceError(.forbidden, "two-step verification is for members")
        }
        guard try !isOn(tx, account: account) else {
            throw ServiceError(.invalidState, "two-step verification is on already; turn it off first")
        }
        let secret = TOTP.newSecret()
        let sealed = keyring.seal(secret, context: context(account))
        try tx.query(
            """
            INSERT INTO accounts.member_totp (account_id, secret, secret_key_id) VALUES ($1, $2, $3)
            ON CONFLICT (account_id) DO UPDATE SET secret = EXCLUDED.secret, secret_key_id = EXCLUDED.secret_key_id,
                created_at = now(), enabled_at = NULL, last_step = 0
            """, [account, PGBytes(Data(sealed.sealed)), sealed.keyId])
        let totp = TOTP(secret: secret)
        return .init(secret: Base32.encode(secret), uri: totp.uri(issuer: issuer, account: email))
    }

    /// Turns TOTP on with a first code of the waiting secret: answers the recovery codes, shown
    /// this once. A wrong code is 401 `invalidCredentials` on `code`.
    static func confirm(
        _ tx: PGConnection, account: UUID, code: String, keyring: SecretKeyring, now: Date
    ) throws -> [String] {
        guard
            let row = try tx.query(
                """
                SELECT secret, secret_key_id, last_step FROM accounts.member_totp WHERE account_id = $1 AND enabled_at IS NULL FOR UPDATE
                """, [account]
            ).first
        else { throw ServiceError(.invalidState, "start two-step verification first, or it is on already") }
        guard let step = try matchingStep(row, account: account, code: code, keyring: keyring, now: now) else {
            throw wrongCode
        }
        try tx.query(
            "UPDATE accounts.member_totp SET enabled_at = now(), last_step = $2 WHERE account_id = $1", [account, step])
        try tx.query("DELETE FROM accounts.member_recovery_codes WHERE account_id = $1", [account])
        var codes: [String] = []
        for _ in 0..<recoveryCodeCount {
            let text = Base32.encode(Crypto.randomBytes(7)).lowercased()  // 12 characters, 56 bits
            let code = "\(text.prefix(6))-\(text.dropFirst(6).prefix(6))"
            try tx.query(
                "INSERT INTO accounts.member_recovery_codes (account_id, code_hash) VALUES ($1, $2)",
                [account, recoveryHash(code)])
            codes.append(code)
        }
        return codes
    }

    /// Takes a second factor at sign-in (or to turn TOTP off): a current TOTP code not taken
    /// before, or an unused recovery code, which is spent. False for anything else.
    static func verify(
        _ tx: PGConnection, account: UUID, code: String, keyring: SecretKeyring, now: Date
    ) throws -> Bool {
        let trimmed = code.trimmingCharacters(in: .whitespaces)
        if trimmed.count == TOTP.digits {
            guard
                let row = try tx.query(
                    """
                    SELECT secret, secret_key_id, last_step FROM accounts.member_totp WHERE account_id = $1 AND enabled_at IS NOT NULL FOR UPDATE
                    """, [account]
                ).first, let step = try matchingStep(row, account: account, code: trimmed, keyring: keyring, now: now)
            else { return false }
            try tx.query("UPDATE accounts.member_totp SET last_step = $2 WHERE account_id = $1", [account, step])
            return true
        }
        return try tx.query(
            """
            UPDATE accounts.member_recovery_codes SET used_at = now() WHERE account_id = $1 AND code_hash = $2 AND used_at IS NULL
            """, [account, recoveryHash(trimmed)]
        ).affectedRows == 1
    }

    /// Turns TOTP off (a current code or a recovery code required); refused while every member must have it.
    static func disable(_ tx: PGConnection, account: UUID, code: String, keyring: SecretKeyring, now: Date) throws {
        guard try isOn(tx, account: account) else {
            throw ServiceError(.invalidState, "two-step verification is not on")
        }
        guard try !required(tx) else {
            throw ServiceError(.invalidState, "every member must have two-step verification on this server")
        }
        guard try verify(tx, account: account, code: code, keyring: keyring, now: now) else { throw wrongCode }
        try tx.query("DELETE FROM accounts.member_recovery_codes WHERE account_id = $1", [account])
        try tx.query("DELETE FROM accounts.member_totp WHERE account_id = $1", [account])
    }

    static let wrongCode = ServiceError(
        .invalidCredentials, "the code is not right, or was used already", field: "code")

    private static func matchingStep(
        _ row: PGRow, account: UUID, code: String, keyring: SecretKeyring, now: Date
    ) throws -> Int64? {
        let secret = try keyring.open(
            Array(try row.decode("secret", as: PGBytes.self).data),
            keyId: try row.decode("secret_key_id", as: String.self),
            context: context(account))
        return TOTP(secret: secret).matchingStep(code, at: now, after: try row.decode("last_step", as: Int64.self))
    }

    /// A recovery code as stored: the SHA-256 of its lower-case text without the dash.
    static func recoveryHash(_ code: String) -> PGBytes {
        PGBytes(Data(Crypto.sha256(Array(code.lowercased().replacingOccurrences(of: "-", with: "").utf8))))
    }
}
