-- An entitlement ends by 9999-12-31T23:59:59.999Z at the latest: the last instant ISO 8601's
-- four-digit years write. Stacked long durations (1,000 years, ten times over) went past it.
SELECT 1; -- its functions are in SQL/, applied at every start
