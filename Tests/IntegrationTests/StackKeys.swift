import AccountsService
import Cryptography
import Database
import TestSupport

extension Stack {
    /// A token minter signing with this stack's accounts key.
    func minter() throws -> TokenMinter {
        let signing = try signingKey()
        return TokenMinter(key: signing.key, kid: signing.kid)
    }

    /// The key accounts signs new access tokens with, asked of accounts' own key store and opened
    /// with the stack's `REDEEM_SECRET_KEY` (or `keyring`), as accounts opens it.
    func signingKey(keyring: SecretKeyring? = nil) throws -> SigningKeyStore.Stored {
        let keyring = try keyring ?? secretKeyring()
        guard let signing = try SigningKeyStore.signing(try PGConnection(url: try adminDatabaseURL()), keyring: keyring) else {
            throw TestFailure("no signing key yet")
        }
        return signing
    }
}
