-- Each audit entry belongs to one app (docs/apps.md), as it belongs to one mode: an app's
-- operators read their own app's record only. Entries from before apps are the default app's.
ALTER TABLE audit_log ADD COLUMN app_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001';
CREATE INDEX audit_log_app_time ON audit_log (app_id, created_at DESC, id DESC);
