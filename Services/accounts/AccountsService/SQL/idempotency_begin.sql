-- Claims an Idempotency-Key for a request (`IdempotencyStore.begin`). Answers one row:
-- `started` (the caller runs the request and then answers or releases the key), `replay` with the
-- sealed answer of the first request, `mismatch` (the key came with another request) or `inFlight`
-- (the first request is still running). A key whose lock lapsed (its gateway went away) is taken
-- over; an expired key is as good as new.
CREATE OR REPLACE FUNCTION idempotency_begin(p_scope text, p_key text, p_hash bytea, p_lock_seconds integer,
                                             p_keep_seconds integer)
RETURNS TABLE (outcome text, response bytea, key_id text)
LANGUAGE plpgsql AS $$
DECLARE
    found_row accounts.idempotency_keys%ROWTYPE;
BEGIN
    FOR attempt IN 1..3 LOOP
        DELETE FROM accounts.idempotency_keys k WHERE k.scope = p_scope AND k.key = p_key AND k.expires_at <= now();
        INSERT INTO accounts.idempotency_keys (scope, key, request_hash, locked_until, expires_at)
        VALUES (p_scope, p_key, p_hash, now() + make_interval(secs => p_lock_seconds), now() + make_interval(secs => p_keep_seconds))
        ON CONFLICT ON CONSTRAINT idempotency_keys_pkey DO NOTHING;
        IF FOUND THEN
            RETURN QUERY SELECT 'started'::text, NULL::bytea, NULL::text;
            RETURN;
        END IF;
        SELECT * INTO found_row FROM accounts.idempotency_keys k WHERE k.scope = p_scope AND k.key = p_key FOR UPDATE;
        IF FOUND THEN
            IF found_row.request_hash <> p_hash THEN
                RETURN QUERY SELECT 'mismatch'::text, NULL::bytea, NULL::text;
            ELSIF found_row.response IS NOT NULL THEN
                RETURN QUERY SELECT 'replay'::text, found_row.response, found_row.key_id;
            ELSIF found_row.locked_until > clock_timestamp() THEN
                RETURN QUERY SELECT 'inFlight'::text, NULL::bytea, NULL::text;
            ELSE
                UPDATE accounts.idempotency_keys k SET locked_until = now() + make_interval(secs => p_lock_seconds)
                WHERE k.scope = p_scope AND k.key = p_key;
                RETURN QUERY SELECT 'started'::text, NULL::bytea, NULL::text;
            END IF;
            RETURN;
        END IF;
        -- Released between the insert and the read: claim it again.
    END LOOP;
    RETURN QUERY SELECT 'inFlight'::text, NULL::bytea, NULL::text;
END $$;
