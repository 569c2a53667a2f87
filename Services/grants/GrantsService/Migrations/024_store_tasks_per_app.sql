-- A store task belongs to its coupon's app (docs/apps.md): the default app's are made with the
-- environment's store settings, another app's with its own (grants.app_store_settings). A task
-- stored before is the default app's, the only one that made offers then.
ALTER TABLE store_tasks ADD COLUMN app_id uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001';
