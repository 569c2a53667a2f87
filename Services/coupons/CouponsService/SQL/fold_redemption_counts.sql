-- Moves the changes counted since the last fold into `redemption_counts` (migration 027), and
-- answers the counts. Two instances may fold at once: a change row is deleted, and so added, by one
-- of them only, and the counts' rows are updated in one order.
CREATE OR REPLACE FUNCTION fold_redemption_counts() RETURNS TABLE (status text, platform text, n bigint)
LANGUAGE plpgsql AS $$
BEGIN
    WITH moved AS (
        DELETE FROM coupons.redemption_count_changes RETURNING redemption_count_changes.status,
            redemption_count_changes.platform, redemption_count_changes.n
    )
    INSERT INTO coupons.redemption_counts AS c (status, platform, n)
    SELECT m.status, m.platform, sum(m.n) FROM moved m GROUP BY m.status, m.platform ORDER BY m.status, m.platform
    ON CONFLICT ON CONSTRAINT redemption_counts_pkey DO UPDATE SET n = c.n + excluded.n;
    RETURN QUERY SELECT c.status, c.platform, c.n FROM coupons.redemption_counts c WHERE c.n <> 0
        ORDER BY c.status, c.platform;
END $$;
