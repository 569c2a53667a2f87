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
-- The receipts of another app's Stripe checkouts, told to the app's own RevenueCat project (its
-- `revenuecat` settings' Stripe public key), kept and sent as `stripe_receipts` are. A table of
-- their own: the previous release's pods claim every pending row of `stripe_receipts` and would
-- send another app's receipt with the environment's key.
CREATE TABLE stripe_app_receipts (
    subscription_id text PRIMARY KEY CHECK (subscription_id ~ '^[A-Za-z0-9_]{1,200}$'),
    redemption_id uuid NOT NULL UNIQUE,
    app_id uuid NOT NULL CHECK (app_id <> '00000000-0000-0000-0000-000000000001'),
    app_user_id text NOT NULL CHECK (length(app_user_id) BETWEEN 1 AND 200),
    mode text NOT NULL CHECK (mode IN ('live', 'test')),
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed')),
    attempts int NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error text,
    created_at timestamptz NOT NULL DEFAULT now(),
    settled_at timestamptz,
    CHECK ((status = 'pending') = (settled_at IS NULL))
);
CREATE INDEX stripe_app_receipts_due ON stripe_app_receipts (next_attempt_at) WHERE status = 'pending';
