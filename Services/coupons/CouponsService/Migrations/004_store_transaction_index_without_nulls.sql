-- Only discount purchases carry a store transaction: index those alone, so inserting and
-- completing a free-period redemption maintains one index fewer.
ALTER TABLE redemptions DROP CONSTRAINT redemptions_store_transaction_id_key;
CREATE UNIQUE INDEX redemptions_store_transaction_id_key ON redemptions (store_transaction_id)
    WHERE store_transaction_id IS NOT NULL;
