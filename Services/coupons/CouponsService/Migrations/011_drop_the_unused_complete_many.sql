-- complete_many (migration 8) has had no caller since complete_many_at (migration 9). From
-- here on, functions live in SQL/, one file each, and are applied at every start.
DROP FUNCTION IF EXISTS complete_many(uuid[], text[], timestamptz[]);
