-- Issue 22 §2 and §4: Sign in with Apple on the web and Android. An Apple identity signed
-- in through the REST flow keeps Apple's refresh token, sealed under REDEEM_SECRET_KEY
-- (SecretKeyring, bound to its subject), for the revocation deletion owes Apple. A sign-in
-- code hands the flow's session to the page or app that started it: stored as its SHA-256
-- only, used once, short-lived. Revocations wait in an outbox until Apple confirms them.
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
