-- The gateway's Idempotency-Key: one row per key and caller (`scope`: an API key, or an account in
-- a mode), with the hash of the request it came with and, once answered, the answer sealed under
-- the secret key. In flight while `locked_until` is set; kept until `expires_at` (24 h).
CREATE TABLE idempotency_keys (
    scope text NOT NULL,
    key text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    request_hash bytea NOT NULL CHECK (length(request_hash) = 32),
    locked_until timestamptz,
    response bytea,
    key_id text,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (scope, key),
    CHECK ((response IS NULL) <> (locked_until IS NULL)),
    CHECK ((response IS NULL) = (key_id IS NULL))
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
