-- Access tokens move to RS256 (cheaper to verify); Ed25519 keys of earlier versions stay
-- so their unexpired tokens still verify. An Ed25519 key is its 32 raw bytes, RSA is DER.
ALTER TABLE signing_keys ADD COLUMN algorithm text NOT NULL DEFAULT 'EdDSA' CHECK (algorithm IN ('EdDSA', 'RS256'));
ALTER TABLE signing_keys ALTER COLUMN algorithm DROP DEFAULT;
