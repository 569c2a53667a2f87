-- The same for the statements of each completion batch, by redemption id: its outbox
-- message leaves, and its redemption completes.
SELECT 1; -- its functions are in SQL/, applied at every start
