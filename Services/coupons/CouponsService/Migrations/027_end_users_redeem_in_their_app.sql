-- End users validate and redeem in the app their request names (docs/apps.md): the standing of a
-- code's coupons is looked up in one app (SQL/validate_standing.sql takes it).
DROP FUNCTION IF EXISTS validate_standing(text, uuid[]);
