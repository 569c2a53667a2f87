-- Apps (docs/apps.md): one deployment serves several apps, each with its own keys, coupons, plans
-- and webhooks. The default app (a fixed id) holds everything from before apps, so a deployment
-- with one app changes nothing. Accounts are not per app: a person has one.
CREATE TABLE apps (
    id uuid PRIMARY KEY,
    name text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
INSERT INTO apps (id, name) VALUES ('00000000-0000-0000-0000-000000000001', 'Default');

-- Each API key works in one app (and one mode); its app's objects are all it sees.
ALTER TABLE api_keys ADD COLUMN app_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001' REFERENCES apps(id);
