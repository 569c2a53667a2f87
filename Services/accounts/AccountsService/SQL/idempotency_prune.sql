-- Forgets Idempotency-Keys past their life (24 h); answers how many.
CREATE OR REPLACE FUNCTION idempotency_prune()
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    gone integer;
BEGIN
    DELETE FROM accounts.idempotency_keys k WHERE k.expires_at < now();
    GET DIAGNOSTICS gone = ROW_COUNT;
    RETURN gone;
END $$;
