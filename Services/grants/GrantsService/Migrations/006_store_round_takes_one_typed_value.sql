-- `store_round` takes its round as one typed value (a JSON array of `GrantLedger.RoundItem`)
-- instead of twelve positional arrays; the old signature goes, its successor is in SQL/.
DROP FUNCTION IF EXISTS store_round(uuid[], uuid[], text[], text[], boolean[], text[], int[], int[], int[], int[], text[], float8[]);
