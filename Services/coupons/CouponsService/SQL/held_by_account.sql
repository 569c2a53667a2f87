-- The redemptions that hold a use, of each account asked about.
CREATE OR REPLACE FUNCTION held_by_account(accounts uuid[]) RETURNS SETOF coupons.redemptions
LANGUAGE plpgsql STABLE SET enable_seqscan = off AS $$
BEGIN
    RETURN QUERY SELECT r.* FROM unnest(accounts) AS a(account)
        CROSS JOIN LATERAL (SELECT * FROM coupons.redemptions x WHERE x.account_id = a.account AND x.holds_use OFFSET 0) r;
END $$;
