import Core
import Database
import Foundation

/// Accounts, their identities and the appUserId rule, in SQL. Every uniqueness rule
/// is a constraint; a violation is mapped to the error clients see.
enum AccountStore {
    /// Creates an account and answers its id. `recordName` (iOS-first) becomes the appUserId;
    /// otherwise a fresh UUID does. `emailVerified`: the email was proven (Apple said so).
    static func create(_ tx: PGConnection, email: String?, emailVerified: Bool, passwordHash: String?, recordName: String?) throws -> UUID {
        let id = UUID.random()
        let appUserId = recordName ?? UUID.random().lowercasedString
        try mapConflicts {
            try tx.query("INSERT INTO accounts.accounts (id, email, email_verified, password_hash, app_user_id) VALUES ($1, $2, $3, $4, $5)",
                         [id, email, emailVerified, passwordHash, appUserId])
            try tx.query("INSERT INTO accounts.user_ids (value, account_id, kind) VALUES ($1, $2, $3)",
                         [appUserId, id, recordName == nil ? "appUserId" : "cloudkit"])
        }
        return id
    }

    /// Records an Apple identity (its subject, and the email its token carried) for an account.
    static func addAppleIdentity(_ tx: PGConnection, subject: String, account: UUID, email: String?) throws {
        try tx.query("INSERT INTO accounts.apple_identities (subject, account_id, email) VALUES ($1, $2, $3)", [subject, account, email])
    }

    /// Links a CloudKit record name to an account as an identity (idempotent for the same account)
    /// and answers the account's appUserId; `AccountStore.link` decides whether the name becomes it.
    static func linkRecordName(_ tx: PGConnection, account: UUID, recordName: String) throws -> String {
        let inserted: PGRow?
        do {
            inserted = try tx.query("""
                INSERT INTO accounts.user_ids (value, account_id, kind) VALUES ($1, $2, 'cloudkit')
                ON CONFLICT (value) DO NOTHING RETURNING account_id
                """, [recordName, account]).first
        } catch let e as PGError where e.sqlState == "23503" {
            throw ServiceError(.notFound, "no such account")  // a token outliving its account
        }
        if inserted == nil {
            let owner = try tx.query("SELECT account_id FROM accounts.user_ids WHERE value = $1", [recordName]).first
            guard let owner, try owner.decode("account_id", as: UUID.self) == account else {
                throw ServiceError(.recordNameInUse, "this CloudKit record name belongs to another account", field: "recordName")
            }
        }
        guard let row = try tx.query("SELECT app_user_id FROM accounts.accounts WHERE id = $1", [account]).first else {
            throw ServiceError(.notFound, "no such account")
        }
        return try row.decode("app_user_id", as: String.self)
    }

    /// How long after the password was given a session may link Apple or a record name to an
    /// account whose email is unproven.
    static let freshSignIn: TimeInterval = 5 * 60

    /// Linking Apple or a record name to an account whose email is unproven (whoever signed up may
    /// not own that mailbox) needs a fresh sign-in: the session asking was opened with the
    /// password within `freshSignIn`. A proven email, or none, needs nothing more. 403
    /// `reauthenticationRequired` otherwise.
    static func requireFreshSignIn(_ c: PGConnection, account: UUID, session: UUID?) throws {
        guard let row = try c.query("""
            SELECT a.email IS NOT NULL AND NOT a.email_verified AS unproven,
                   EXISTS (SELECT 1 FROM accounts.sessions s WHERE s.id = $2 AND s.account_id = a.id AND s.revoked_at IS NULL
                           AND s.password_at > now() - make_interval(secs => $3)) AS fresh
            FROM accounts.accounts a WHERE a.id = $1 AND a.deleted_at IS NULL
            """, [account, session, freshSignIn]).first else { throw ServiceError(.notFound, "no such account") }
        guard try !row.decode("unproven", as: Bool.self) || row.decode("fresh", as: Bool.self) else {
            throw ServiceError(.reauthenticationRequired,
                               "this account's email is not verified: sign in with the password again (within 5 minutes) or verify the email first")
        }
    }

    static func find(_ c: PGConnection, email: String) throws -> (id: UUID, passwordHash: String?, emailVerified: Bool)? {
        guard let row = try c.query("SELECT id, password_hash, email_verified FROM accounts.accounts WHERE lower(email) = lower($1)", [email]).first else { return nil }
        return (try row.decode("id", as: UUID.self), try row.decodeIfPresent("password_hash", as: String.self), try row.decode("email_verified", as: Bool.self))
    }

