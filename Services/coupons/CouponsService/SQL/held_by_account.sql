-- The redemptions that hold a use of one of `coupons` (a batch's coupon, live and test), of each
-- account asked about: one probe of `redemptions_one_use` per account, however many other
-- coupons the account has redeemed.
CREATE OR REPLACE FUNCTION held_by_account(accounts uuid[], coupons uuid[]) RETURNS SETOF coupons.redemptions
LANGUAGE plpgsql STABLE SET enable_seqscan = off AS $$
BEGIN
    RETURN QUERY SELECT r.* FROM unnest(accounts) AS a(account)
        CROSS JOIN LATERAL (SELECT * FROM coupons.redemptions x
                            WHERE x.account_id = a.account AND x.coupon_id = ANY(coupons) AND x.holds_use OFFSET 0) r;
END $$;
