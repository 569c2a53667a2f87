-- For a code's coupons in one app and each account: whether it holds a live use of the coupon
-- already, and whether it is not a new customer of the app (asked only of new-customer coupons). An
-- account is shared by every app; a coupon, and so its one use per account, is one app's, and an
-- account that redeemed in another app only is still a new customer of this one.
-- Its plan is generic, made once per connection, as held_by_account's is (planned again at each
-- call, it cost more than the lookup it plans: docs/performance.md, "Session 35").
CREATE OR REPLACE FUNCTION validate_standing_in_app(wanted_code text, accounts uuid[], wanted_app uuid)
    RETURNS TABLE (coupon coupons.coupons, account uuid, already boolean, not_new boolean)
LANGUAGE plpgsql STABLE SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN QUERY SELECT c, a.account, held.one IS NOT NULL, done.one IS NOT NULL
    FROM coupons.coupons c CROSS JOIN unnest(accounts) AS a(account)
    LEFT JOIN LATERAL (SELECT 1 AS one FROM coupons.redemptions r WHERE r.account_id = a.account AND r.coupon_id = c.id
                       AND NOT r.sandbox AND r.holds_use LIMIT 1) held ON true
    LEFT JOIN LATERAL (SELECT 1 AS one FROM coupons.redemptions r WHERE c.new_customers_only AND r.account_id = a.account
                       AND r.holds_use AND r.status = 'completed' AND NOT r.sandbox
                       AND (SELECT o.app_id FROM coupons.coupons o WHERE o.id = r.coupon_id) = c.app_id LIMIT 1) done ON true
    WHERE c.code = wanted_code AND c.app_id = wanted_app;
END $$;
