-- Stripe checkout of apps other than the default one (docs/apps.md). An account's Stripe customer
-- in such an app's own Stripe account, one per account, app and mode (a customer of one Stripe
-- account is unknown to another), claimed and recorded as `stripe_customers`' are; the default
-- app's stay in `stripe_customers`, which the previous release's pods keep using.
CREATE TABLE stripe_app_customers (
    account_id uuid NOT NULL,
    app_id uuid NOT NULL CHECK (app_id <> '00000000-0000-0000-0000-000000000001'),
    mode text NOT NULL CHECK (mode IN ('live', 'test')),
    customer_id text CHECK (customer_id ~ '^cus_[A-Za-z0-9_]{1,200}$'),
    claimed_until timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, app_id, mode),
    CONSTRAINT stripe_app_customers_made_or_claimed CHECK (customer_id IS NOT NULL OR claimed_until IS NOT NULL)
);
-- A receipt belongs to its coupon's app: the default app's go to the environment's RevenueCat
-- project, another app's to its own (its `revenuecat` settings' Stripe public key).
ALTER TABLE stripe_receipts ADD COLUMN app_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001';
