import Core
import Database
import Foundation

/// A password reset that proves the mailbox of an account whose email was unproven takes the whole
/// account back (docs/security.md, "A password reset takes the whole account back"). Whoever
/// signed up with an address they do not own may have added their own ways in: an Apple ID, a
/// record name (and with it the appUserId, where a subscriber's entitlements sit), one-time
/// sign-in codes, API keys made as a member. Everything was added while the email was unproven, so
/// all of it goes; sessions end as with every reset.
struct AccountTakeBack: Sendable {
    var appleIdentities = 0
    var recordNames = 0
    var signInCodes = 0
    var appleRevocationsQueued = 0
    var revokedKeys: [UUID] = []
    /// The appUserId given up (a removed record name) and the fresh one the account has now:
    /// grants are told to move the holder.
    var appUserIdChange: (from: String, to: String)?

    /// Strips the account, its row locked, in the reset's transaction. Apple's refresh tokens of
    /// the removed identities go to the revocation outbox, as at deletion.
    static func strip(_ tx: PGConnection, account: UUID) throws -> AccountTakeBack {
        var done = AccountTakeBack()
        guard let row = try tx.query("SELECT app_user_id FROM accounts.accounts WHERE id = $1 FOR UPDATE", [account]).first else {
            throw ServiceError(.notFound, "no such account")
        }
        let appUserId: String = try row.decode("app_user_id")
        done.appleRevocationsQueued = try AccountsService.queueAppleRevocations(tx, account: account)
        done.appleIdentities = try tx.query("DELETE FROM accounts.apple_identities WHERE account_id = $1 RETURNING subject", [account]).rows.count
        let names = try tx.query("SELECT value FROM accounts.user_ids WHERE account_id = $1 AND kind = 'cloudkit'", [account]).rows
            .map { try $0.decode("value", as: String.self) }
        if names.contains(appUserId) {
            // Back to the id the account was made with, or a new one.
            let fresh = try tx.query("""
                SELECT value FROM accounts.user_ids WHERE account_id = $1 AND kind = 'appUserId' ORDER BY created_at DESC LIMIT 1
                """, [account]).first.map { try $0.decode("value", as: String.self) }
            let next = fresh ?? UUID.random().lowercasedString
            if fresh == nil {
                try tx.query("INSERT INTO accounts.user_ids (value, account_id, kind) VALUES ($1, $2, 'appUserId')", [next, account])
            }
            try tx.query("UPDATE accounts.accounts SET app_user_id = $2 WHERE id = $1", [account, next])
            try tx.query("""
                INSERT INTO accounts.app_user_id_changes (account_id, previous, current) VALUES ($1, $2, $3)
                ON CONFLICT (account_id, previous) DO UPDATE SET current = EXCLUDED.current, created_at = now(), moved_at = NULL
                """, [account, appUserId, next])
            done.appUserIdChange = (appUserId, next)
        }
        done.recordNames = try tx.query("DELETE FROM accounts.user_ids WHERE account_id = $1 AND kind = 'cloudkit' RETURNING value", [account]).rows.count
        done.signInCodes = try tx.query("""
            UPDATE accounts.sign_in_codes SET used_at = now() WHERE account_id = $1 AND used_at IS NULL RETURNING code_hash
            """, [account]).rows.count
        // Keys this account made as a member (the audit log names who made each).
        done.revokedKeys = try tx.query("""
            UPDATE accounts.api_keys SET revoked_at = now()
            WHERE revoked_at IS NULL AND upper(id::text) IN (
                SELECT object_id FROM accounts.audit_log WHERE actor_type = 'member' AND actor_id = $1 AND action = 'apiKey.create')
            RETURNING id
            """, [account]).rows.map { try $0.decode("id", as: UUID.self) }
        return done
    }
}
