-- Each webhook endpoint belongs to one app (docs/apps.md), as it belongs to one mode; endpoints
-- from before apps are the default app's.
ALTER TABLE webhook_endpoints ADD COLUMN app_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001';
