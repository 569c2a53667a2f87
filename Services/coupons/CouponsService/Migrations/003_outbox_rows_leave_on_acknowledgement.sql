-- Acknowledged outbox rows are deleted at once (they were marked, then pruned an hour later).
DELETE FROM outbox WHERE acked_at IS NOT NULL;
DROP INDEX outbox_pending;
ALTER TABLE outbox DROP COLUMN acked_at;
CREATE INDEX outbox_due ON outbox (next_attempt_at);
