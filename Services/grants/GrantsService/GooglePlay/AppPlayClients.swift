import Core
import Cryptography
import Database
import Foundation
import Synchronization

/// The Google Play Developer API clients of apps other than the default one (docs/apps.md), each
/// built from the app's own sealed `googleplay` settings of a mode (its service account and
/// package name) and kept while those settings' version stays, so its access token is reused.
/// Settings changed are used at the next call; settings removed give no client.
final class AppPlayClients: Sendable {
    private struct Key: Hashable {
        var app: UUID
        var mode: Mode
    }

    let keyring: SecretKeyring
    let tokenURL: URL
    let apiURL: URL
    let timeout: TimeInterval
    let retry: AppleRetry
    private let kept = Mutex<[Key: (version: Int64, client: PlayDeveloperClient)]>([:])

    init(keyring: SecretKeyring, tokenURL: URL, apiURL: URL, timeout: TimeInterval, retry: AppleRetry) {
        self.keyring = keyring
        self.tokenURL = tokenURL
        self.apiURL = apiURL
        self.timeout = timeout
        self.retry = retry
    }

    /// The client of `app`'s Google Play settings of `mode`, nil when it has none now. A read of
    /// the settings' version each call; they are opened only when they changed.
    func client(_ c: PGConnection, app: UUID, mode: Mode) throws -> PlayDeveloperClient? {
        let key = Key(app: app, mode: mode)
        guard let version = try AppCredentials.version(c, app: app, mode: mode, provider: .googlePlay) else {
            kept.withLock { $0[key] = nil }
            return nil
        }
        if let held = kept.withLock({ $0[key] }), held.version == version { return held.client }
        guard let o = try AppCredentials.opened(c, app: app, mode: mode, provider: .googlePlay, keyring: keyring),
            let package = o.shown.packageName, let text = o.secrets.serviceAccount,
            let account = try? GoogleServiceAccount(json: Data(text.utf8))
        else { return nil }
        let client = PlayDeveloperClient(
            base: apiURL, packageName: package,
            tokens: GoogleAccessTokens(account: account, tokenURL: tokenURL, timeout: timeout, retry: retry),
            timeout: timeout, retry: retry)
        kept.withLock {
            if $0.count > 1_000 { $0.removeAll() }  // bounded: an app dropped costs a rebuild, not memory
            $0[key] = (o.version, client)
        }
        return client
    }
}
