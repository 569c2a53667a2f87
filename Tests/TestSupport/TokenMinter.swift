import AccountsService
import Cryptography
import Database
import Foundation

/// Mints access tokens with the accounts service's own signing key, for tests (and bench-tokens)
/// that need many distinct signed-in accounts quickly (a sign-up costs an argon2id hash). The
/// gateway verifies these exactly as it verifies tokens from a sign-in.
public struct TokenMinter: Sendable {
    public let key: AsymmetricKey
    public let kid: String

    public init(databaseURL: String, keyring: SecretKeyring) throws {
        let signing = try Self.signingKey(databaseURL: databaseURL, keyring: keyring)
        key = signing.key
        kid = signing.kid
    }

    /// The key accounts signs new access tokens with, asked of accounts' own key store: the one
    /// way tests and bench-tokens reach a service's keys.
    /// `keyring` opens the stored key (the stack's `REDEEM_SECRET_KEY`).
    public static func signingKey(databaseURL: String, keyring: SecretKeyring) throws -> SigningKeyStore.Stored {
        guard let signing = try SigningKeyStore.signing(try PGConnection(url: databaseURL), keyring: keyring) else { throw TestFailure("no signing key yet") }
        return signing
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
