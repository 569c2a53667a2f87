-- Plans, store offers and store purchases (docs/stores.md, "Data"). The invariants are the
-- database's: one plan per product id in each mode; one offer per (coupon, store, plan) and
-- a name no other offer has (a transaction's offerIdentifier finds it); one purchase row per
-- purchase chain, and one chain per redemption (so one coupon.redeemed per chain).
--
-- The cap: `used_count` still never passes `max_redemptions` (CHECK). A store purchase that
-- arrives once the cap is full is still recorded: its redemption completes without taking a
-- use of the counter, and its purchase row says `over_cap`. The coupon's figures count it
-- (`redeemedCount`, and `overCapCount`).
--
-- A store purchase no account has claimed yet is a completed redemption without an account
-- (`account_id` NULL), never a reservation. A redemption waiting for the App Store keeps the
-- `app_account_token` it handed the app, to find it when Apple's notification names it.
-- The CHECKs are NOT VALID: every row before this migration has its account.
CREATE TABLE plans (
    id uuid NOT NULL UNIQUE,
    mode text NOT NULL CHECK (mode IN ('live', 'test')),
    product_id text NOT NULL CHECK (product_id ~ '^[A-Za-z0-9._-]{1,200}$'),
    name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    app_store_subscription_id text,
    play_product_id text,
    play_base_plan_ids text[],
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (mode, product_id),
    CHECK ((play_product_id IS NULL) = (play_base_plan_ids IS NULL))
);
CREATE INDEX plans_created ON plans (mode, created_at DESC, id DESC);

-- Whether validate and redeem on iOS read the coupon's store offers: a coupon without
-- any costs them no query.
ALTER TABLE coupons ADD COLUMN has_store_offers boolean NOT NULL DEFAULT false;

CREATE TABLE store_offers (
    coupon_id uuid NOT NULL REFERENCES coupons(id),
    store text NOT NULL CHECK (store IN ('appStore')),
    product_id text NOT NULL,
    -- 'ready' is never stored: it is worked out when read (StoreOfferReadiness).
    state text NOT NULL DEFAULT 'creating' CHECK (state IN ('creating', 'waitingForApple', 'failed')),
    offer_name text NOT NULL UNIQUE,
    offer_id text,
    custom_code_id text,
    message text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    code_created_at timestamptz,
    first_purchase_at timestamptz,
    -- when coupons asked grants to switch the offer off
    switched_off_at timestamptz,
    PRIMARY KEY (coupon_id, store, product_id),
    CHECK (state <> 'waitingForApple' OR code_created_at IS NOT NULL)
);

ALTER TABLE redemptions ALTER COLUMN account_id DROP NOT NULL, ALTER COLUMN app_user_id DROP NOT NULL,
    ADD COLUMN app_account_token uuid;
ALTER TABLE redemptions ADD CONSTRAINT redemptions_account_whole CHECK ((account_id IS NULL) = (app_user_id IS NULL)) NOT VALID;
ALTER TABLE redemptions ADD CONSTRAINT redemptions_unattributed_completed CHECK (account_id IS NOT NULL OR completed_at IS NOT NULL) NOT VALID;
-- Only redemptions that go through the App Store have a token: Apple's notification finds
-- its reservation by it, and a full cap looks for reservations still waiting for Apple.
CREATE INDEX redemptions_app_account_token ON redemptions (app_account_token, coupon_id) WHERE app_account_token IS NOT NULL;
CREATE INDEX redemptions_through_app_store ON redemptions (coupon_id) WHERE app_account_token IS NOT NULL;

CREATE TABLE store_purchases (
    store text NOT NULL CHECK (store IN ('appStore')),
    original_transaction_id text NOT NULL CHECK (length(original_transaction_id) BETWEEN 1 AND 200),
    transaction_id text NOT NULL,
    coupon_id uuid NOT NULL REFERENCES coupons(id),
    redemption_id uuid NOT NULL UNIQUE REFERENCES redemptions(id),
    -- who was matched or posted it (the redemption may still be unattributed)
    account_id uuid,
    app_account_token uuid,
    product_id text NOT NULL,
    store_product_id text NOT NULL,
    offer_name text NOT NULL,
    price_milliunits bigint CHECK (price_milliunits >= 0),
    currency text CHECK (currency ~ '^[A-Z]{3}$'),
    sandbox boolean NOT NULL,
    over_cap boolean NOT NULL DEFAULT false,
    purchase_date timestamptz NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (store, original_transaction_id),
    CHECK (NOT (over_cap AND sandbox))
);
CREATE INDEX store_purchases_coupon ON store_purchases (coupon_id) WHERE over_cap;

CREATE TABLE store_notifications (
    notification_uuid text PRIMARY KEY CHECK (length(notification_uuid) BETWEEN 1 AND 100),
    received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX store_notifications_received ON store_notifications (received_at);

COMMENT ON COLUMN outbox.redemption_id IS
    'the message''s key: its redemption, or for a store command a key derived from (command, coupon, store, plan)';
