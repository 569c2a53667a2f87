-- An account's Stripe customer is claimed before Stripe is asked to make it, so two first
-- checkouts at once make one customer, not one each (docs/stripe.md): the first to insert the row
-- holds the claim until `claimed_until` and makes the customer; the others wait for the row to
-- name it. A claimant that dies leaves a claim that runs out, and the next checkout takes it over
-- (Stripe's Idempotency-Key, derived from the account and mode, then answers the same customer).
ALTER TABLE stripe_customers ALTER COLUMN customer_id DROP NOT NULL;
ALTER TABLE stripe_customers ADD COLUMN claimed_until timestamptz;
ALTER TABLE stripe_customers ADD CONSTRAINT stripe_customers_made_or_claimed
    CHECK (customer_id IS NOT NULL OR claimed_until IS NOT NULL);
