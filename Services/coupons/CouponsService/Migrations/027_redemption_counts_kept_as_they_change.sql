-- `redeem_redemptions{status,platform}` read every 15 s by every instance, where it counted the
-- whole table (GROUP BY status, platform): 0.66 s of PostgreSQL at 1.5 million redemptions, and
-- more with every one. The counts are now kept as redemptions change: each statement that inserts,
-- updates or deletes redemptions adds its net change per status and platform to
-- `redemption_count_changes` (an insert: no row is locked, so writers never wait on each other),
-- and `fold_redemption_counts()` moves those into `redemption_counts`. A count is the sum of both.
CREATE TABLE redemption_counts (
    status text NOT NULL,
    platform text NOT NULL,
    n bigint NOT NULL,
    PRIMARY KEY (status, platform)
);
CREATE TABLE redemption_count_changes (
    status text NOT NULL,
    platform text NOT NULL,
    n bigint NOT NULL
);
-- Replaced in this transaction by SQL/count_redemption_changes.sql, which the triggers run.
CREATE FUNCTION count_redemption_changes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER redemptions_counted_on_insert AFTER INSERT ON redemptions
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_redemption_changes();
CREATE TRIGGER redemptions_counted_on_update AFTER UPDATE ON redemptions
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_redemption_changes();
CREATE TRIGGER redemptions_counted_on_delete AFTER DELETE ON redemptions
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION count_redemption_changes();
CREATE TRIGGER redemptions_counted_on_truncate AFTER TRUNCATE ON redemptions
    FOR EACH STATEMENT EXECUTE FUNCTION count_redemption_changes();
-- The triggers hold the table from here to this transaction's end: what is there now is counted
-- once, and what changes after it, by the triggers.
INSERT INTO redemption_counts (status, platform, n)
SELECT status, platform, count(*) FROM redemptions GROUP BY status, platform;
