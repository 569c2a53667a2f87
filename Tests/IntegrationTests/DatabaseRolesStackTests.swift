import Bus
import Core
import Database
import Foundation
import TestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Least privilege in the database. `run-stack` makes, for each back-end, an owner
/// of its schema (which migrates) and a runtime role (which the service runs as); these tests
/// connect as those roles and as the services, and try what each must not do.
final class DatabaseRolesStackTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!

    override class func startSuite() throws {
        stack = try Stack()
    }

    override class func stopSuite() { stack?.stop() }

    var stack: Stack { Self.stack }
    static let backends = ["accounts", "coupons", "grants"]

    /// Runs `sql` and answers the SQLSTATE it failed with (nil: it succeeded).
    func failure(_ url: String, _ sql: String) throws -> String? {
        let db = try PGConnection(url: url)
        do {
            _ = try db.execute(sql)
            return nil
        } catch let e as PGError {
            return e.sqlState
        }
    }

    func testEachServiceRunsAsARoleThatReachesOnlyItsOwnSchema() throws {
        // The running services hold connections as their runtime roles, and only as those: the owners
        // migrated at start and let go (first, before this test connects as any role), and no service is connected as the superuser.
        let admin = try PGConnection(url: try stack.adminDatabaseURL())
        let roles = Set(try admin.query("""
            SELECT DISTINCT usename FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND usename IS NOT NULL
            """).rows.map { try $0.decode("usename", as: String.self) })
        XCTAssertEqual(roles, Set(Self.backends.map { "redeem_\($0)" }))
        // coupons' role cannot read accounts' sessions (the issue's test), nor any role another schema.
        let coupons = try stack.databaseURL(of: "coupons")
        XCTAssertEqual(try failure(coupons, "SELECT * FROM accounts.sessions LIMIT 1"), "42501", "permission denied")
        for service in Self.backends {
            let own = try PGConnection(url: try stack.databaseURL(of: service))
            let me = try own.query("SELECT current_user AS name, rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user").first!
            XCTAssertEqual(try me.decode("name", as: String.self), "redeem_\(service)")
            XCTAssertFalse(try me.decode("rolsuper", as: Bool.self))
            XCTAssertFalse(try me.decode("rolcreaterole", as: Bool.self))
            XCTAssertFalse(try me.decode("rolcreatedb", as: Bool.self))
            XCTAssertGreaterThan(try own.query("SELECT count(*)::int AS n FROM \(service).schema_migrations").first!.decode("n", as: Int.self), 0)
            for other in Self.backends where other != service {
                for url in [try stack.databaseURL(of: service), try stack.databaseURL(of: service, owner: true)] {
                    XCTAssertEqual(try failure(url, "SELECT * FROM \(other).schema_migrations LIMIT 1"), "42501", "\(service) reads \(other)")
                }
            }
        }
        // Everything in a schema belongs to its owner.
        for service in Self.backends {
            let owners = Set(try admin.query("""
                SELECT DISTINCT pg_get_userbyid(c.relowner) AS owner FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1
                UNION SELECT DISTINCT pg_get_userbyid(p.proowner) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1
                UNION SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = $1
                """, [service]).rows.map { try $0.decode("owner", as: String.self) })
            XCTAssertEqual(owners, ["redeem_\(service)_owner"], service)
        }
    }

    func testNoRuntimeRoleCanChangeAnySchema() throws {
        for service in Self.backends {
            let url = try stack.databaseURL(of: service)
            for ddl in [
                "CREATE TABLE \(service).intruder (id int)",
                "CREATE TABLE public.intruder (id int)",
                "CREATE TABLE intruder (id int)",
                "CREATE TEMP TABLE intruder (id int)",
                "CREATE SCHEMA intruder",
                "ALTER TABLE \(service).schema_migrations ADD COLUMN intruder int",
                "DROP TABLE \(service).schema_migrations",
                "TRUNCATE \(service).schema_migrations",
                "CREATE FUNCTION \(service).intruder() RETURNS int LANGUAGE sql AS 'SELECT 1'",
            ] {
                XCTAssertEqual(try failure(url, ddl), "42501", "\(service)'s runtime role: \(ddl)")
            }
        }
        // The owner can (that is what migrations run as), in its own schema only.
        let owner = try stack.databaseURL(of: "coupons", owner: true)
        XCTAssertNil(try failure(owner, "CREATE TABLE coupons.owned (id int); DROP TABLE coupons.owned"))
        XCTAssertEqual(try failure(owner, "CREATE TABLE accounts.intruder (id int)"), "42501")
    }

    /// Without the owner's URL an instance can do no DDL: on an empty database it waits, not
    /// ready, until `coupons migrate` (as the owner) has made the schema, and then serves.
    func testAnInstanceWithoutTheOwnerWaitsForMigrate() async throws {
        let admin = try PGConnection(url: try stack.adminDatabaseURL())
        let name = "fresh_\(UUID().uuidString.prefix(8).lowercased())"
        try admin.execute("CREATE DATABASE \(name)")
        let freshAdmin = try stack.adminDatabaseURL().replacingOccurrences(of: "/redeem", with: "/\(name)")
        // The roles are the cluster's: the same passwords, the fresh database's URLs.
        let dir = try Project.temporaryDirectory("roles")
        defer { try? FileManager.default.removeItem(at: dir) }
        for service in Self.backends {
            for file in ["\(service).password", "\(service)-owner.password"] {
                try FileManager.default.copyItem(at: stack.directory.appendingPathComponent("db/\(file)"), to: dir.appendingPathComponent(file))
            }
        }
        _ = try await offThePool { try Project.run(Project.root.appendingPathComponent("deploy/database-roles").path, [freshAdmin, dir.path]) }

        let port = try Project.freePort()
        let busEndpoint = "tcp://127.0.0.1:\(try Project.freePort())"
        let coupons = try stack.startService("coupons", overrides: [
            "REDEEM_DATABASE_URL_FILE": dir.appendingPathComponent("coupons.url").path,
            "REDEEM_MIGRATION_DATABASE_URL_FILE": "",
            "REDEEM_COUPONS_HTTP_PORT": String(port),
            "REDEEM_COUPONS_BUS_BIND": busEndpoint,
        ])
        let probe = HTTPClient(base: URL(string: "http://127.0.0.1:\(port)")!)
        let waiting = try await stack.eventually(20) { try await probe.get("/healthz").status == 200 }
        XCTAssertTrue(waiting)
        // Two seconds in which it must neither become ready nor make a table: no condition says
        // that it never will.
        try await Task.sleep(for: .seconds(2))
        let notReady = try await probe.get("/readyz").status
        XCTAssertEqual(notReady, 503)
        let fresh = try PGConnection(url: freshAdmin)
        XCTAssertEqual(try fresh.query("SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'coupons'").first!.decode("n", as: Int.self), 0,
                       "the instance made no table")
        XCTAssertTrue(stack.logs().contains("schema not migrated; waiting"))
        // A bus request meanwhile is refused `unavailable`, to try again, and its handler never
        // runs against tables that are not there (no "bus handler failed" in the log).
        let node = try stack.busNode()
        defer { node.stop() }
        let bus = try BusClient(bus: node, service: "coupons", connect: [busEndpoint])
        defer { bus.stop() }
        do {
            let early = Coupons.Validate(accountId: UUID(), code: "ANY-CODE", platform: .web)
            _ = try await bus.request(early, timeout: .seconds(20))
            XCTFail("a request was handled before the schema existed")
        } catch let error as ServiceError {
            XCTAssertEqual(error, .starting)
        }
        XCTAssertFalse(stack.logs().contains("bus handler failed"), "no handler ran before the service started")

        let log = dir.appendingPathComponent("migrate.log").path
        let migrate = try Subprocess(Project.binDirectory.appendingPathComponent("coupons").path, ["migrate"],
                                     environment: ["PATH": "/usr/bin:/bin", "REDEEM_MIGRATION_DATABASE_URL_FILE": dir.appendingPathComponent("coupons-owner.url").path],
                                     stderr: log)
        let status = try await offThePool { migrate.wait(seconds: 60) }
        XCTAssertEqual(status, 0, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
        let ready = try await stack.eventually(20) { try await probe.get("/readyz").status == 200 }
        XCTAssertTrue(ready, "the waiting instance serves once the schema is migrated")
        coupons.signal(SIGTERM)
        _ = try await offThePool { coupons.wait(seconds: 10) }
    }

    /// The roles' passwords never reach a log.
    func testNoPasswordInAnyLog() throws {
        for service in Self.backends {
            for file in ["\(service).password", "\(service)-owner.password"] {
                let password = try String(contentsOf: stack.directory.appendingPathComponent("db/\(file)"), encoding: .utf8)
                XCTAssertGreaterThanOrEqual(password.count, 32)
                XCTAssertFalse(stack.logs().contains(password), file)
            }
        }
    }

    /// The Kubernetes migration Job's first step (deploy/kubernetes/migrate-job.yaml) runs
    /// `database-roles --from-env`: the administrator's URL and the URLs the services and the
    /// migrations use, from the Secrets. It makes the roles and schemas with the passwords in those
    /// URLs (percent-encoded, as in any URL), so what the Secret says is what the pods can log in
    /// with; a URL naming another role is refused before anything changes.
    func testTheMigrationJobMakesTheRolesFromTheServicesURLs() async throws {
        let admin = try PGConnection(url: try stack.adminDatabaseURL())
        let name = "k8s_\(UUID().uuidString.prefix(8).lowercased())"
        try admin.execute("CREATE DATABASE \(name)")
        let freshAdmin = try stack.adminDatabaseURL().replacingOccurrences(of: "/redeem", with: "/\(name)")
        let place = String(freshAdmin[freshAdmin.range(of: "@")!.upperBound...])
        let script = Project.root.appendingPathComponent("deploy/database-roles").path

        // The roles are the cluster's, and the running stack logs in with their passwords: this
        // test changes one and puts it back.
        var passwords: [String: String] = [:]
        for service in Self.backends {
            for role in [service, "\(service)-owner"] {
                passwords[role] = try String(contentsOf: stack.directory.appendingPathComponent("db/\(role).password"), encoding: .utf8)
                    .trimmingCharacters(in: .whitespacesAndNewlines)
            }
        }
        func url(_ role: String, _ password: String) -> String {
            var allowed = CharacterSet.alphanumerics
            allowed.insert(charactersIn: "-._~")
            return "postgresql://\(role):\(password.addingPercentEncoding(withAllowedCharacters: allowed)!)@\(place)"
        }
        func job(_ passwords: [String: String], roles: [String: String] = [:]) async throws -> Int32 {
            var environment = ["PATH": "/usr/bin:/bin", "REDEEM_ADMIN_DATABASE_URL": freshAdmin]
            for service in Self.backends {
                let upper = service.uppercased()
                environment["\(upper)_DATABASE_URL"] = url(roles[service] ?? "redeem_\(service)", passwords[service]!)
                environment["\(upper)_MIGRATION_DATABASE_URL"] = url(roles["\(service)-owner"] ?? "redeem_\(service)_owner", passwords["\(service)-owner"]!)
            }
            let p = try Subprocess(script, ["--from-env"], environment: environment)
            return try await offThePool { p.wait(seconds: 60) ?? -1 }
        }

        var changed = passwords
        changed["accounts"] = "it's a \\ @/:%?&= password"
        let made = try await job(changed)
        let loggedIn = Result { try PGConnection(url: url("redeem_accounts", changed["accounts"]!)).query("SELECT current_user AS u").first!.decode("u", as: String.self) }
        let restored = try await job(passwords)
        XCTAssertEqual(made, 0)
        XCTAssertEqual(try loggedIn.get(), "redeem_accounts", "the Secret's URL logs in")
        XCTAssertEqual(restored, 0)
        XCTAssertThrowsError(try PGConnection(url: url("redeem_accounts", changed["accounts"]!)), "the changed password is gone again")
        _ = try PGConnection(url: try stack.databaseURL(of: "accounts"))

        // The fresh database has the three schemas, each its owner's, and the owners can migrate.
        let fresh = try PGConnection(url: freshAdmin)
        let owners = try fresh.query("SELECT nspname, pg_get_userbyid(nspowner) AS owner FROM pg_namespace WHERE nspname IN ('accounts', 'coupons', 'grants') ORDER BY 1")
            .rows.map { "\(try $0.decode("nspname", as: String.self))=\(try $0.decode("owner", as: String.self))" }
        XCTAssertEqual(owners, ["accounts=redeem_accounts_owner", "coupons=redeem_coupons_owner", "grants=redeem_grants_owner"])
        let migrate = try Subprocess(Project.binDirectory.appendingPathComponent("grants").path, ["migrate"],
                                     environment: ["PATH": "/usr/bin:/bin", "REDEEM_MIGRATION_DATABASE_URL": url("redeem_grants_owner", passwords["grants-owner"]!)])
        let migrated = try await offThePool { migrate.wait(seconds: 60) }
        XCTAssertEqual(migrated, 0, "the owner migrates its schema")

        // A URL that names another role (the administrator, say) is refused, and nothing changes.
        let wrong = try await job(changed, roles: ["accounts": "postgres"])
        XCTAssertEqual(wrong, 2)
        _ = try PGConnection(url: try stack.databaseURL(of: "accounts"))
    }

    /// The audit log is a record: each service's runtime role adds to it and reads it, and may
    /// neither change nor erase a row (permission denied, SQLSTATE 42501), also after
    /// `deploy/database-roles` runs again over a migrated schema (as `run-stack` does at every start).
    func testTheRuntimeRolesOnlyAddToTheAuditLog() async throws {
        func check(_ when: String) throws {
            for service in Self.backends {
                let url = try stack.databaseURL(of: service)
                XCTAssertNil(try failure(url, """
                    INSERT INTO \(service).audit_log (id, action, object_type, object_id, mode)
                    VALUES (gen_random_uuid(), 'test.audit', 'test', '\(when)', 'test')
                    """), "\(service) adds to its audit log (\(when))")
                XCTAssertNil(try failure(url, "SELECT count(*) FROM \(service).audit_log"))
                for change in ["UPDATE \(service).audit_log SET action = 'rewritten'",
                               "DELETE FROM \(service).audit_log",
                               "TRUNCATE \(service).audit_log"] {
                    XCTAssertEqual(try failure(url, change), "42501", "\(service)'s runtime role (\(when)): \(change)")
                }
                let kept = try PGConnection(url: url).query("SELECT count(*)::int AS n FROM \(service).audit_log WHERE object_id = $1", [when])
                XCTAssertEqual(try kept.first!.decode("n", as: Int.self), 1, "\(service)'s row is still there (\(when))")
            }
        }
        try check("after the first start")
        let arguments = [try stack.adminDatabaseURL(), stack.directory.appendingPathComponent("db").path]
        _ = try await offThePool { try Project.run(Project.root.appendingPathComponent("deploy/database-roles").path, arguments) }
        try check("after database-roles ran again")
    }
}
