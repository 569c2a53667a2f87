-- A member's invitation is mailed through the outbox when accounts sends mail. Its recipient may
-- have no account yet, so an outbox row names an account only for the codes of EmailTokens.
ALTER TABLE mail_outbox ALTER COLUMN account_id DROP NOT NULL;
ALTER TABLE mail_outbox DROP CONSTRAINT mail_outbox_kind_check;
ALTER TABLE mail_outbox ADD CONSTRAINT mail_outbox_kind_check
    CHECK (kind IN ('verifyEmail', 'resetPassword', 'memberInvite'));
