-- webhook secrets are sealed under REDEEM_SECRET_KEY (SecretKeyring), stored
-- as base64, with the id of the key beside them. NULL: a secret stored before, still
-- plain, which the service seals at its next start.
ALTER TABLE webhook_endpoints ADD COLUMN secret_key_id text;
