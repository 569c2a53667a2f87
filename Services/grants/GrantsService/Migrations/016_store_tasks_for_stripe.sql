-- Stripe's coupon and promotion code (docs/stripe.md) are store tasks too: one per coupon
-- (product_id ''), reported as waitingForStripe. A Stripe task of test mode is not simulated:
-- it is sent to Stripe with the test key (Stripe's own test mode).
ALTER TABLE store_tasks DROP CONSTRAINT store_tasks_report_check;
ALTER TABLE store_tasks ADD CONSTRAINT store_tasks_report_check
    CHECK (report IN ('waitingForApple', 'waitingForGoogle', 'waitingForStripe', 'failed'));
