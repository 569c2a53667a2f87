-- An offer is switched off and back on as often as coupons asks (coupons migration 13), each
-- switch a task of its own with coupons' count (`generation`), run in that order.
ALTER TABLE store_tasks ADD COLUMN generation int NOT NULL DEFAULT 0;
ALTER TABLE store_tasks DROP CONSTRAINT store_tasks_action_check;
ALTER TABLE store_tasks ADD CONSTRAINT store_tasks_action_check CHECK (action IN ('provision', 'switchOff', 'switchOn'));
ALTER TABLE store_tasks DROP CONSTRAINT store_tasks_coupon_id_store_product_id_action_key;
ALTER TABLE store_tasks ADD CONSTRAINT store_tasks_offer_action_generation UNIQUE (coupon_id, store, product_id, action, generation);
-- a switch's PATCH of the code, and of the offer, is done
ALTER TABLE store_tasks RENAME COLUMN code_switched_off TO code_switched;
ALTER TABLE store_tasks RENAME COLUMN offer_switched_off TO offer_switched;
CREATE INDEX store_tasks_switches ON store_tasks (coupon_id, store, product_id, generation) WHERE action <> 'provision';
