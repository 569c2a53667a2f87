-- A test coupon's store tasks are simulated (SimulatedStore) and never reach Apple or Google;
-- Apple's limits count the live tasks only. A task stored before is live: it reached the store,
-- so its switches must too.
ALTER TABLE store_tasks ADD COLUMN mode text NOT NULL DEFAULT 'live' CHECK (mode IN ('live', 'test'));
