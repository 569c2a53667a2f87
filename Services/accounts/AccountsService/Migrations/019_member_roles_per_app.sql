-- Members have a role in each app they are in (docs/apps.md). `members` stays the list of operator
-- accounts (their second factor hangs off it); `member_apps` holds each member's role per app. A
-- member's role before apps becomes their role in the default app, so a deployment with one app
-- changes nothing. An invitation is to one app.
CREATE TABLE member_apps (
    account_id uuid NOT NULL REFERENCES members(account_id) ON DELETE CASCADE,
    app_id uuid NOT NULL REFERENCES apps(id),
    role text NOT NULL CHECK (role IN ('admin', 'support', 'readonly')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, app_id)
);
CREATE INDEX member_apps_app ON member_apps (app_id, created_at DESC, account_id DESC);
INSERT INTO member_apps (account_id, app_id, role, created_at)
    SELECT account_id, '00000000-0000-0000-0000-000000000001', role, created_at FROM members;
-- `members.role` stays for one release as the default app's role, kept so by a trigger, since the
-- previous release's pods read it at every sign-in (SQL/member_default_role.sql; the function is
-- made here so the trigger can name it, and the file gives it its body after the migrations).
ALTER TABLE members ALTER COLUMN role DROP NOT NULL;
CREATE FUNCTION member_default_role() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER member_default_role AFTER INSERT OR UPDATE OR DELETE ON member_apps
    FOR EACH ROW EXECUTE FUNCTION member_default_role();

ALTER TABLE member_invites ADD COLUMN app_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001' REFERENCES apps(id);
