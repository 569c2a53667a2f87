-- The statement's net change of redemptions per status and platform, added to
-- `redemption_count_changes` (migration 027): one row per status and platform the statement
-- changed, whatever the number of redemptions. An update that changes neither adds nothing.
CREATE OR REPLACE FUNCTION count_redemption_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO coupons.redemption_count_changes (status, platform, n)
        SELECT status, platform, count(*) FROM new_rows GROUP BY status, platform;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO coupons.redemption_count_changes (status, platform, n)
        SELECT status, platform, sum(change) FROM (
            SELECT status, platform, -1 AS change FROM old_rows
            UNION ALL
            SELECT status, platform, 1 FROM new_rows
        ) c GROUP BY status, platform HAVING sum(change) <> 0;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO coupons.redemption_count_changes (status, platform, n)
        SELECT status, platform, -count(*) FROM old_rows GROUP BY status, platform;
    ELSE  -- TRUNCATE: nothing is left to count
        DELETE FROM coupons.redemption_count_changes;
        DELETE FROM coupons.redemption_counts;
    END IF;
    RETURN NULL;
END $$;
