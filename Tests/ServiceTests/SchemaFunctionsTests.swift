import Foundation
import TestSupport
import Testing
@testable import CouponsService
@testable import GrantsService
@testable import AccountsService
@testable import Core
@testable import Database

/// The schemas hold what the code expects of them. A service's schema holds exactly the functions
/// that have a file in its `SQL/` folder, each as that file writes it: none left over from an
/// earlier migration (coupons' `complete_many`), none defined only inside a migration. Each status
/// column's CHECK constraint allows exactly the cases of the type the code reads it as: a status
/// added on one side only fails here, not in a row nobody can read.
@Suite struct SchemaFunctionsTests {
    static let migrators = [AccountsService.migrator, CouponsService.migrator, GrantsService.migrator]

    /// A fresh database with every schema migrated.
    static func migrated() async throws -> PGPool {
        let pool = PGPool(url: try await TestPostgres.shared().freshDatabase(), maxConnections: 1)
        for migrator in migrators { try await migrator.apply(on: pool) }
        return pool
    }

    @Test func eachSchemaHoldsExactlyTheFunctionsOfItsFiles() async throws {
        let pool = try await Self.migrated()
        defer { pool.close() }
        for migrator in Self.migrators {
            let defined = try await pool.query("""
                SELECT p.proname AS name, pg_get_functiondef(p.oid) AS def FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                WHERE n.nspname = $1
                """, [migrator.schema]).rows.map { (try $0.decode("name", as: String.self), try $0.decode("def", as: String.self)) }
            #expect(defined.map(\.0).sorted() == migrator.functions.map(\.name).sorted(), "\(migrator.schema)")
            for f in migrator.functions {
                // The body in the database is the file's, from `BEGIN` to `END` (the header is PostgreSQL's own rendering).
                let body = try #require(f.sql.range(of: "BEGIN").map { String(f.sql[$0.lowerBound...]) }?.components(separatedBy: "END $$").first)
                let live = try #require(defined.first { $0.0 == f.name }?.1)
                #expect(live.contains(body.trimmingCharacters(in: .whitespacesAndNewlines)), "\(migrator.schema).\(f.name)")
            }
        }
    }

    /// Each service's migrations and functions are exactly the files of its `Migrations/` and `SQL/`
    /// folders, text for text: a file nobody lists, or a listed one that changed name, fails here.
    @Test func theMigratorsHoldExactlyTheFilesOfTheirFolders() throws {
        let services: [(dir: String, migrator: Migrator)] = [
            ("Services/accounts/AccountsService", AccountsService.migrator),
            ("Services/coupons/CouponsService", CouponsService.migrator),
            ("Services/grants/GrantsService", GrantsService.migrator),
        ]
        func files(_ dir: URL) throws -> [String: String] {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
            return try Dictionary(uniqueKeysWithValues: names.filter { $0.hasSuffix(".sql") }.map {
                ($0, try String(contentsOf: dir.appendingPathComponent($0), encoding: .utf8))
            })
        }
        let shared = try ["audit_log.sql", "audit_log_insert_only.sql", "audit_log_per_app.sql"].map {
            try String(contentsOf: Project.root.appendingPathComponent("Sources/Shared/Database/SQL/\($0)"), encoding: .utf8)
        }
        for (dir, migrator) in services {
            let base = Project.root.appendingPathComponent(dir)
            let migrations = try files(base.appendingPathComponent("Migrations"))
            let listed = migrator.migrations.filter { !shared.contains($0.sql) }
            #expect(listed.count == migrations.count, "\(dir): every file of Migrations/ is listed")
            for m in listed {
                let name = String(format: "%03d", m.version) + "_" + m.name.replacingOccurrences(of: " ", with: "_") + ".sql"
                #expect(migrations[name] == m.sql, "\(dir)/Migrations/\(name)")
            }
            #expect(migrator.migrations.map(\.version) == Array(1...migrator.migrations.count), "\(dir): versions 1, 2, … in order")
            let functions = try files(base.appendingPathComponent("SQL"))
            #expect(Set(functions.keys) == Set(migrator.functions.map { "\($0.name).sql" }), "\(dir)/SQL")
            for f in migrator.functions { #expect(functions["\(f.name).sql"] == f.sql, "\(dir)/SQL/\(f.name).sql") }
        }
    }

    @Test func eachStatusColumnHoldsExactlyItsTypesCases() async throws {
        let pool = try await Self.migrated()
        defer { pool.close() }
        let columns: [(table: String, cases: [String])] = [
            ("coupons.redemptions", RedemptionStatus.allCases.map(\.rawValue)),
            ("grants.grants", GrantStatus.allCases.map(\.rawValue)),
            ("grants.webhook_deliveries", WebhookDeliveryStatus.allCases.map(\.rawValue)),
        ]
        let quoted = try Regex(#"'([^']*)'::text"#)
        for (table, cases) in columns {
            let checks = try await pool.query("""
                SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint
                WHERE conrelid = $1::regclass AND contype = 'c' AND pg_get_constraintdef(oid) LIKE '%(status = ANY (ARRAY[%'
                """, [table]).rows.map { try $0.decode("def", as: String.self) }
            #expect(checks.count == 1, "\(table): \(checks)")
            // No other check may allow a value outside them (`status <> 'reserved'` names one of them).
            let others = try await pool.query("""
                SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'c'
                """, [table]).rows.map { try $0.decode("def", as: String.self) }.filter { !checks.contains($0) }
            let excluded = try Regex(#"status <> '([^']*)'::text"#)
            let named = others.flatMap { def in def.matches(of: excluded).compactMap { $0.output[1].substring.map(String.init) } }
            #expect(Set(named).isSubset(of: cases), "\(table): \(others)")
            // `CHECK ((status = ANY (ARRAY['reserved'::text, …])))`
            let allowed = checks.flatMap { def in def.matches(of: quoted).compactMap { $0.output[1].substring.map(String.init) } }
            #expect(allowed.sorted() == cases.sorted(), "\(table)")
        }
    }

    /// A store offer's `state` column holds exactly the states a row stores (`ready` is worked out
    /// when read), and its `store` column the stores there are.
    @Test func storeOfferColumnsHoldExactlyTheirTypesCases() async throws {
        let pool = try await Self.migrated()
        defer { pool.close() }
        let quoted = try Regex(#"'([^']*)'::text"#)
        for (column, cases) in [("state", StoreOfferState.stored.map(\.rawValue)), ("store", Store.allCases.map(\.rawValue))] {
            let checks = try await pool.query("""
                SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint
                WHERE conrelid = 'coupons.store_offers'::regclass AND contype = 'c' AND pg_get_constraintdef(oid) LIKE $1
                """, ["CHECK ((\(column) %"]).rows.map { try $0.decode("def", as: String.self) }
            #expect(checks.count == 1, "\(column): \(checks)")
            let allowed = checks.flatMap { def in def.matches(of: quoted).compactMap { $0.output[1].substring.map(String.init) } }
            #expect(allowed.sorted() == cases.sorted(), "\(column)")
        }
    }
}
