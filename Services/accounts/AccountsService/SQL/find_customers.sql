-- The live accounts an operator looks up: the one holding an id (its appUserId, one it held
-- before, or a linked record name), and those whose email is the one given (any case), newest first.
CREATE OR REPLACE FUNCTION find_customers(p_app_user_id text, p_email text, p_limit integer)
RETURNS SETOF uuid
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY SELECT a.id FROM accounts.accounts a
        WHERE a.deleted_at IS NULL
          AND ((p_app_user_id IS NOT NULL
                AND (a.app_user_id = p_app_user_id
                     OR a.id = (SELECT u.account_id FROM accounts.user_ids u WHERE u.value = p_app_user_id)))
               OR (p_email IS NOT NULL AND lower(a.email) = lower(p_email)))
        ORDER BY a.created_at DESC, a.id
        LIMIT p_limit;
END $$;
