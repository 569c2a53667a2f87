import Foundation
import TestSupport
import Testing
@testable import CouponsService
@testable import GrantsService
@testable import Core
@testable import Database

/// The schemas hold what the code expects of them. A service's schema holds exactly the functions
/// that have a file in its `SQL/` folder, each as that file writes it: none left over from an
/// earlier migration (coupons' `complete_many`), none defined only inside a migration. Each status
/// column's CHECK constraint allows exactly the cases of the type the code reads it as: a status
/// added on one side only fails here, not in a row nobody can read.
@Suite struct SchemaFunctionsTests {
    static let migrators = [CouponsService.migrator, GrantsService.migrator]

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
