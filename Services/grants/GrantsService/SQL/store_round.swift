import Database
import Runtime

extension GrantsFunctions {
    /// Stores one round of grant commands (at most one per holder and entitlement, see
    /// `GrantLedger.store`): each period starts where the holder's latest one ends, or now, and an
    /// entitlement ends by 9999-12-31T23:59:59.999Z at the latest, the last instant ISO 8601's
    /// four-digit years write. A command stored before changes nothing.
    static let storeRound = SQLFunction("store_round", """
        CREATE OR REPLACE FUNCTION store_round(ids uuid[], accounts uuid[], apps text[], ents text[], sandboxes boolean[], providers text[],
                                    ys int[], ms int[], ws int[], ds int[], commands text[], leases float8[])
            RETURNS TABLE (redemption_id uuid, end_time timestamptz, attempts int)
        LANGUAGE plpgsql SET enable_seqscan = off AS $$
        #variable_conflict use_column
        BEGIN
            RETURN QUERY
            INSERT INTO grants.grants AS g (redemption_id, account_id, app_user_id, entitlement_id, sandbox, provider, start_time, end_time,
                                            command, attempts, next_attempt_at)
            SELECT u.id, u.account, u.app, u.ent, u.sandbox, u.provider, s.start,
                   least(s.start + make_interval(years => u.y, months => u.m, weeks => u.w, days => u.d), '9999-12-31 23:59:59.999+00'),
                   u.command, CASE WHEN u.lease IS NULL THEN 0 ELSE 1 END, now() + make_interval(secs => coalesce(u.lease, 0))
            FROM unnest(ids, accounts, apps, ents, sandboxes, providers, ys, ms, ws, ds, commands, leases)
                AS u(id, account, app, ent, sandbox, provider, y, m, w, d, command, lease)
            CROSS JOIN LATERAL (
                SELECT date_trunc('milliseconds', least(greatest(now(), coalesce(max(h.end_time), now())), '9999-12-31 23:59:59.999+00')) AS start
                FROM grants.grants h WHERE h.app_user_id = u.app AND h.entitlement_id = u.ent AND h.sandbox = u.sandbox AND h.status <> 'failed'
            ) s
            ON CONFLICT (redemption_id) DO NOTHING
            RETURNING g.redemption_id, g.end_time, g.attempts;
        END $$;
        """)
}
