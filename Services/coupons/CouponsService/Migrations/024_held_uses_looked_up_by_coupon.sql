-- A batch looks up the uses its accounts hold of its own coupon, not every use they hold: an
-- account's history no longer costs each reservation a row per earlier redemption. The lookup
-- takes the coupons as a second argument (SQL/held_by_account.sql); the one-argument form goes.
DROP FUNCTION IF EXISTS held_by_account(uuid[]);
