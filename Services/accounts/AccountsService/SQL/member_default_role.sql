-- Keeps `members.role` the member's role in the default app (NULL without one) as `member_apps`
-- changes. The previous release's pods read that column at every sign-in during a rolling upgrade
-- (docs/upgrading.md); this build reads `member_apps` only. The column, this function and its
-- trigger go in the next release.
CREATE OR REPLACE FUNCTION member_default_role() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    member uuid := CASE WHEN TG_OP = 'DELETE' THEN OLD.account_id ELSE NEW.account_id END;
BEGIN
    UPDATE accounts.members m SET role = (SELECT a.role FROM accounts.member_apps a
                                          WHERE a.account_id = member AND a.app_id = '00000000-0000-0000-0000-000000000001')
    WHERE m.account_id = member;
    RETURN NULL;
END $$;
