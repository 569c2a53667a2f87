-- members are accounts with an operator role, joined by a one-time invitation
-- (stored as its SHA-256 only, like keys and refresh tokens).
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
