import Foundation
import Shared

/// Mints access tokens with the accounts service's own signing key, read from its schema, for
/// tests that need many distinct signed-in accounts quickly (a sign-up costs an argon2id hash).
/// The gateway verifies these exactly as it verifies tokens from a sign-in.
public struct TokenMinter: Sendable {
    let key: AsymmetricKey
    let kid: String

    public init(databaseURL: String) throws {
        let db = try PGConnection(url: databaseURL)
        guard let signing = try AccessTokenKeys.signing(db) else { throw TestFailure("no signing key yet") }
        key = signing.key
        kid = signing.kid
    }

    public struct User: Sendable {
        public let accountId: UUID
        public let appUserId: String
        public let token: String
    }

    public func user(appUserId: String? = nil) throws -> User {
        let account = UUID()
        let app = appUserId ?? UUID().uuidString.lowercased()
        let claims = AccessClaims(account: account, appUserId: app, session: UUID(), issuedAt: Date(), expiresAt: Date().addingTimeInterval(900))
        return User(accountId: account, appUserId: app, token: try JWT.sign(claims, key: key, kid: kid))
    }
}
