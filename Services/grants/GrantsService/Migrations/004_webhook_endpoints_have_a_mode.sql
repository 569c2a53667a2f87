-- Test mode and live mode are two worlds (SPEC §4.7): an endpoint belongs to the mode of the
-- key that made it and gets only the events of that mode's coupons; its deliveries are its
-- own. Endpoints made before were all live. From now on every insert names its mode.
ALTER TABLE webhook_endpoints ADD COLUMN mode text NOT NULL DEFAULT 'live' CHECK (mode IN ('live', 'test'));
ALTER TABLE webhook_endpoints ALTER COLUMN mode DROP DEFAULT;
