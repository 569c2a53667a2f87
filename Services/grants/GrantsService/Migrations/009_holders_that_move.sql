-- Issue 22 §1. An account that adopts its CloudKit record name moves its grants to it:
-- `holder_moves` maps the id it left to the one it took (a command still naming the old id
-- is stored under the new one), and `transfers` grants each moved period again, with the
-- same end, at the provider under the new id. `store_round` answers the id it stored.
CREATE TABLE holder_moves (
    from_app_user_id text PRIMARY KEY,
    to_app_user_id text NOT NULL,
    account_id uuid NOT NULL,
    moved_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX holder_moves_to ON holder_moves (to_app_user_id);
CREATE INDEX grants_account ON grants (account_id, app_user_id);
CREATE TABLE transfers (
    redemption_id uuid NOT NULL REFERENCES grants(redemption_id),
    app_user_id text NOT NULL,
    entitlement_id text NOT NULL,
    provider text NOT NULL,
    end_time timestamptz NOT NULL,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed', 'cancelled')),
    attempts int NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error text,
    created_at timestamptz NOT NULL DEFAULT now(),
    settled_at timestamptz,
    PRIMARY KEY (redemption_id, app_user_id)
);
CREATE INDEX transfers_due ON transfers (next_attempt_at) WHERE status = 'pending';
DROP FUNCTION IF EXISTS store_round(json);
