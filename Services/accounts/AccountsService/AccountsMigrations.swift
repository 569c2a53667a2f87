import Database

/// Schema `accounts`. Uniqueness that the business depends on is enforced here:
/// one account per email (any case), one owner per appUserId or linked record name (`user_ids`),
/// one account per Apple subject, one live refresh token per session, and a verified email only
/// where there is an email.
enum AccountsMigrations {
    static let all: [Migration] = [
        Migration(1, "accounts", """
            CREATE TABLE accounts (
                id uuid PRIMARY KEY,
                email text,
                password_hash text,
                app_user_id text NOT NULL UNIQUE,
                created_at timestamptz NOT NULL DEFAULT now()
            );
            CREATE UNIQUE INDEX accounts_email_key ON accounts (lower(email));

            -- Every appUserId and every linked CloudKit record name, in one namespace: a record
            -- name can belong to one account only, whether as its appUserId or as a link.
            CREATE TABLE user_ids (
                value text PRIMARY KEY,
                account_id uuid NOT NULL REFERENCES accounts(id),
                kind text NOT NULL CHECK (kind IN ('appUserId', 'cloudkit')),
                created_at timestamptz NOT NULL DEFAULT now()
            );
            CREATE INDEX user_ids_account ON user_ids (account_id);

            CREATE TABLE apple_identities (
                subject text PRIMARY KEY,
                account_id uuid NOT NULL REFERENCES accounts(id),
                created_at timestamptz NOT NULL DEFAULT now()
            );
            CREATE INDEX apple_identities_account ON apple_identities (account_id);

            CREATE TABLE sessions (
                id uuid PRIMARY KEY,
                account_id uuid NOT NULL REFERENCES accounts(id),
                refresh_hash bytea NOT NULL UNIQUE,
                created_at timestamptz NOT NULL DEFAULT now(),
                refreshed_at timestamptz NOT NULL DEFAULT now(),
                expires_at timestamptz NOT NULL,
                revoked_at timestamptz,
                revoked_reason text
            );
            CREATE INDEX sessions_revoked_at ON sessions (revoked_at) WHERE revoked_at IS NOT NULL;

            -- Refresh tokens already exchanged: presenting one again revokes its session.
            CREATE TABLE spent_refresh_tokens (
                hash bytea PRIMARY KEY,
                session_id uuid NOT NULL REFERENCES sessions(id),
                spent_at timestamptz NOT NULL DEFAULT now()
            );

            CREATE TABLE signing_keys (
                kid text PRIMARY KEY,
                private_key bytea NOT NULL,
                created_at timestamptz NOT NULL DEFAULT now()
            );

            CREATE TABLE api_keys (
                id uuid PRIMARY KEY,
                key_hash bytea NOT NULL UNIQUE,
                prefix text NOT NULL,
                name text NOT NULL,
                role text NOT NULL CHECK (role IN ('admin', 'support', 'readonly')),
                mode text NOT NULL CHECK (mode IN ('live', 'test')),
                created_at timestamptz NOT NULL DEFAULT now(),
                last_used_at timestamptz,
                revoked_at timestamptz
            );
            """),
        // Access tokens move to RS256 (cheaper to verify); Ed25519 keys of earlier versions stay
        // so their unexpired tokens still verify. An Ed25519 key is its 32 raw bytes, RSA is DER.
        Migration(2, "signing key algorithms", """
            ALTER TABLE signing_keys ADD COLUMN algorithm text NOT NULL DEFAULT 'EdDSA' CHECK (algorithm IN ('EdDSA', 'RS256'));
            ALTER TABLE signing_keys ALTER COLUMN algorithm DROP DEFAULT;
            """),
        // Issue 18 §5. Sign in with Apple joins an existing account only when its email was proven
        // (it came from Apple with email_verified): a password account's email never was. Accounts
        // already holding an Apple identity count as proven: an Apple email joined an account only
        // when verified, and Apple marks almost every email verified (which account a rare
        // unverified first sign-in made can't be told any more); password-only accounts do not.
        // An Apple identity keeps the email its token carried, for an Apple account made beside
        // a password account that holds the email.
        // A spent refresh token keeps the pair it was exchanged for, sealed under a key only that
        // token yields, so a retry within the grace window can be answered the same pair; at most
        // one per session (cleared when the session rotates again or is revoked).
        Migration(3, "proven emails and refresh retries", """
            ALTER TABLE accounts ADD COLUMN email_verified boolean NOT NULL DEFAULT false;
            UPDATE accounts a SET email_verified = true
                WHERE email IS NOT NULL AND EXISTS (SELECT 1 FROM apple_identities i WHERE i.account_id = a.id);
            ALTER TABLE accounts ADD CONSTRAINT accounts_verified_email CHECK (email IS NOT NULL OR NOT email_verified);
            ALTER TABLE apple_identities ADD COLUMN email text;
            ALTER TABLE spent_refresh_tokens ADD COLUMN retry_pair bytea;
            CREATE INDEX spent_refresh_tokens_retry ON spent_refresh_tokens (session_id) WHERE retry_pair IS NOT NULL;
            """),
        // Issue 22 §1. An account whose fresh appUserId gave way to its CloudKit record name: the
        // grants service is told to move the holder until it confirms (`moved_at`).
        Migration(4, "appUserId changes", """
            CREATE TABLE app_user_id_changes (
                account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                previous text NOT NULL,
                current text NOT NULL,
                created_at timestamptz NOT NULL DEFAULT now(),
                moved_at timestamptz,
                PRIMARY KEY (account_id, previous)
            );
            CREATE INDEX app_user_id_changes_unmoved ON app_user_id_changes (created_at) WHERE moved_at IS NULL;
            """),
        // Issue 22 §4. A deleted account stays as a row no sign-in reaches (sessions and the
        // appUserId changes refer to it), without email, password, identities or ids.
        Migration(5, "deleted accounts", """
            ALTER TABLE accounts ADD COLUMN deleted_at timestamptz;
            """),
        // Issue 25 §3: private keys are sealed under REDEEM_SECRET_KEY (SecretKeyring); the id of
        // the key that sealed one is kept beside it. NULL: a key stored before, still plain, which
        // the service seals at its next start.
        Migration(6, "sealed signing keys", """
            ALTER TABLE signing_keys ADD COLUMN secret_key_id text;
            """),
        // Issue 23: every operator change is recorded in the transaction that makes it.
        AuditTable.migration(7),
        // Issue 23: members are accounts with an operator role, joined by a one-time invitation
        // (stored as its SHA-256 only, like keys and refresh tokens).
        Migration(8, "members", """
            CREATE TABLE members (
                account_id uuid PRIMARY KEY REFERENCES accounts(id),
                role text NOT NULL CHECK (role IN ('admin', 'support', 'readonly')),
                created_at timestamptz NOT NULL DEFAULT now()
            );
            CREATE TABLE member_invites (
                id uuid PRIMARY KEY,
                token_hash bytea NOT NULL UNIQUE,
                email text NOT NULL,
                role text NOT NULL CHECK (role IN ('admin', 'support', 'readonly')),
                created_at timestamptz NOT NULL DEFAULT now(),
                expires_at timestamptz NOT NULL,
                accepted_at timestamptz,
                account_id uuid REFERENCES accounts(id)
            );
            """),
            // Issue 22 §2 and §4: Sign in with Apple on the web and Android. An Apple identity signed
        // in through the REST flow keeps Apple's refresh token, sealed under REDEEM_SECRET_KEY
        // (SecretKeyring, bound to its subject), for the revocation deletion owes Apple. A sign-in
        // code hands the flow's session to the page or app that started it: stored as its SHA-256
        // only, used once, short-lived. Revocations wait in an outbox until Apple confirms them.
        Migration(9, "sign in with apple on the web", """
            ALTER TABLE apple_identities ADD COLUMN client_id text;
            ALTER TABLE apple_identities ADD COLUMN refresh_token bytea;
            ALTER TABLE apple_identities ADD COLUMN refresh_key_id text;
            CREATE TABLE sign_in_codes (
                code_hash bytea PRIMARY KEY,
                account_id uuid NOT NULL REFERENCES accounts(id),
                created_at timestamptz NOT NULL DEFAULT now(),
                expires_at timestamptz NOT NULL,
                used_at timestamptz
            );
            CREATE INDEX sign_in_codes_expires ON sign_in_codes (expires_at);
            CREATE TABLE apple_revocations (
                id uuid PRIMARY KEY,
                subject text NOT NULL,
                client_id text NOT NULL,
                token bytea NOT NULL,
                secret_key_id text NOT NULL,
                attempts integer NOT NULL DEFAULT 0,
                created_at timestamptz NOT NULL DEFAULT now(),
                next_attempt_at timestamptz NOT NULL DEFAULT now()
            );
            CREATE INDEX apple_revocations_due ON apple_revocations (next_attempt_at);
            """),
        // Issue 22 §4: email verification and password reset. A token is random and stored as its
        // SHA-256 only, with the address it was mailed to (it proves that address, and only while it
        // is still the account's), used once, and expiring. The mail carrying it is written to the
        // outbox in the same transaction; the sender claims due mail under a lease (SKIP LOCKED, so
        // two instances never send one mail at once). The body is sealed under REDEEM_SECRET_KEY,
        // and cleared once sent or once its token has expired. Both tables name an email: their
        // rows go with the account, and a week after they are of no more use (`MailOutbox.prune`).
        Migration(10, "email tokens and mail outbox", """
            CREATE TABLE email_tokens (
                token_hash bytea PRIMARY KEY,
                account_id uuid NOT NULL REFERENCES accounts(id),
                purpose text NOT NULL CHECK (purpose IN ('verifyEmail', 'resetPassword')),
                email text NOT NULL,
                created_at timestamptz NOT NULL DEFAULT now(),
                expires_at timestamptz NOT NULL,
                used_at timestamptz
            );
            CREATE INDEX email_tokens_account ON email_tokens (account_id, purpose) WHERE used_at IS NULL;
            CREATE TABLE mail_outbox (
                id uuid PRIMARY KEY,
                account_id uuid NOT NULL REFERENCES accounts(id),
                kind text NOT NULL CHECK (kind IN ('verifyEmail', 'resetPassword')),
                recipient text NOT NULL,
                body bytea,
                body_key_id text,
                created_at timestamptz NOT NULL DEFAULT now(),
                expires_at timestamptz NOT NULL,
                next_attempt_at timestamptz NOT NULL DEFAULT now(),
                attempts integer NOT NULL DEFAULT 0,
                lease_token uuid,
                last_error text,
                sent_at timestamptz
            );
            CREATE INDEX mail_outbox_due ON mail_outbox (next_attempt_at) WHERE sent_at IS NULL AND body IS NOT NULL;
            CREATE INDEX mail_outbox_account ON mail_outbox (account_id);
            CREATE INDEX mail_outbox_created ON mail_outbox (created_at);
            CREATE INDEX email_tokens_expires ON email_tokens (expires_at);
            """),
    ]
}
