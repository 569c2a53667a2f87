import Core
import Foundation

/// The audit table every service that takes operator changes keeps in its own schema
/// (`<schema>.audit_log`), written in the transaction of the change it records, so a change and
/// its record commit or roll back together. The gateway reads the three and merges them
/// (`Audit.merge`).
public enum AuditTable {
    /// The migration that makes the table, at `version` of the service's migrations.
    public static func migration(_ version: Int) -> Migration {
        Migration(version, "audit log", String(decoding: PackageResources.audit_log_sql, as: UTF8.self))
    }

    /// The migration that makes the table append-only for everyone but its owner: the runtime
    /// role got UPDATE, DELETE and TRUNCATE with the schema's other tables (default privileges),
    /// and loses them here, so a service (or whoever holds its database password) can add to the
    /// record but never rewrite or erase it. `deploy/database-roles.sql` revokes them again after
    /// it grants the schema's tables, for a table made before this migration.
    public static func insertOnly(_ version: Int) -> Migration {
        Migration(version, "audit log takes inserts only", String(decoding: PackageResources.audit_log_insert_only_sql, as: UTF8.self))
    }

    /// The migration that gives each entry its app (docs/apps.md); earlier ones are the default app's.
    public static func perApp(_ version: Int) -> Migration {
        Migration(version, "audit entries per app", String(decoding: PackageResources.audit_log_per_app_sql,
            as: UTF8.self))
    }

    /// Records `change` in `schema`'s table, in the caller's transaction.
    public static func write(_ tx: PGConnection, schema: String, _ change: AuditChange) throws {
        try tx.query("""
            INSERT INTO \(schema).audit_log (id, actor_type, actor_id, action, object_type, object_id, before, after, request_id, mode, app_id)
            VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8::jsonb, $9, $10, $11)
            """, [UUID.random(), change.actor?.type.rawValue, change.actor?.id, change.action, change.objectType, change.objectId,
                  change.before?.text, change.after?.text, change.requestId, change.mode.rawValue, change.app])
    }

    /// The newest rows of `schema`'s table that `q` asks for.
    public static func read(_ c: PGConnection, schema: String, _ q: AuditQuery) throws -> AuditRows {
        let rows = try c.query("""
            SELECT id, created_at, \(Keyset.micros("created_at")) AS created_us, actor_type, actor_id, action, object_type, object_id,
                   before::text AS before, after::text AS after, request_id, mode
            FROM \(schema).audit_log
            WHERE \(Keyset.condition(time: "created_at", id: "id", parameter: 1))
              AND ($3::text IS NULL OR mode = $3::text) AND ($4::text IS NULL OR object_type = $4::text)
              AND ($5::text IS NULL OR object_id = $5::text) AND ($6::uuid IS NULL OR actor_id = $6::uuid)
              AND ($7::text IS NULL OR action = $7::text) AND app_id = $9
            ORDER BY created_at DESC, id DESC LIMIT $8
            """,
            [
                q.beforeMicros, q.beforeId, q.mode?.rawValue, q.objectType, q.objectId, q.actorId, q.action,
                max(1, min(q.limit, 101)),
                DefaultApp.of(q.app)
            ]
        ).rows
        return AuditRows(
            rows: try rows.map { row in
                let actor: AuditActor? = try row.decodeIfPresent("actor_type", as: String.self).flatMap(
                    AuditActor.Kind.init(rawValue:)
                ).map {
                    AuditActor(type: $0, id: try row.decode("actor_id"))
                }
                func json(_ column: String) throws -> JSONValue? {
                    try row.decodeIfPresent(column, as: String.self).map {
                        try JSONDecoder.wire().decode(JSONValue.self, from: Data($0.utf8))
                    }
                }
                let entry = AuditEntry(
                    id: try row.decode("id"), createdAt: try row.decode("created_at"), actor: actor,
                    action: try row.decode("action"),
                    objectType: try row.decode("object_type"), objectId: try row.decode("object_id"),
                    before: try json("before"), after: try json("after"),
                    requestId: try row.decodeIfPresent("request_id"),
                    mode: Mode(rawValue: try row.decode("mode")) ?? .live)
                return AuditRows.Row(entry: entry, micros: try row.decode("created_us"))
            })
    }
}
