-- The accounts asked about that completed a live redemption already (not new customers).
CREATE OR REPLACE FUNCTION veterans_by_account(accounts uuid[]) RETURNS SETOF uuid
LANGUAGE plpgsql STABLE SET enable_seqscan = off AS $$
BEGIN
    RETURN QUERY SELECT a.account FROM unnest(accounts) AS a(account)
        CROSS JOIN LATERAL (SELECT 1 FROM coupons.redemptions r WHERE r.account_id = a.account AND r.holds_use
                            AND r.status = 'completed' AND NOT r.sandbox LIMIT 1) done;
END $$;
