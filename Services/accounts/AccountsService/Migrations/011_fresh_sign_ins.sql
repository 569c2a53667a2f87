-- A password reset that proves an unproven email takes the account back (docs/security.md): a
-- session opened with the password keeps when (`password_at`), since linking Apple or a record
-- name to an account whose email is unproven needs the password within 5 minutes.
ALTER TABLE sessions ADD COLUMN password_at timestamptz;
