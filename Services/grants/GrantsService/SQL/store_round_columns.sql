-- Stores one round of grant commands (at most one per holder and entitlement, see
-- `GrantLedger.store`), given as one array per column, element i of each being command i: each
-- period starts where the holder's latest one in the same app ends, or now, and an entitlement
-- ends by 9999-12-31T23:59:59.999Z at the latest, the last instant ISO 8601's four-digit years
-- write. A command stored before changes nothing. A command naming an id its account has left
-- (`holder_moves`: one account on every platform) is stored under the id the account moved to;
-- the function answers the id each grant holds.
-- The ledger sends the arrays in PostgreSQL's binary format (`PGBinaryArray`), so neither side
-- writes or parses the commands' text as JSON. `store_round(json)`, the same with the round as one
-- JSON array, stays for the previous release's grants (docs/upgrading.md).
CREATE OR REPLACE FUNCTION store_round_columns(ids uuid[], accounts uuid[], apps text[], ents text[], sandboxes boolean[],
                                               providers text[], years bigint[], months bigint[], weeks bigint[], days bigint[],
                                               commands text[], leases float8[], in_apps uuid[])
    RETURNS TABLE (redemption_id uuid, end_time timestamptz, attempts int, app_user_id text)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    INSERT INTO grants.grants AS g (redemption_id, account_id, app_user_id, entitlement_id, sandbox, provider, start_time, end_time,
                                    command, attempts, next_attempt_at, app_id)
    SELECT u.id, u.account, h.app, u.ent, u.sandbox, u.provider, s.start,
           least(s.start + make_interval(years => u.years::int, months => u.months::int, weeks => u.weeks::int, days => u.days::int),
                 '9999-12-31 23:59:59.999+00'),
           u.command, CASE WHEN u.lease IS NULL THEN 0 ELSE 1 END, now() + make_interval(secs => coalesce(u.lease, 0)),
           coalesce(u.in_app, '00000000-0000-0000-0000-000000000001')
    FROM unnest(ids, accounts, apps, ents, sandboxes, providers, years, months, weeks, days, commands, leases, in_apps)
        AS u(id, account, app, ent, sandbox, provider, years, months, weeks, days, command, lease, in_app)
    CROSS JOIN LATERAL (SELECT coalesce((SELECT m.to_app_user_id FROM grants.holder_moves m WHERE m.from_app_user_id = u.app), u.app) AS app) h
    CROSS JOIN LATERAL (
        SELECT date_trunc('milliseconds', least(greatest(now(), coalesce(max(x.end_time), now())), '9999-12-31 23:59:59.999+00')) AS start
        FROM grants.grants x WHERE x.app_user_id = h.app AND x.app_id = coalesce(u.in_app, '00000000-0000-0000-0000-000000000001')
            AND x.entitlement_id = u.ent AND x.sandbox = u.sandbox AND x.status <> 'failed'
    ) s
    ON CONFLICT (redemption_id) DO NOTHING
    RETURNING g.redemption_id, g.end_time, g.attempts, g.app_user_id;
END $$;
