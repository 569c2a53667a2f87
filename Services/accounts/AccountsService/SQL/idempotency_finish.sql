-- Keeps the sealed answer of a request that claimed its Idempotency-Key, for the rest of the
-- key's life; false when the key is no longer held (it expired and was pruned).
CREATE OR REPLACE FUNCTION idempotency_finish(p_scope text, p_key text, p_response bytea, p_key_id text)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE accounts.idempotency_keys k SET response = p_response, key_id = p_key_id, locked_until = NULL
    WHERE k.scope = p_scope AND k.key = p_key AND k.response IS NULL;
    RETURN FOUND;
END $$;
