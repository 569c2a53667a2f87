-- Verification and reset mail per email address and per client address, one budget for every
-- gateway and instance (`MailLimits`): a token bucket per key, stored as the key's SHA-256.
CREATE TABLE mail_limits (
    key bytea PRIMARY KEY,
    tokens double precision NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX mail_limits_updated ON mail_limits (updated_at);
