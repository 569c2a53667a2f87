-- Issue 22 §4. A deleted account stays as a row no sign-in reaches (sessions and the
-- appUserId changes refer to it), without email, password, identities or ids.
ALTER TABLE accounts ADD COLUMN deleted_at timestamptz;
