-- The audit table of a service's schema (`AuditTable`): each service that takes operator changes
-- makes it as one of its migrations.
CREATE TABLE audit_log (
    id uuid PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    actor_type text CHECK (actor_type IN ('apiKey', 'member')),
    actor_id uuid,
    action text NOT NULL,
    object_type text NOT NULL,
    object_id text NOT NULL,
    before jsonb,
    after jsonb,
    request_id text,
    mode text NOT NULL CHECK (mode IN ('live', 'test'))
);
CREATE INDEX audit_log_time ON audit_log (created_at DESC, id DESC);
CREATE INDEX audit_log_object ON audit_log (object_type, object_id, created_at DESC);
CREATE INDEX audit_log_actor ON audit_log (actor_id, created_at DESC);
