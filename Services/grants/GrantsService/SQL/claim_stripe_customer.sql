-- The account's Stripe customer in a mode, claimed for making when there is none: answers the
-- customer once made (`made`), else whether this caller now holds the claim (`claimed`) for
-- `lease_seconds`. A claim whose lease ran out is taken over; a live one is left to its holder.
CREATE OR REPLACE FUNCTION claim_stripe_customer(account uuid, customer_mode text, lease_seconds double precision)
RETURNS TABLE (made text, claimed boolean)
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO grants.stripe_customers AS s (account_id, mode, customer_id, claimed_until)
    VALUES (account, customer_mode, NULL, now() + make_interval(secs => lease_seconds))
    ON CONFLICT (account_id, mode) DO UPDATE SET claimed_until = now() + make_interval(secs => lease_seconds)
    WHERE s.customer_id IS NULL AND s.claimed_until < now();
    IF FOUND THEN
        RETURN QUERY SELECT NULL::text, true;
        RETURN;
    END IF;
    RETURN QUERY SELECT s.customer_id, false FROM grants.stripe_customers s
    WHERE s.account_id = account AND s.mode = customer_mode;
END $$;
