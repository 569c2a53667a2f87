-- Completed redemptions of one app and mode since a time, counted by day (UTC), platform and code, with
-- sandbox ones apart: what the dashboard's overview draws (`RedemptionStatsReport`).
CREATE OR REPLACE FUNCTION redemption_stats(p_mode text, p_since timestamptz, p_app uuid)
RETURNS TABLE (day text, platform text, code text, sandbox boolean, redemptions bigint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY SELECT to_char(r.completed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), r.platform, c.code, r.sandbox, count(*)
        FROM coupons.redemptions r JOIN coupons.coupons c ON c.id = r.coupon_id
        WHERE c.mode = p_mode AND c.app_id = p_app AND r.status = 'completed' AND r.completed_at >= p_since
        GROUP BY 1, 2, 3, 4;
END $$;
