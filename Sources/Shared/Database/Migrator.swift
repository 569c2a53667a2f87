import Core
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

    /// The migration a service's `Migrations/NNN_<what>.sql` file holds, embedded at build time:
    /// its version is the number, its name the words after it.
    public init(file: String, _ contents: [UInt8]) {
        let stem = file.hasSuffix(".sql") ? String(file.dropLast(4)) : file
        let parts = stem.split(separator: "_", maxSplits: 1)
        guard parts.count == 2, let version = Int(parts[0]) else { preconditionFailure("\(file): a migration file is NNN_<what>.sql") }
        self.init(version, parts[1].replacingOccurrences(of: "_", with: " "), String(decoding: contents, as: UTF8.self))
    }
}

/// A function of a service's schema, kept whole in a file of its own (`CREATE OR REPLACE
/// FUNCTION …`) and applied at every start after the migrations, so its current text is the one
/// place it is written. Migrations hold tables, indexes and constraints; a change of a function's
/// arguments or result needs a migration that drops the old one first.
public struct SQLFunction: Sendable {
    public let name: String
    public let sql: String

    public init(_ name: String, _ sql: String) {
        precondition(sql.contains("CREATE OR REPLACE FUNCTION \(name)("), "\(name): a function file creates or replaces that function")
        self.name = name
        self.sql = sql
    }

    /// The function a service's `SQL/<name>.sql` file holds, embedded at build time.
    public init(file: String, _ contents: [UInt8]) {
        self.init(file.hasSuffix(".sql") ? String(file.dropLast(4)) : file, String(decoding: contents, as: UTF8.self))
    }
}

/// Applies a service's migrations to its own schema at start, then its functions.
///
/// Several instances may start at once: every migration runs under a transaction-scoped advisory
/// lock keyed by the schema, so one instance applies it while the others wait and then see it done.
/// The functions are applied under the same lock, in the same transaction, at every start.
public struct Migrator: Sendable {
    public let schema: String
    public let migrations: [Migration]
    public let functions: [SQLFunction]

    public init(schema: String, migrations: [Migration], functions: [SQLFunction] = []) {
        precondition(schema.allSatisfy { $0.isLetter || $0 == "_" }, "schema names are plain identifiers")
        precondition(Set(migrations.map(\.version)).count == migrations.count, "migration versions are unique")
        precondition(Set(functions.map(\.name)).count == functions.count, "one file per function")
        self.schema = schema
        self.migrations = migrations.sorted { $0.version < $1.version }
        self.functions = functions
    }

    /// Answers the versions this call applied (empty when another instance already had).
    @discardableResult
    public func apply(on pool: PGPool) async throws -> [Int] {
        let schema = self.schema
        let migrations = self.migrations
        let functions = self.functions
        return try await pool.withConnection { conn in
            var applied: [Int] = []
            try conn.transaction { tx in
                try tx.query("SELECT pg_advisory_xact_lock(hashtext($1))", ["redeem.migrations." + schema])
                // Only when missing: the schema's owner may create tables in it but need not be
                // allowed to create schemas (`CREATE SCHEMA IF NOT EXISTS` checks that right first).
                if try tx.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [schema]).rows.isEmpty {
                    try tx.execute("CREATE SCHEMA \(schema)")
                }
                try tx.execute("""
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
                try tx.execute("SET LOCAL search_path TO \(schema)")
                for f in functions { try tx.execute(f.sql) }
            }
            return applied
        }
    }

    /// What this build's schema lacks in a database: migrations not applied, functions absent.
    public struct Pending: Error, Sendable, Equatable, CustomStringConvertible {
        public let schema: String
        public let migrations: [Int]
        public let functions: [String]
        public var isEmpty: Bool { migrations.isEmpty && functions.isEmpty }
        public var description: String {
            var missing: [String] = []
            if !migrations.isEmpty { missing.append("migrations \(migrations.map(String.init).joined(separator: ", "))") }
            if !functions.isEmpty { missing.append("functions \(functions.joined(separator: ", "))") }
            return "schema \(schema) is not migrated (it lacks \(missing.joined(separator: " and "))): run `\(schema) migrate` as the schema's owner"
        }
    }

    /// Reads, without changing anything, what the schema still lacks: for an instance that runs
    /// as a role without DDL rights and waits for `<service> migrate`.
    public func pending(on pool: PGPool) async throws -> Pending {
        let schema = self.schema
        let migrations = self.migrations
        let functions = self.functions
        return try await pool.withConnection { conn in
            var done: Set<Int> = []
            let table = try conn.query("SELECT to_regclass($1) IS NOT NULL AS present", [schema + ".schema_migrations"]).rows.first!.decode("present", as: Bool.self)
            if table {
                done = Set(try conn.query("SELECT version FROM \(schema).schema_migrations").rows.map { try $0.decode("version", as: Int.self) })
            }
            let present = Set(try conn.query("""
                SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1
                """, [schema]).rows.map { try $0.decode("proname", as: String.self) })
            return Pending(schema: schema, migrations: migrations.map(\.version).filter { !done.contains($0) },
                           functions: functions.map(\.name).filter { !present.contains($0) })
        }
    }
}
