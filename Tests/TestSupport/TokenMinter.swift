import Cryptography
import Foundation

/// Mints access tokens with the accounts service's own signing key, for tests that need many distinct signed-in accounts quickly (a sign-up costs an argon2id hash). The
/// gateway verifies these exactly as it verifies tokens from a sign-in.
public struct TokenMinter: Sendable {
    public let key: AsymmetricKey
    public let kid: String

    /// `key` and `kid`: the key accounts signs new access tokens with (IntegrationTests'
    /// `Stack.signingKey()` reads it from accounts' own key store).
    public init(key: AsymmetricKey, kid: String) {
        self.key = key
        self.kid = kid
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
