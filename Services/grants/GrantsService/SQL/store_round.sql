-- `store_round_columns` with the round given as one JSON array of `GrantLedger.RoundItem` (a
-- period in one of `years`, `months`, `weeks` or `days`; `lease` and `in_app` may be absent). The
-- previous release's grants calls this form; this release's calls `store_round_columns`, whose
-- binary arrays neither side writes or parses as JSON. It goes in the next release
-- (docs/upgrading.md, "The compatibility window").
CREATE OR REPLACE FUNCTION store_round(items json)
    RETURNS TABLE (redemption_id uuid, end_time timestamptz, attempts int, app_user_id text)
LANGUAGE plpgsql AS $$
BEGIN
    -- The aggregates of one query read the rows in the same order: element i of every array is item i.
    RETURN QUERY
    SELECT r.redemption_id, r.end_time, r.attempts, r.app_user_id FROM (
        SELECT array_agg(u.id) AS ids, array_agg(u.account) AS accounts, array_agg(u.app) AS apps, array_agg(u.ent) AS ents,
               array_agg(u.sandbox) AS sandboxes, array_agg(u.provider) AS providers, array_agg(u.years::bigint) AS years,
               array_agg(u.months::bigint) AS months, array_agg(u.weeks::bigint) AS weeks, array_agg(u.days::bigint) AS days,
               array_agg(u.command) AS commands, array_agg(u.lease) AS leases, array_agg(u.in_app) AS in_apps
        FROM json_to_recordset(items) AS u(id uuid, account uuid, app text, ent text, sandbox boolean, provider text,
                                           years int, months int, weeks int, days int, command text, lease float8, in_app uuid)
    ) a CROSS JOIN LATERAL grants.store_round_columns(a.ids, a.accounts, a.apps, a.ents, a.sandboxes, a.providers, a.years,
                                                      a.months, a.weeks, a.days, a.commands, a.leases, a.in_apps) r;
END $$;
