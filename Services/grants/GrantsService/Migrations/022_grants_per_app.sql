-- A grant is an entitlement in one app (docs/apps.md): the app of its redemption's coupon. An
-- account is shared by every app, so its periods run per app: a holder's grant of an entitlement
-- starts where its latest one in the same app ends. Grants from before apps are the default app's.
ALTER TABLE grants ADD COLUMN app_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001';
DROP INDEX grants_holder;
CREATE INDEX grants_holder ON grants (app_user_id, app_id, entitlement_id, sandbox, end_time);
