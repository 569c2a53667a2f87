-- The one-use index leads with the account, so every lookup of "does this account hold
-- this coupon" (one account or a batch of them) is a descent by account. Led by the coupon,
-- a planner working from statistics that lag behind a burst of inserts read all of a hot
-- coupon's redemptions, or the whole index, once per batch.
CREATE UNIQUE INDEX redemptions_one_active_by_account ON redemptions (account_id, coupon_id, sandbox)
    WHERE status IN ('reserved', 'granting', 'completed');
DROP INDEX redemptions_one_active;
ALTER INDEX redemptions_one_active_by_account RENAME TO redemptions_one_active;
