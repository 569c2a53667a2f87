-- A Google Play offer is made per base plan; the App Store's tasks have none ('').
ALTER TABLE store_tasks ADD COLUMN base_plan_id text NOT NULL DEFAULT '';
ALTER TABLE store_tasks DROP CONSTRAINT store_tasks_offer_action_generation;
ALTER TABLE store_tasks ADD CONSTRAINT store_tasks_offer_action_generation UNIQUE (coupon_id, store, product_id, base_plan_id, action, generation);
ALTER TABLE store_tasks DROP CONSTRAINT store_tasks_report_check;
ALTER TABLE store_tasks ADD CONSTRAINT store_tasks_report_check CHECK (report IN ('waitingForApple', 'waitingForGoogle', 'failed'));
