-- The one-time download address of a coupon's redemptions CSV (`POST /v1/coupons/{code}/redemption-exports`,
-- MCP's export_redemptions_csv): only its token's hash, and the coupon (so its mode). The CSV is
-- made at the download, as `GET /v1/coupons/{code}/redemptions` makes it; the row is deleted by
-- that one download, or once it expires.
CREATE TABLE redemption_exports (
    token_hash bytea PRIMARY KEY CHECK (octet_length(token_hash) = 32),
    coupon_id uuid NOT NULL REFERENCES coupons(id),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL CHECK (expires_at > created_at)
);
CREATE INDEX redemption_exports_expiry ON redemption_exports (expires_at);
