-- Members' second factor and invitations that can be revoked (docs/security.md, "Ownership and
-- binding"). A TOTP secret is sealed under REDEEM_SECRET_KEY (bound to its account); `last_step` is
-- the last time step a code was taken for, so a code works once. Recovery codes are stored as their
-- SHA-256 only, each used once. `member_settings` is one row: whether every member must have TOTP.
-- A session remembers whether it was opened with the second factor; only such a session carries a
-- role when the member has TOTP or it is required.
-- A sign-in code keeps the SHA-256 of the verifier that may exchange it (S256, RFC 7636): the
-- Android app's `code_challenge`, or one derived from the browser's flow cookie.
ALTER TABLE member_invites ADD COLUMN revoked_at timestamptz;
CREATE TABLE member_totp (
    account_id uuid PRIMARY KEY REFERENCES accounts(id),
    secret bytea NOT NULL,
    secret_key_id text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    enabled_at timestamptz,
    last_step bigint NOT NULL DEFAULT 0
);
CREATE TABLE member_recovery_codes (
    account_id uuid NOT NULL REFERENCES accounts(id),
    code_hash bytea NOT NULL,
    used_at timestamptz,
    PRIMARY KEY (account_id, code_hash)
);
CREATE TABLE member_settings (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    require_totp boolean NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO member_settings DEFAULT VALUES;
ALTER TABLE sessions ADD COLUMN second_factor boolean NOT NULL DEFAULT false;
ALTER TABLE sign_in_codes ADD COLUMN challenge bytea;
