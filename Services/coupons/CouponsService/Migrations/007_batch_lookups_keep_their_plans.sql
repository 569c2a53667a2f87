-- The lookups of a batch by account (`RedemptionStore.BatchSQL`) are functions, so each
-- connection keeps their plans: planning the statement took more of PostgreSQL's time
-- than running it (0.33 of 0.57 ms). They are planned with sequential scans off, because
-- a kept plan does not follow the table's growth: made while the table was small and
-- freshly analyzed, it would read the whole table once per account for as long as the
-- statistics lag behind a flash sale. So each lookup is one index probe per account,
-- whatever the statistics say (`RedemptionPlanTests`).
SELECT 1; -- its functions are in SQL/, applied at every start
