-- The store and RevenueCat settings of apps other than the default one (docs/apps.md), one row per
-- app, mode and provider: the fields that are not secret as JSON, and the secret ones as one JSON
-- object sealed with AES-256-GCM under REDEEM_SECRET_KEY (base64, with the id of the key), bound
-- to the row by its app, mode and provider. The default app's settings are the environment's and
-- are never stored. `version` grows with each change, so a cached provider notices it.
CREATE TABLE app_store_settings (
    app_id uuid NOT NULL CHECK (app_id <> '00000000-0000-0000-0000-000000000001'),
    mode text NOT NULL CHECK (mode IN ('live', 'test')),
    provider text NOT NULL CHECK (provider IN ('appstore', 'googleplay', 'stripe', 'revenuecat')),
    settings jsonb NOT NULL CHECK (jsonb_typeof(settings) = 'object'),
    secret text NOT NULL CHECK (secret <> ''),
    secret_key_id text NOT NULL,
    secret_ending text NOT NULL CHECK (length(secret_ending) <= 4),
    version bigint NOT NULL DEFAULT 1 CHECK (version > 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, mode, provider)
);
