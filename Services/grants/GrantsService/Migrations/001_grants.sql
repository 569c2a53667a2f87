CREATE TABLE grants (
    redemption_id uuid PRIMARY KEY,
    account_id uuid NOT NULL,
    app_user_id text NOT NULL,
    entitlement_id text NOT NULL,
    sandbox boolean NOT NULL,
    provider text NOT NULL,
    start_time timestamptz NOT NULL,
    -- computed once when the command is stored, reused by every attempt
    end_time timestamptz NOT NULL,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
    attempts int NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    failure_reason text,
    command text NOT NULL,
    coupons_notified boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    settled_at timestamptz
);
CREATE INDEX grants_due ON grants (next_attempt_at) WHERE status = 'pending' OR NOT coupons_notified;
CREATE INDEX grants_holder ON grants (app_user_id, entitlement_id, sandbox, end_time);

CREATE TABLE webhook_endpoints (
    id uuid PRIMARY KEY,
    url text NOT NULL,
    events text[] NOT NULL,
    secret text NOT NULL,
    active boolean NOT NULL DEFAULT true,
    created_at timestamptz NOT NULL DEFAULT now(),
    disabled_at timestamptz,
    disabled_reason text
);

CREATE TABLE webhook_deliveries (
    id uuid PRIMARY KEY,
    endpoint_id uuid NOT NULL REFERENCES webhook_endpoints(id),
    webhook_id text NOT NULL,
    type text NOT NULL,
    payload text NOT NULL,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts int NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_status_code int,
    last_error text,
    created_at timestamptz NOT NULL DEFAULT now(),
    delivered_at timestamptz,
    UNIQUE (endpoint_id, webhook_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, created_at DESC, id DESC);
