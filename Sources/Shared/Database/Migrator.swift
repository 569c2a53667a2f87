import Foundation

/// One schema change. Versions are applied in order, each once, in its own transaction.
public struct Migration: Sendable {
    public let version: Int
    public let name: String
    public let sql: String

    public init(_ version: Int, _ name: String, _ sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }
}

/// Applies a service's migrations to its own schema at start.
///
/// Several instances may start at once: every migration runs under a transaction-scoped advisory
/// lock keyed by the schema, so one instance applies it while the others wait and then see it done.
public struct Migrator: Sendable {
    public let schema: String
    public let migrations: [Migration]

    public init(schema: String, migrations: [Migration]) {
        precondition(schema.allSatisfy { $0.isLetter || $0 == "_" }, "schema names are plain identifiers")
        precondition(Set(migrations.map(\.version)).count == migrations.count, "migration versions are unique")
        self.schema = schema
        self.migrations = migrations.sorted { $0.version < $1.version }
    }

    /// Answers the versions this call applied (empty when another instance already had).
    @discardableResult
    public func apply(on pool: PGPool) async throws -> [Int] {
        let schema = self.schema
        let migrations = self.migrations
        return try await pool.withConnection { conn in
            var applied: [Int] = []
            try conn.transaction { tx in
                try tx.query("SELECT pg_advisory_xact_lock(hashtext($1))", ["redeem.migrations." + schema])
                try tx.execute("""
                    CREATE SCHEMA IF NOT EXISTS \(schema);
                    CREATE TABLE IF NOT EXISTS \(schema).schema_migrations (
                        version int PRIMARY KEY,
                        name text NOT NULL,
                        applied_at timestamptz NOT NULL DEFAULT now()
                    )
                    """)
                let done = Set(try tx.query("SELECT version FROM \(schema).schema_migrations").rows.map { try $0.decode("version", as: Int.self) })
                for m in migrations where !done.contains(m.version) {
                    try tx.execute("SET LOCAL search_path TO \(schema)")
                    try tx.execute(m.sql)
                    try tx.query("INSERT INTO \(schema).schema_migrations (version, name) VALUES ($1, $2)", [m.version, m.name])
                    applied.append(m.version)
                }
            }
            return applied
        }
    }
}
