-- A password reset that proves an unproven email takes the account back (docs/security.md): a
-- session opened with the password keeps when (`password_at`), since linking Apple or a record
-- name to an account whose email is unproven needs the password within 5 minutes.
ALTER TABLE sessions ADD COLUMN password_at timestamptz;
-- An account an invitation made had its email proven by the invitation link: it was made in the
-- transaction that accepted the invitation (the same now()).
UPDATE accounts a SET email_verified = true FROM member_invites i
    WHERE i.account_id = a.id AND i.accepted_at = a.created_at AND lower(i.email) = lower(a.email) AND NOT a.email_verified;
