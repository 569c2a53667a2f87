-- Stripe for the web (docs/stripe.md): a plan may name a Stripe recurring price, and a coupon
-- covering the web becomes one Stripe coupon with one promotion code. Its store_offers row is
-- the coupon's one Stripe offer, for every plan of the coupon: it names no plan (product_id '').
ALTER TABLE plans ADD COLUMN stripe_price_id text CHECK (stripe_price_id ~ '^price_[A-Za-z0-9_]{1,200}$');
ALTER TABLE coupons ADD COLUMN has_stripe_offers boolean NOT NULL DEFAULT false;
ALTER TABLE store_offers DROP CONSTRAINT store_offers_store_check;
ALTER TABLE store_offers ADD CONSTRAINT store_offers_store_check CHECK (store IN ('appStore', 'playStore', 'stripe'));
ALTER TABLE store_offers ADD CONSTRAINT store_offers_stripe_one_per_coupon CHECK (store <> 'stripe' OR product_id = '');
ALTER TABLE store_offers DROP CONSTRAINT store_offers_state_check;
ALTER TABLE store_offers ADD CONSTRAINT store_offers_state_check
    CHECK (state IN ('creating', 'waitingForApple', 'waitingForGoogle', 'waitingForStripe', 'failed'));
-- The promotion code exists at Stripe from code_created_at.
ALTER TABLE store_offers ADD CONSTRAINT store_offers_stripe_made CHECK (state <> 'waitingForStripe' OR code_created_at IS NOT NULL);
-- The Stripe coupon's id is the offer's name: unique, as the App Store's.
CREATE UNIQUE INDEX store_offers_stripe_coupon ON store_offers (offer_name) WHERE store = 'stripe';
