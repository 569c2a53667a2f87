import Core
import Cryptography
import Database
import Foundation

/// The gateway's Idempotency-Keys (`accounts.idempotency_keys`, the `idempotency_*` functions):
/// one row per key and caller, so of concurrent requests with one key exactly one runs. Answers are
/// kept sealed under the secret key: an answer may carry a secret (a new API key, an invitation's
/// token, a session's tokens), and a copy of the database alone must not. The hashes of requests
/// are kept as HMACs under it too (`storedScope`, `storedHash`).
struct IdempotencyStore: Sendable {
    let pool: PGPool
    let keyring: SecretKeyring

    static func context(scope: String, key: String) -> String { "accounts.idempotency_keys/\(scope)/\(key)" }

    /// The scope a row keeps. A key sent without a credential is scoped by a SHA-256 of its
    /// request (`anonymous:<route>:<hex>`), whose body may hold a password: the row keeps an HMAC
    /// of it under the secret key instead, so a copy of the database tests no guess of a password.
    func storedScope(_ scope: String) -> String {
        guard scope.hasPrefix("anonymous:"), let colon = scope.lastIndex(of: ":") else { return scope }
        let digest = keyring.digest(Array(scope[scope.index(after: colon)...].utf8), purpose: "idempotency scope")
        return String(scope[...colon]) + digest.hex
    }

    /// The request's SHA-256 as the row keeps it: an HMAC under the secret key, for the same reason.
    func storedHash(_ requestHash: Data) -> Data {
        Data(keyring.digest(Array(requestHash), purpose: "idempotency request"))
    }

    func begin(_ req: Idempotency.Begin) async throws -> Idempotency.Begin.Response {
        guard !req.key.isEmpty, req.key.utf8.count <= Idempotency.maxKeyLength, req.requestHash.count == 32 else {
            throw ServiceError(
                .invalid, "the Idempotency-Key must be 1 to \(Idempotency.maxKeyLength) bytes", field: "Idempotency-Key"
            )
        }
        let row = try await pool.withConnection { c in
            try c.prepared(
                "idempotency_begin", "SELECT * FROM accounts.idempotency_begin($1, $2, $3, $4, $5)",
                [
                    storedScope(req.scope), req.key, PGBytes(storedHash(req.requestHash)), max(1, req.lockSeconds),
                    Idempotency.keepSeconds,
                ]
            ).first
        }
        guard let row else { throw ServiceError(.internal, "idempotency_begin answered nothing") }
        switch try row.decode("outcome", as: String.self) {
        case "started": return .started
        case "mismatch": return .mismatch
        case "inFlight": return .inFlight
        case "replay":
            let sealed = try row.decode("response", as: PGBytes.self).data
            let opened = try keyring.open(
                Array(sealed), keyId: try row.decodeIfPresent("key_id", as: String.self),
                context: Self.context(scope: storedScope(req.scope), key: req.key))
            return .replay(try JSONDecoder.wire().decode(Idempotency.StoredResponse.self, from: Data(opened)))
        case let other: throw ServiceError(.internal, "idempotency_begin answered \(other)")
        }
    }

    func finish(_ req: Idempotency.Finish) async throws {
        let plain = try JSONEncoder.wire().encode(req.response)
        let scope = storedScope(req.scope)
        let (sealed, keyId) = keyring.seal(Array(plain), context: Self.context(scope: scope, key: req.key))
        _ = try await pool.withConnection { c in
            try c.prepared(
                "idempotency_finish", "SELECT accounts.idempotency_finish($1, $2, $3, $4)",
                [scope, req.key, PGBytes(Data(sealed)), keyId])
        }
    }

    func release(_ req: Idempotency.Release) async throws {
        _ = try await pool.withConnection { c in
            try c.prepared(
                "idempotency_release", "SELECT accounts.idempotency_release($1, $2)", [storedScope(req.scope), req.key])
        }
    }

    /// Forgets keys past their 24 hours; answers how many.
    func prune() async throws -> Int {
        try await pool.withConnection { c in
            try c.query("SELECT accounts.idempotency_prune() AS gone").first?.decode("gone", as: Int.self) ?? 0
        }
    }
}
