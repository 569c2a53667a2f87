-- Records the customer an app's Stripe account made for a claim and ends the claim; answers the
-- account's customer there, the one recorded first should two have been recorded.
CREATE OR REPLACE FUNCTION record_stripe_app_customer(
    account uuid, customer_app uuid, customer_mode text, customer text
) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE grants.stripe_app_customers s SET customer_id = customer, claimed_until = NULL
    WHERE s.account_id = account AND s.app_id = customer_app AND s.mode = customer_mode AND s.customer_id IS NULL;
    RETURN (SELECT s.customer_id FROM grants.stripe_app_customers s
            WHERE s.account_id = account AND s.app_id = customer_app AND s.mode = customer_mode);
END $$;
