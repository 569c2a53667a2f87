-- Whether the coupon has Google Play offers (has_store_offers stays the App Store's): only
-- such a coupon costs validate and redeem on Android a query of its offers.
ALTER TABLE coupons ADD COLUMN has_play_offers boolean NOT NULL DEFAULT false;

-- A Play offer is made on each base plan of a plan; the App Store's rows have none ('').
ALTER TABLE store_offers ADD COLUMN base_plan_id text NOT NULL DEFAULT '';
ALTER TABLE store_offers DROP CONSTRAINT store_offers_pkey;
ALTER TABLE store_offers ADD PRIMARY KEY (coupon_id, store, product_id, base_plan_id);
ALTER TABLE store_offers DROP CONSTRAINT store_offers_store_check;
ALTER TABLE store_offers ADD CONSTRAINT store_offers_store_check CHECK (store IN ('appStore', 'playStore'));
ALTER TABLE store_offers ADD CONSTRAINT store_offers_base_plan CHECK ((store = 'playStore') = (base_plan_id <> ''));
ALTER TABLE store_offers DROP CONSTRAINT store_offers_state_check;
ALTER TABLE store_offers ADD CONSTRAINT store_offers_state_check
    CHECK (state IN ('creating', 'waitingForApple', 'waitingForGoogle', 'failed'));
-- A coupon's Play offer has one id on each of its base plans (Google wants it unique per base
-- plan); an App Store offer's name stays unique, as Apple's transactions find it by name.
ALTER TABLE store_offers DROP CONSTRAINT store_offers_offer_name_key;
CREATE UNIQUE INDEX store_offers_offer_name ON store_offers (offer_name) WHERE store = 'appStore';
CREATE UNIQUE INDEX store_offers_play_offer ON store_offers (offer_name, product_id, base_plan_id) WHERE store = 'playStore';
ALTER TABLE store_purchases DROP CONSTRAINT store_purchases_store_check;
ALTER TABLE store_purchases ADD CONSTRAINT store_purchases_store_check CHECK (store IN ('appStore', 'playStore'));
-- code_created_at is when Google activated the offer: the settle time counts from there.
ALTER TABLE store_offers ADD CONSTRAINT store_offers_google_activated CHECK (state <> 'waitingForGoogle' OR code_created_at IS NOT NULL);
