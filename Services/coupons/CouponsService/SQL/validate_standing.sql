-- The previous release's form of validate_standing_in_app, which reaches the default app's coupons
-- only. This build no longer calls it; it stays so that a coupons instance of the previous release
-- keeps validating during a rolling upgrade, and goes in the next release (docs/upgrading.md).
CREATE OR REPLACE FUNCTION validate_standing(wanted_code text, accounts uuid[])
    RETURNS TABLE (coupon coupons.coupons, account uuid, already boolean, not_new boolean)
LANGUAGE plpgsql STABLE SET enable_seqscan = off AS $$
BEGIN
    RETURN QUERY SELECT c, a.account, held.one IS NOT NULL, done.one IS NOT NULL
    FROM coupons.coupons c CROSS JOIN unnest(accounts) AS a(account)
    LEFT JOIN LATERAL (SELECT 1 AS one FROM coupons.redemptions r WHERE r.account_id = a.account AND r.coupon_id = c.id
                       AND NOT r.sandbox AND r.holds_use LIMIT 1) held ON true
    LEFT JOIN LATERAL (SELECT 1 AS one FROM coupons.redemptions r WHERE c.new_customers_only AND r.account_id = a.account
                       AND r.holds_use AND r.status = 'completed' AND NOT r.sandbox LIMIT 1) done ON true
    WHERE c.code = wanted_code AND c.app_id = '00000000-0000-0000-0000-000000000001';
END $$;
