-- App Store offers and their custom codes (docs/stores.md, "Grants and Apple's APIs"): one task
-- per (coupon, store, plan, action), so a command coupons' outbox sends again is stored once.
-- Each id Apple gives is recorded as it is learned, before the next call; `lease_token` is
-- the claim's, so an instance whose lease ran out cannot record over the one that took over.
CREATE TABLE store_tasks (
    id uuid PRIMARY KEY,
    coupon_id uuid NOT NULL,
    store text NOT NULL,
    product_id text NOT NULL,
    action text NOT NULL CHECK (action IN ('provision', 'switchOff')),
    command text NOT NULL,
    subscription_id text,
    offer_name text NOT NULL,
    -- the coupon's code, the custom code (upper case): Apple takes one once per app
    code text NOT NULL,
    offer_id text,
    custom_code_id text,
    code_created_at timestamptz,
    code_switched_off boolean NOT NULL DEFAULT false,
    offer_switched_off boolean NOT NULL DEFAULT false,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'reporting', 'done', 'failed')),
    report text CHECK (report IN ('waitingForApple', 'failed')),
    attempts int NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    lease_token uuid,
    last_error text,
    created_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    UNIQUE (coupon_id, store, product_id, action)
);
CREATE INDEX store_tasks_due ON store_tasks (next_attempt_at) WHERE status IN ('pending', 'reporting');
CREATE INDEX store_tasks_subscription ON store_tasks (subscription_id) WHERE action = 'provision';
CREATE INDEX store_tasks_code ON store_tasks (code) WHERE action = 'provision';
