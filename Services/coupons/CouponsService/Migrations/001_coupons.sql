CREATE TABLE coupons (
    id uuid PRIMARY KEY,
    code text NOT NULL UNIQUE CHECK (code ~ '^[A-Z0-9_-]{3,64}$'),
    kind text NOT NULL CHECK (kind IN ('freePeriod', 'percentOff', 'amountOff')),
    percent_off int CHECK (percent_off BETWEEN 1 AND 100),
    amount_off numeric(12, 2) CHECK (amount_off > 0),
    currency text CHECK (currency ~ '^[A-Z]{3}$'),
    duration_unit text NOT NULL CHECK (duration_unit IN ('day', 'week', 'month', 'year')),
    duration_count int NOT NULL CHECK (duration_count >= 1),
    period_count int CHECK (period_count >= 1),
    entitlement_id text,
    product_ids text[] NOT NULL DEFAULT '{}',
    platforms text[] NOT NULL,
    starts_at timestamptz,
    expires_at timestamptz,
    max_redemptions int CHECK (max_redemptions >= 0),
    new_customers_only boolean NOT NULL DEFAULT false,
    active boolean NOT NULL DEFAULT true,
    mode text NOT NULL CHECK (mode IN ('live', 'test')),
    -- live uses held now: reserved, granting or completed (sandbox ones never count)
    used_count int NOT NULL DEFAULT 0 CHECK (used_count >= 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    CHECK (max_redemptions IS NULL OR used_count <= max_redemptions),
    CHECK ((kind = 'percentOff') = (percent_off IS NOT NULL)),
    CHECK ((kind = 'amountOff') = (amount_off IS NOT NULL AND currency IS NOT NULL))
);
CREATE INDEX coupons_created ON coupons (created_at DESC, id DESC);

CREATE TABLE redemptions (
    id uuid PRIMARY KEY,
    coupon_id uuid NOT NULL REFERENCES coupons(id),
    code text NOT NULL,
    account_id uuid NOT NULL,
    app_user_id text NOT NULL,
    platform text NOT NULL CHECK (platform IN ('ios', 'android', 'web')),
    product_id text,
    price_amount numeric(12, 2),
    price_currency text,
    store_transaction_id text UNIQUE,
    sandbox boolean NOT NULL,
    status text NOT NULL CHECK (status IN ('reserved', 'granting', 'completed', 'failed', 'released')),
    reserved_at timestamptz NOT NULL DEFAULT now(),
    reservation_expires_at timestamptz,
    completed_at timestamptz,
    ended_at timestamptz,
    failure_reason text,
    entitlement_id text,
    entitlement_expires_at timestamptz
);
-- One use per account per coupon (per environment) while it is held.
CREATE UNIQUE INDEX redemptions_one_active ON redemptions (coupon_id, account_id, sandbox)
    WHERE status IN ('reserved', 'granting', 'completed');
CREATE INDEX redemptions_coupon ON redemptions (coupon_id, reserved_at, id);
CREATE INDEX redemptions_account ON redemptions (account_id, reserved_at DESC);
CREATE INDEX redemptions_reserved_expiry ON redemptions (reservation_expires_at) WHERE status = 'reserved';

-- Grant commands, written in the reservation's transaction (transactional outbox).
CREATE TABLE outbox (
    id bigserial PRIMARY KEY,
    redemption_id uuid NOT NULL REFERENCES redemptions(id),
    type text NOT NULL,
    payload text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    attempts int NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    acked_at timestamptz,
    UNIQUE (redemption_id, type)
);
CREATE INDEX outbox_pending ON outbox (next_attempt_at) WHERE acked_at IS NULL;
