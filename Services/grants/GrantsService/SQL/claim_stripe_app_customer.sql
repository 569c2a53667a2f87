-- The account's Stripe customer in an app's own Stripe account and a mode, claimed for making when
-- there is none, as `claim_stripe_customer` does for the default app's: answers the customer once
-- made (`made`), else whether this caller now holds the claim (`claimed`) for `lease_seconds`.
CREATE OR REPLACE FUNCTION claim_stripe_app_customer(
    account uuid, customer_app uuid, customer_mode text, lease_seconds double precision
)
RETURNS TABLE (made text, claimed boolean)
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO grants.stripe_app_customers AS s (account_id, app_id, mode, customer_id, claimed_until)
    VALUES (account, customer_app, customer_mode, NULL, now() + make_interval(secs => lease_seconds))
    ON CONFLICT (account_id, app_id, mode) DO UPDATE SET claimed_until = now() + make_interval(secs => lease_seconds)
    WHERE s.customer_id IS NULL AND s.claimed_until < now();
    IF FOUND THEN
        RETURN QUERY SELECT NULL::text, true;
        RETURN;
    END IF;
    RETURN QUERY SELECT s.customer_id, false FROM grants.stripe_app_customers s
    WHERE s.account_id = account AND s.app_id = customer_app AND s.mode = customer_mode;
END $$;