    static func view(_ c: PGConnection, account: UUID) throws -> AccountView {
        guard let row = try c.query("SELECT id, email, email_verified, app_user_id, created_at FROM accounts.accounts WHERE id = $1 AND deleted_at IS NULL", [account]).first else {
            throw ServiceError(.notFound, "no such account")
        }
        let email = try row.decodeIfPresent("email", as: String.self)
        var identities: [AccountView.Identity] = []
        if let email, try c.query("SELECT 1 FROM accounts.accounts WHERE id = $1 AND password_hash IS NOT NULL", [account]).first != nil {
            identities.append(.init(type: "email", email: email))
        }
        // An Apple account made beside a password account that holds the email has no email of
        // its own; its Apple identity still shows the one Apple gave.
        if let apple = try c.query("SELECT email FROM accounts.apple_identities WHERE account_id = $1 ORDER BY created_at, subject LIMIT 1", [account]).first {
            identities.append(.init(type: "apple", email: try apple.decodeIfPresent("email", as: String.self) ?? email))
        }
        for r in try c.query("SELECT value FROM accounts.user_ids WHERE account_id = $1 AND kind = 'cloudkit' ORDER BY created_at, value", [account]).rows {
            identities.append(.init(type: "cloudkit", recordName: try r.decode("value", as: String.self)))
        }
        return AccountView(id: try row.decode("id", as: UUID.self), email: email, emailVerified: try row.decode("email_verified", as: Bool.self), appUserId: try row.decode("app_user_id", as: String.self),
                           identities: identities, createdAt: try row.decode("created_at", as: Date.self))
    }

    /// The accounts an operator looks up (`SQL/find_customers.sql`), each as `GET /v1/me` shows it.
    static func customers(_ c: PGConnection, _ req: Accounts.Customers) throws -> Accounts.Customers.Response {
        let rows = try c.prepared(
            "find_customers", "SELECT accounts.find_customers($1, $2, $3) AS id",
            [req.appUserId, req.email, Accounts.Customers.limit]
        ).rows
        return .init(data: try rows.map { try view(c, account: try $0.decode("id", as: UUID.self)) })
    }

    /// Runs statements and turns unique violations into the client-facing conflicts.
    static func mapConflicts<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let e as PGError where e.isUniqueViolation {
            switch e.constraint {
            case "accounts_email_key": throw ServiceError(.emailInUse, "an account with this email exists", field: "email")
            case "accounts_app_user_id_key", "user_ids_pkey":
                throw ServiceError(.recordNameInUse, "this CloudKit record name belongs to another account", field: "cloudkitRecordName")
            default: throw e
            }
        }
    }

    /// Deletes an account: its row is kept as a tombstone without email, password
    /// or verified flag; its Apple identities and every id it held (appUserId, record names) are
    /// released, so the same person can start again; the row's appUserId becomes `deleted:<id>`.
    /// Answers the sessions it revoked; `notFound` for an account already deleted.
    static func delete(_ tx: PGConnection, account: UUID, sessions: SessionIssuer) throws -> [SessionRevoked] {
        guard try tx.query("SELECT id FROM accounts.accounts WHERE id = $1 AND deleted_at IS NULL FOR UPDATE", [account]).first != nil else {
            throw ServiceError(.notFound, "no such account")
        }
        var revoked: [SessionRevoked] = []
        for row in try tx.query("SELECT id FROM accounts.sessions WHERE account_id = $1 AND revoked_at IS NULL", [account]).rows {
            if let event = try sessions.revoke(tx, session: try row.decode("id", as: UUID.self), reason: "accountDeleted") { revoked.append(event) }
        }
        try tx.query("DELETE FROM accounts.apple_identities WHERE account_id = $1", [account])
        try tx.query("DELETE FROM accounts.user_ids WHERE account_id = $1", [account])
        // Mailed codes and the mail that carries them name the email: they go too.
        try tx.query("DELETE FROM accounts.email_tokens WHERE account_id = $1", [account])
        try tx.query("DELETE FROM accounts.mail_outbox WHERE account_id = $1", [account])
        try tx.query("""
            UPDATE accounts.accounts SET email = NULL, email_verified = false, password_hash = NULL, deleted_at = now(),
                app_user_id = 'deleted:' || id::text WHERE id = $1
            """, [account])
        return revoked
    }
}
