-- The redemptions that hold a use of one of `coupons` (a batch's coupon, live and test), of each
-- account asked about: one probe of `redemptions_one_use` per account and coupon, however many
-- other coupons the account has redeemed and however many redemptions the coupon has.
-- The coupon is joined, not given as a list: against a list of values, the planner estimates a
-- coupon the statistics have not seen (a new code, minutes into its flash sale) at one row, and
-- once took `redemptions_coupon` and read every redemption of the coupon for each account.
-- Its plan is generic, made once per connection: with the arrays' values the planner planned it
-- again at every call (170 to 195 µs, more than the lookup's 90 to 105), and the plan is one
-- probe per account and coupon whatever the values (docs/performance.md, "Session 35").
CREATE OR REPLACE FUNCTION held_by_account(accounts uuid[], coupons uuid[]) RETURNS SETOF coupons.redemptions
LANGUAGE plpgsql STABLE SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN QUERY SELECT r.* FROM unnest(accounts) AS a(account)
        CROSS JOIN (SELECT DISTINCT u.coupon FROM unnest(coupons) AS u(coupon)) c
        CROSS JOIN LATERAL (SELECT * FROM coupons.redemptions x
                            WHERE x.account_id = a.account AND x.coupon_id = c.coupon AND x.holds_use OFFSET 0) r;
END $$;
