-- Completes granted redemptions (a repeat changes nothing) and answers when each was
-- completed, kept to the millisecond the wire carries so grants' webhook rounds the same value.
CREATE OR REPLACE FUNCTION complete_many_at(ids uuid[], entitlements text[], expiries timestamptz[])
    RETURNS TABLE (id uuid, completed_at timestamptz)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    UPDATE coupons.redemptions r SET
        status = CASE WHEN r.status IN ('reserved', 'granting') THEN 'completed' ELSE r.status END,
        completed_at = CASE WHEN r.status IN ('reserved', 'granting') THEN date_trunc('milliseconds', now()) ELSE r.completed_at END,
        entitlement_id = CASE WHEN r.status IN ('reserved', 'granting')
            THEN entitlements[array_position(ids, r.id)] ELSE r.entitlement_id END,
        entitlement_expires_at = CASE WHEN r.status IN ('reserved', 'granting')
            THEN expiries[array_position(ids, r.id)] ELSE r.entitlement_expires_at END,
        reservation_expires_at = CASE WHEN r.status IN ('reserved', 'granting') THEN NULL ELSE r.reservation_expires_at END
    WHERE r.id = ANY(ids)
    RETURNING r.id, r.completed_at;
END $$;
