-- Coupons and plans belong to one app (docs/apps.md), as they belong to one mode: a code is unique
-- per app and mode, and so is a plan's product id. Everything from before apps is the default
-- app's. Redemptions, store offers and unique codes belong to their coupon's app.
ALTER TABLE coupons ADD COLUMN app_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001';
ALTER TABLE coupons DROP CONSTRAINT coupons_code_mode_key;
ALTER TABLE coupons ADD CONSTRAINT coupons_code_app_mode_key UNIQUE (code, app_id, mode);

ALTER TABLE plans ADD COLUMN app_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001';
ALTER TABLE plans DROP CONSTRAINT plans_pkey;
ALTER TABLE plans ADD PRIMARY KEY (app_id, mode, product_id);
DROP INDEX plans_created;
CREATE INDEX plans_created ON plans (app_id, mode, created_at DESC, id DESC);

-- The statistics are counted per app now (SQL/redemption_stats.sql takes it).
DROP FUNCTION IF EXISTS redemption_stats(text, timestamptz);
