-- An endpoint's secret can be rotated (POST /v1/webhooks/{id}/rotate-secret): the secret it
-- replaced is kept, sealed like the secret (under the same row's context), until
-- previous_secret_expires_at, and each delivery meanwhile is signed with both.
ALTER TABLE webhook_endpoints ADD COLUMN previous_secret text;
ALTER TABLE webhook_endpoints ADD COLUMN previous_secret_key_id text;
ALTER TABLE webhook_endpoints ADD COLUMN previous_secret_expires_at timestamptz;
ALTER TABLE webhook_endpoints ADD CONSTRAINT previous_secret_has_an_end
    CHECK ((previous_secret IS NULL) = (previous_secret_expires_at IS NULL));
