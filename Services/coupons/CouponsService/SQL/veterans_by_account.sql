-- The previous release's form of veterans_by_account_in_app, which asks across every app. This build
-- no longer calls it; it stays so that a coupons instance of the previous release keeps redeeming
-- during a rolling upgrade, and goes in the next release (docs/upgrading.md).
CREATE OR REPLACE FUNCTION veterans_by_account(accounts uuid[]) RETURNS SETOF uuid
LANGUAGE plpgsql STABLE SET enable_seqscan = off AS $$
BEGIN
    RETURN QUERY SELECT a.account FROM unnest(accounts) AS a(account)
        CROSS JOIN LATERAL (SELECT 1 FROM coupons.redemptions r WHERE r.account_id = a.account AND r.holds_use
                            AND r.status = 'completed' AND NOT r.sandbox LIMIT 1) done;
END $$;
