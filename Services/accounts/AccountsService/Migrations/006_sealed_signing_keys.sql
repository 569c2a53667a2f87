-- private keys are sealed under REDEEM_SECRET_KEY (SecretKeyring); the id of
-- the key that sealed one is kept beside it. NULL: a key stored before, still plain, which
-- the service seals at its next start.
ALTER TABLE signing_keys ADD COLUMN secret_key_id text;
