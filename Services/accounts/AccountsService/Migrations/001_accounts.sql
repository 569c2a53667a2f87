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
