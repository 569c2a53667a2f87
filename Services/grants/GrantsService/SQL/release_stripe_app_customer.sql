-- Gives up a claim on an app's Stripe customer whose making failed, so the next checkout claims at once.
CREATE OR REPLACE FUNCTION release_stripe_app_customer(account uuid, customer_app uuid, customer_mode text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE grants.stripe_app_customers s SET claimed_until = now() - interval '1 second'
    WHERE s.account_id = account AND s.app_id = customer_app AND s.mode = customer_mode AND s.customer_id IS NULL;
END $$;
