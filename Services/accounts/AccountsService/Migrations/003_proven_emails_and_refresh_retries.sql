-- Issue 18 §5. Sign in with Apple joins an existing account only when its email was proven
-- (it came from Apple with email_verified): a password account's email never was. Accounts
-- already holding an Apple identity count as proven: an Apple email joined an account only
-- when verified, and Apple marks almost every email verified (which account a rare
-- unverified first sign-in made can't be told any more); password-only accounts do not.
-- An Apple identity keeps the email its token carried, for an Apple account made beside
-- a password account that holds the email.
-- A spent refresh token keeps the pair it was exchanged for, sealed under a key only that
-- token yields, so a retry within the grace window can be answered the same pair; at most
-- one per session (cleared when the session rotates again or is revoked).
ALTER TABLE accounts ADD COLUMN email_verified boolean NOT NULL DEFAULT false;
UPDATE accounts a SET email_verified = true
    WHERE email IS NOT NULL AND EXISTS (SELECT 1 FROM apple_identities i WHERE i.account_id = a.id);
ALTER TABLE accounts ADD CONSTRAINT accounts_verified_email CHECK (email IS NOT NULL OR NOT email_verified);
ALTER TABLE apple_identities ADD COLUMN email text;
ALTER TABLE spent_refresh_tokens ADD COLUMN retry_pair bytea;
CREATE INDEX spent_refresh_tokens_retry ON spent_refresh_tokens (session_id) WHERE retry_pair IS NOT NULL;
