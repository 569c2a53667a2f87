-- The accounts asked about that completed a live redemption of a coupon of the app already (not its
-- new customers). An account is shared by every app: one that redeemed in another app only is still
-- a new customer of this one. One probe of the account's held uses, then each one's coupon by key (a
-- subquery, so that it stays a probe by key however few coupons there are when the plan is made).
-- Its plan is generic, made once per connection, as held_by_account's is (planned again at each
-- call, it cost more than the lookup it plans: docs/performance.md, "Session 35").
CREATE OR REPLACE FUNCTION veterans_by_account_in_app(accounts uuid[], wanted_app uuid) RETURNS SETOF uuid
LANGUAGE plpgsql STABLE SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN QUERY SELECT a.account FROM unnest(accounts) AS a(account)
        CROSS JOIN LATERAL (SELECT 1 FROM coupons.redemptions r
                            WHERE r.account_id = a.account AND r.holds_use AND r.status = 'completed' AND NOT r.sandbox
                            AND (SELECT c.app_id FROM coupons.coupons c WHERE c.id = r.coupon_id) = wanted_app
                            LIMIT 1) done;
END $$;
