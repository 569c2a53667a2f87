-- Unique single-use codes of a coupon (`POST /v1/coupons/{code}/codes`). A code is stored only as
-- its SHA-256 (as API keys are) with its last four characters for reports; the plain codes exist
-- once, in the creation's CSV, sealed under REDEEM_SECRET_KEY until its one download deletes it.
ALTER TABLE coupons ADD COLUMN has_unique_codes boolean NOT NULL DEFAULT false;

CREATE TABLE unique_codes (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    coupon_id uuid NOT NULL REFERENCES coupons(id),
    code_hash bytea NOT NULL CHECK (octet_length(code_hash) = 32),
    last4 text NOT NULL CHECK (last4 ~ '^[2-9A-HJ-NP-Z]{4}$'),
    export_id uuid NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT unique_codes_hash_key UNIQUE (code_hash)
);
CREATE INDEX unique_codes_coupon ON unique_codes (coupon_id);

-- A unique code is used at most once: one redemption holds it while it is reserved, granting or
-- completed (sandbox or not); a failed or released one frees it, as it frees the cap's use.
ALTER TABLE redemptions ADD COLUMN unique_code_id bigint REFERENCES unique_codes(id);
ALTER TABLE redemptions ADD COLUMN unique_code_last4 text;
ALTER TABLE redemptions ADD CONSTRAINT redemptions_unique_code_last4
    CHECK ((unique_code_id IS NULL) = (unique_code_last4 IS NULL));
CREATE UNIQUE INDEX redemptions_one_use_of_a_unique_code ON redemptions (unique_code_id)
    WHERE holds_use AND unique_code_id IS NOT NULL;

-- A creation's CSV until it is downloaded, once (by an operator key, or by its one-time token's
-- hash), or until it expires; deleted either way.
CREATE TABLE code_exports (
    id uuid PRIMARY KEY,
    coupon_id uuid NOT NULL REFERENCES coupons(id),
    count int NOT NULL CHECK (count BETWEEN 1 AND 100000),
    sealed_csv text NOT NULL,
    key_id text NOT NULL,
    token_hash bytea NOT NULL CHECK (octet_length(token_hash) = 32),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    CONSTRAINT code_exports_token_key UNIQUE (token_hash)
);
CREATE INDEX code_exports_coupon ON code_exports (coupon_id, created_at);
CREATE INDEX code_exports_expiry ON code_exports (expires_at);
