-- Issue 22 §1. An account whose fresh appUserId gave way to its CloudKit record name: the
-- grants service is told to move the holder until it confirms (`moved_at`).
CREATE TABLE app_user_id_changes (
    account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    previous text NOT NULL,
    current text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    moved_at timestamptz,
    PRIMARY KEY (account_id, previous)
);
CREATE INDEX app_user_id_changes_unmoved ON app_user_id_changes (created_at) WHERE moved_at IS NULL;
