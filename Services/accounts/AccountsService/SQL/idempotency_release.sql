-- Lets go of a claimed Idempotency-Key without an answer to keep (the request was refused before
-- it ran, or failed on Redeem's side): the next request with the key runs.
CREATE OR REPLACE FUNCTION idempotency_release(p_scope text, p_key text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM accounts.idempotency_keys k WHERE k.scope = p_scope AND k.key = p_key AND k.response IS NULL;
END $$;
