-- An outbox row is keyed by its redemption and type, and written in that redemption's own
-- transaction: the serial id (an index and a sequence) and the foreign key (a lookup and a
-- lock on the new redemption, per message) guarded nothing those do not.
ALTER TABLE outbox DROP CONSTRAINT outbox_redemption_id_fkey;
ALTER TABLE outbox DROP CONSTRAINT outbox_pkey, DROP COLUMN id;
ALTER TABLE outbox DROP CONSTRAINT outbox_redemption_id_type_key, ADD PRIMARY KEY (redemption_id, type);
