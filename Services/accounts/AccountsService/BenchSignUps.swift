import Core
import Cryptography
import Database
import Foundation
import Runtime

/// Signed-in users for `./bench/run`'s default row (`bench-tokens --sign-ups`): each an account
/// made and a session opened by the code `POST /v1/accounts` runs (`AccountStore.create`,
/// `SessionIssuer.open`), so its tokens are the ones a client holds after signing up. Only the
/// password's argon2id hash is computed once and shared: a bench needs tens of thousands of
/// users, and a hash costs 20–40 ms of a core.
public enum BenchSignUps {
    public struct User: Sendable {
        public let account: UUID
        public let tokens: SessionTokens
    }

    /// Opens the signing key as accounts stores it, then signs up `count` users on `connections`
    /// connections at once, each in its own transaction.
    public static func make(databaseURL: String, env: Environment, count: Int, connections: Int) async throws -> [User]
    {
        let config = try AccountsConfig(env: env)
        let sessions = SessionIssuer(config: config, keyring: try SecretKeyring(env: env))
        let pool = PGPool(url: databaseURL, maxConnections: connections)
        defer { pool.close() }
        try await sessions.loadSigningKey(pool)
        let hash = try PasswordHasher().hash("bench-" + Crypto.randomToken(bytes: 12))
        return try await withThrowingTaskGroup(of: [User].self) { group in
            for part in 0..<connections {
                group.addTask {
                    var made: [User] = []
                    for _ in stride(from: part, to: count, by: connections) {
                        made.append(
                            try await pool.transaction { tx in
                                let account = try AccountStore.create(
                                    tx, email: "bench-\(UUID.random().lowercasedString)@example.com",
                                    emailVerified: false,
                                    passwordHash: hash, recordName: nil)
                                return User(
                                    account: account, tokens: try sessions.open(tx, account: account, password: true))
                            })
                    }
                    return made
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
    }
}
