-- Settles successful grants still pending, those in `told` marked as told to coupons (grants
-- passes none: it tells coupons after this commits); answers the ids it settled. The 5 s in
-- `next_attempt_at` is the notification lease.
CREATE OR REPLACE FUNCTION settle_succeeded(ids uuid[], told uuid[]) RETURNS SETOF uuid
LANGUAGE plpgsql SET enable_seqscan = off AS $$
BEGIN
    RETURN QUERY
    UPDATE grants.grants g SET status = 'succeeded', settled_at = now(), next_attempt_at = now() + interval '5 seconds',
        coupons_notified = g.redemption_id = ANY(told)
    WHERE g.redemption_id = ANY(ids) AND g.status = 'pending' RETURNING g.redemption_id;
END $$;
