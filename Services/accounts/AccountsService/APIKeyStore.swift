import Core
import Cryptography
import Database
import Foundation

/// Secret API keys for operators and servers: stored as SHA-256 hashes only (they are 192-bit
/// random, so a slow hash adds nothing), shown once, revocable. A live key manages keys of both
/// modes, a test key only test keys (`Mode.managesKeys`): a test key that could make a live key
/// would be a live key.
enum APIKeyStore {
    /// A key of `mode` (nil: the caller's own) in `app`, made by a key of mode `caller`.
    static func create(_ tx: PGConnection, name: String, role: Role, mode: Mode?, app: UUID, by caller: Mode) throws
        -> APIKeys.Create.Response
    {
        let mode = mode ?? caller
        guard caller.managesKeys(of: mode) else {
            throw ServiceError(.forbidden, "a \(caller.rawValue) key can't make \(mode.rawValue) keys", field: "mode")
        }
        let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
        guard (1...100).contains(trimmed.count) else { throw ServiceError(.invalid, "name must be 1 to 100 characters", field: "name") }
        let secret = APIKeySecret.generate(mode: mode)
        let view = try insert(tx, secret: secret, name: trimmed, role: role, app: app)
        return .init(apiKey: view, key: secret)
    }

    /// Inserts a key. The bootstrap admin key is inserted at every start: an existing row (even a
    /// revoked one) is kept as it is.
    @discardableResult
    static func insert(_ c: PGConnection, secret: String, name: String, role: Role,
        app: UUID = DefaultApp.id) throws -> APIKeyView {
        guard let mode = APIKeySecret.mode(of: secret) else { throw ServiceError(.invalid, "not a secret key", field: "key") }
        let id = UUID.random()
        let row = try c.query("""
            INSERT INTO accounts.api_keys (id, key_hash, prefix, name, role, mode, app_id) VALUES ($1, $2, $3, $4, $5, $6, $7)
            ON CONFLICT (key_hash) DO UPDATE SET key_hash = EXCLUDED.key_hash
            RETURNING id, prefix, name, role, mode, created_at, last_used_at
            """,
            [
                id, PGBytes(Data(APIKeySecret.hash(secret))), APIKeySecret.prefix(of: secret), name, role.rawValue,
                mode.rawValue, app
            ]
        ).first!
        return try view(row)
    }

    /// The one mode whose keys a caller of mode `caller` manages; nil: every mode.
    static func managed(by caller: Mode) -> String? { caller == .live ? nil : caller.rawValue }

    static func list(_ pool: PGPool, _ req: APIKeys.List) async throws -> APIKeys.List.Response {
        let keyset = try Keyset(limit: req.limit, cursor: req.cursor)
        let rows = try await pool.query("""
            SELECT id, prefix, name, role, mode, created_at, last_used_at, \(Keyset.micros("created_at")) AS created_us
            FROM accounts.api_keys
            WHERE revoked_at IS NULL AND app_id = $5 AND ($4::text IS NULL OR mode = $4::text)
              AND \(Keyset.condition(time: "created_at", id: "id", parameter: 1))
            ORDER BY created_at DESC, id DESC LIMIT $3
            """,
            [
                keyset.afterMicros, keyset.afterId, keyset.fetch, managed(by: Mode.of(req.callerMode)),
                DefaultApp.of(req.app)
            ]
        ).rows
        return try keyset.page(rows, micros: "created_us", view)
    }

    /// Revokes a key of `app` the caller's mode manages; any other is `notFound`, as if it did not
    /// exist. Answers the key as it was listed.
    static func revoke(_ tx: PGConnection, id: UUID, app: UUID, by caller: Mode) throws -> APIKeyView {
        let row = try tx.query("""
            UPDATE accounts.api_keys SET revoked_at = now()
            WHERE id = $1 AND app_id = $3 AND revoked_at IS NULL AND ($2::text IS NULL OR mode = $2::text)
            RETURNING id, prefix, name, role, mode, created_at, last_used_at
            """, [id, managed(by: caller), app]).first
        guard let row else { throw ServiceError(.notFound, "no such API key") }
        return try view(row)
    }

    static func authenticate(_ pool: PGPool, keyHash: String) async throws -> APIKeys.Authenticate.Response {
        let invalid = ServiceError(.invalidToken, "the API key is not valid")
        guard keyHash.count == 64, let given = hexBytes(keyHash) else { throw invalid }
        guard let row = try await pool.query("""
            SELECT id, key_hash, role, mode, app_id, last_used_at FROM accounts.api_keys WHERE key_hash = $1 AND revoked_at IS NULL
            """, [PGBytes(Data(given))]).first else { throw invalid }
        // The index lookup found it by equality; compare again in constant time, as stated.
        guard Crypto.constantTimeEqual(Array(try row.decode("key_hash", as: PGBytes.self).data), given),
              let role = Role(rawValue: try row.decode("role", as: String.self)),
              let mode = Mode(rawValue: try row.decode("mode", as: String.self)) else { throw invalid }
        let id = try row.decode("id", as: UUID.self)
        let lastUsed = try row.decodeIfPresent("last_used_at", as: Date.self)
        if lastUsed.map({ Date().timeIntervalSince($0) > 60 }) ?? true {
            try await pool.query("UPDATE accounts.api_keys SET last_used_at = now() WHERE id = $1", [id])
        }
        return .init(id: id, role: role, mode: mode, app: try row.decode("app_id", as: UUID.self))
    }

    private static func view(_ row: PGRow) throws -> APIKeyView {
        APIKeyView(id: try row.decode("id"), prefix: try row.decode("prefix"), name: try row.decode("name"),
                   role: Role(rawValue: try row.decode("role")) ?? .readonly, mode: Mode(rawValue: try row.decode("mode")) ?? .test,
                   createdAt: try row.decode("created_at"), lastUsedAt: try row.decodeIfPresent("last_used_at"))
    }

    private static func hexBytes(_ s: String) -> [UInt8]? {
        var out: [UInt8] = []
        var it = s.makeIterator()
        while let a = it.next(), let b = it.next() {
            guard let v = UInt8(String([a, b]), radix: 16) else { return nil }
            out.append(v)
        }
        return out
    }
}
