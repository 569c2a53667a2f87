-- email verification and password reset. A token is random and stored as its
-- SHA-256 only, with the address it was mailed to (it proves that address, and only while it
-- is still the account's), used once, and expiring. The mail carrying it is written to the
-- outbox in the same transaction; the sender claims due mail under a lease (SKIP LOCKED, so
-- two instances never send one mail at once). The body is sealed under REDEEM_SECRET_KEY,
-- and cleared once sent or once its token has expired. Both tables name an email: their
-- rows go with the account, and a week after they are of no more use (`MailOutbox.prune`).
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
