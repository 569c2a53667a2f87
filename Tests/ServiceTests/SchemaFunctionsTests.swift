import Foundation
import TestSupport
import Testing
@testable import CouponsService
@testable import GrantsService
@testable import Core
@testable import Database

/// A service's schema holds exactly the functions that have a file in its `SQL/` folder, each as
/// that file writes it: none left over from an earlier migration (coupons' `complete_many`), none
/// defined only inside a migration.
@Suite struct SchemaFunctionsTests {
    @Test func eachSchemaHoldsExactlyTheFunctionsOfItsFiles() async throws {
        let url = try await TestPostgres.shared().freshDatabase()
        let pool = PGPool(url: url, maxConnections: 1)
        defer { pool.close() }
        for migrator in [CouponsService.migrator, GrantsService.migrator] {
            try await migrator.apply(on: pool)
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
}
