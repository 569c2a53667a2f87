-- How many times coupons asked grants to switch the offer off or on: each command carries
-- the count, and grants runs an offer's switches in its order.
ALTER TABLE store_offers ADD COLUMN switch_generation int NOT NULL DEFAULT 0 CHECK (switch_generation >= 0);
CREATE INDEX store_offers_switched_off ON store_offers (coupon_id) WHERE switched_off_at IS NOT NULL;
