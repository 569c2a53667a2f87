-- The statements every batch of grants runs are functions, so each connection keeps their
-- plans instead of planning them per batch, and they are planned with sequential scans off:
-- a kept plan does not follow the table's growth, and one made while the table was small
-- would read all of it every batch, for as long as the statistics lag behind a flash sale
-- (the reasoning of coupons migration 7; `GrantPlanTests`).
SELECT 1; -- its functions are in SQL/, applied at every start
