-- Stripe checkout (docs/stripe.md). An account's Stripe customer, one per mode (a test key's
-- customers are not the live key's), made at its first checkout and reused.
CREATE TABLE stripe_customers (
    account_id uuid NOT NULL,
    mode text NOT NULL CHECK (mode IN ('live', 'test')),
    customer_id text NOT NULL CHECK (customer_id ~ '^cus_[A-Za-z0-9_]{1,200}$'),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, mode)
);
-- The receipt RevenueCat is told of once a checkout completed: one per subscription (and per
-- redemption), stored with the coupon.redeemed webhook in the transaction that takes
-- coupons' completion notice, then sent until RevenueCat takes it. `next_attempt_at` is also the
-- claim's lease: a grants killed mid-call leaves it due again once the lease runs out.
CREATE TABLE stripe_receipts (
    subscription_id text PRIMARY KEY CHECK (subscription_id ~ '^[A-Za-z0-9_]{1,200}$'),
    redemption_id uuid NOT NULL UNIQUE,
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
CREATE INDEX stripe_receipts_due ON stripe_receipts (next_attempt_at) WHERE status = 'pending';
