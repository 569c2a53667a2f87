import Bus
import Core
import Database
import Foundation

/// The deployment's apps (docs/apps.md). Accounts keeps them, with the API keys that work in each.
/// An app is never deleted: its keys, coupons and records name it.
enum AppStore {
    static let columns = "id, name, created_at, \(Keyset.micros("created_at")) AS created_us"

    static func create(_ tx: PGConnection, name: String) throws -> AppView {
        let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
        guard (1...100).contains(trimmed.count) else {
            throw ServiceError(.invalid, "name must be 1 to 100 characters", field: "name")
        }
        let row = try tx.query(
            "INSERT INTO accounts.apps (id, name) VALUES ($1, $2) RETURNING \(columns)", [UUID.random(), trimmed]
        ).first!
        return try view(row)
    }

    /// Oldest first, so the default app leads. With `member`: the apps where that member's
    /// session has a role (`SessionIssuer.memberRole`).
    static func list(_ c: PGConnection, _ req: Apps.List) throws -> Page<AppView> {
        let keyset = try Keyset(limit: req.limit, cursor: req.cursor)
        let role = SessionIssuer.memberRole(
            account: "$4::uuid",
            secondFactor: "(SELECT s.second_factor FROM accounts.sessions s WHERE s.id = $5::uuid)", app: "apps.id")
        let rows = try c.query(
            """
            SELECT \(columns) FROM accounts.apps
            WHERE \(Keyset.condition(time: "created_at", id: "id", parameter: 1, ascending: true))
              AND ($4::uuid IS NULL OR \(role) IS NOT NULL)
            ORDER BY created_at, id LIMIT $3
            """, [keyset.afterMicros, keyset.afterId, keyset.fetch, req.member, req.session]
        ).rows
        return try keyset.page(rows, micros: "created_us", view)
    }

    static func get(_ c: PGConnection, id: UUID) throws -> AppView {
        guard let row = try c.query("SELECT \(columns) FROM accounts.apps WHERE id = $1", [id]).first else {
            throw ServiceError(.notFound, "no such app")
        }
        return try view(row)
    }

    private static func view(_ row: PGRow) throws -> AppView {
        AppView(id: try row.decode("id"), name: try row.decode("name"), createdAt: try row.decode("created_at"))
    }
}

extension AccountsService {
    func addAppRoutes(to r: inout BusRouter) {
        r.on(Apps.Create.self) { [self] req, context in
            try await pool.transaction { tx in
                let app = try AppStore.create(tx, name: req.name)
                // Made in no app's name but its own: it opens the new app's record.
                try Self.audit(
                    tx, req.actor, .appCreate, app.id.uppercasedString, before: nil, after: app, context, .live,
                    app: app.id)
                return app
            }
        }
        r.on(Apps.List.self) { [self] req, _ in try await pool.withConnection { try AppStore.list($0, req) } }
        r.on(Apps.Get.self) { [self] req, _ in try await pool.withConnection { try AppStore.get($0, id: req.id) } }
    }
}
