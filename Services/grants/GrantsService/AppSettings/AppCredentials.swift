import Core
import Cryptography
import Database
import Foundation

/// The store and RevenueCat settings of apps other than the default one (docs/apps.md), as
/// `grants.app_store_settings` holds them: one row per app, mode and provider, checked as they are
/// set, the secrets sealed under `REDEEM_SECRET_KEY` and bound to their row. The default app's
/// settings are the environment's: setting them here is refused.
enum AppCredentials {
    /// The fields that are not secret, stored as JSON and shown by the API.
    struct Public: Codable, Sendable, Equatable {
        var issuerId: String?
        var keyId: String?
        var appAppleId: String?
        var packageName: String?
        var serviceAccountEmail: String?
        var webhookSecretSet: Bool?
        /// RevenueCat: its Stripe app's public key, the bearer of Stripe receipts.
        var stripePublicKey: String?
    }

    /// The secret fields, sealed together: never shown, logged or written to the audit log.
    struct Secrets: Codable, Sendable, Equatable {
        var privateKey: String?
        var serviceAccount: String?
        var secretKey: String?
        var webhookSecret: String?
    }

    /// Settings that passed `check`, ready to store.
    struct Checked: Sendable {
        var shown: Public
        var secrets: Secrets
        /// The last four characters that tell settings apart without revealing them.
        var ending: String
    }

    /// One row, opened: what a provider is built from.
    struct Opened: Sendable {
        var app: UUID
        var mode: Mode
        var provider: StoreProvider
        var shown: Public
        var secrets: Secrets
        var version: Int64
    }

    static let defaultAppRefused = ServiceError(
        .invalid,
        "the default app's store and RevenueCat settings are the environment's REDEEM_* settings; they are not stored",
        field: "app")

    // MARK: Checking

    /// The input's settings for `provider` in `mode`, or `invalid` naming the first wrong field: a
    /// missing or malformed one, one the provider does not take, or a Stripe key of the other mode.
    static func check(_ provider: StoreProvider, mode: Mode, _ input: StoreSettingsInput) throws -> Checked {
        let given: [(String, String?)] = [
            ("issuerId", input.issuerId), ("keyId", input.keyId), ("privateKey", input.privateKey),
            ("appAppleId", input.appAppleId), ("serviceAccount", input.serviceAccount),
            ("packageName", input.packageName), ("secretKey", input.secretKey), ("webhookSecret", input.webhookSecret),
            ("stripePublicKey", input.stripePublicKey)
        ]
        let takes = fields(of: provider)
        if let stray = given.first(where: { $0.1 != nil && !takes.contains($0.0) }) {
            throw ServiceError(
                .invalid, "\(provider.rawValue) settings take \(takes.joined(separator: ", ")), not \(stray.0)",
                field: stray.0)
        }
        switch provider {
        case .appStore:
            let issuer = try token(input.issuerId, "issuerId", max: 100)
            let keyId = try token(input.keyId, "keyId", max: 40)
            let pem = try required(input.privateKey, "privateKey")
            guard pem.utf8.count <= 10_000, let key = ES256Key.privateKey(pem: pem) else {
                throw ServiceError(
                    .invalid, "privateKey must be the App Store Connect API key's .p8 file: a P-256 private key in PEM",
                    field: "privateKey")
            }
            let appId = try required(input.appAppleId, "appAppleId")
            guard appId.count <= 20, appId.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                throw ServiceError(
                    .invalid, "appAppleId must be the app's Apple id, a number such as 1234567890", field: "appAppleId")
            }
            return Checked(
                shown: Public(issuerId: issuer, keyId: keyId, appAppleId: appId), secrets: Secrets(privateKey: pem),
                ending: fingerprintEnding(key.publicKeyDER))
        case .googlePlay:
            let text = try required(input.serviceAccount, "serviceAccount")
            let account: GoogleServiceAccount
            do {
                guard text.utf8.count <= 20_000 else { throw GoogleServiceAccount.Failure.unreadableKey("too long") }
                account = try GoogleServiceAccount(json: Data(text.utf8))
            } catch {
                throw ServiceError(
                    .invalid, "serviceAccount must be a service account's JSON key file, with an RSA private key",
                    field: "serviceAccount")
            }
            let package = try required(input.packageName, "packageName")
            guard PlaySettings.isPackageName(package) else {
                throw ServiceError(
                    .invalid, "packageName must be an Android package name such as com.example.app",
                    field: "packageName")
            }
            return Checked(
                shown: Public(packageName: package, serviceAccountEmail: account.email),
                secrets: Secrets(serviceAccount: text),
                ending: fingerprintEnding(Array((account.keyId ?? account.email).utf8)))
        case .stripe:
            let key = try required(input.secretKey, "secretKey")
            guard let keyMode = StripeKeys.mode(of: key) else {
                throw ServiceError(
                    .invalid, "secretKey must be a Stripe secret key, sk_test_… or sk_live_…", field: "secretKey")
            }
            guard keyMode == mode else {
                throw ServiceError(
                    .invalid,
                    "secretKey is a \(keyMode.rawValue) mode key; \(mode.rawValue) mode takes a key starting sk_\(mode.rawValue)_ (or rk_\(mode.rawValue)_)",
                    field: "secretKey")
            }
            if let hook = input.webhookSecret {
                guard hook.hasPrefix("whsec_"), (7...200).contains(hook.count),
                    hook.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") })
                else {
                    throw ServiceError(
                        .invalid, "webhookSecret must be a Stripe webhook signing secret, whsec_…",
                        field: "webhookSecret")
                }
            }
            return Checked(
                shown: Public(webhookSecretSet: input.webhookSecret != nil),
                secrets: Secrets(secretKey: key, webhookSecret: input.webhookSecret), ending: String(key.suffix(4)))
        case .revenueCat:
            let key = try token(input.secretKey, "secretKey", max: 200)
            guard key.count >= 8 else {
                throw ServiceError(
                    .invalid, "secretKey must be the RevenueCat project's secret API key", field: "secretKey")
            }
            let stripePublicKey = try input.stripePublicKey.map { try token($0, "stripePublicKey", max: 200) }
            return Checked(
                shown: Public(stripePublicKey: stripePublicKey), secrets: Secrets(secretKey: key),
                ending: String(key.suffix(4)))
        }
    }

    /// The fields each provider takes.
    static func fields(of provider: StoreProvider) -> [String] {
        switch provider {
        case .appStore: ["issuerId", "keyId", "privateKey", "appAppleId"]
        case .googlePlay: ["serviceAccount", "packageName"]
        case .stripe: ["secretKey", "webhookSecret"]
        case .revenueCat: ["secretKey", "stripePublicKey"]
        }
    }

    private static func required(_ value: String?, _ field: String) throws -> String {
        guard let value, !value.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw ServiceError(.invalid, "\(field) is required", field: field)
        }
        return value
    }

    /// A required value of 1 to `max` printable ASCII characters without spaces.
    private static func token(_ value: String?, _ field: String, max: Int) throws -> String {
        let value = try required(value, field)
        guard value.count <= max,
            value.allSatisfy({ $0.isASCII && !$0.isWhitespace && !$0.isNewline && $0 != "\u{7f}" && $0 >= " " })
        else {
            throw ServiceError(.invalid, "\(field) must be 1 to \(max) characters without spaces", field: field)
        }
        return value
    }

    /// The last four hex digits of a SHA-256 of what is not secret (a public key): for settings
    /// whose secret is a key file, whose last characters are the same in every file.
    private static func fingerprintEnding(_ bytes: [UInt8]) -> String {
        String(Crypto.sha256(bytes).suffix(2).map { String(format: "%02x", $0) }.joined())
    }

    // MARK: Storing

    /// What a row's sealed secrets are bound to: the row's app, mode and provider.
    static func context(app: UUID, mode: Mode, provider: StoreProvider) -> String {
        "grants.app_store_settings/\(app.lowercasedString)/\(mode.rawValue)/\(provider.rawValue)"
    }

    static func seal(
        _ secrets: Secrets, app: UUID, mode: Mode, provider: StoreProvider, keyring: SecretKeyring
    ) throws
        -> (text: String, keyId: String)
    {
        let plain = try JSONEncoder.bus.encode(secrets)
        let sealed = keyring.seal(Array(plain), context: context(app: app, mode: mode, provider: provider))
        return (Data(sealed.sealed).base64EncodedString(), sealed.keyId)
    }

    static func open(
        _ text: String, keyId: String, app: UUID, mode: Mode, provider: StoreProvider, keyring: SecretKeyring
    ) throws
        -> Secrets
    {
        let context = context(app: app, mode: mode, provider: provider)
        guard let bytes = Data(base64Encoded: text) else { throw SecretKeyring.Failure.altered(context) }
        let plain = try keyring.open(Array(bytes), keyId: keyId, context: context)
        guard let secrets = try? JSONDecoder.bus.decode(Secrets.self, from: Data(plain)) else {
            throw SecretKeyring.Failure.altered(context)
        }
        return secrets
    }

    private static let columns = "provider, mode, settings::text AS settings, secret_ending, updated_at"

    static func view(_ row: PGRow) throws -> StoreSettingsView {
        guard let provider = StoreProvider(rawValue: try row.decode("provider")),
            let mode = Mode(rawValue: try row.decode("mode"))
        else { throw ServiceError.internal }
        let shown = try JSONDecoder.bus.decode(
            Public.self, from: Data(try row.decode("settings", as: String.self).utf8))
        return StoreSettingsView(
            provider: provider, mode: mode, issuerId: shown.issuerId, keyId: shown.keyId, appAppleId: shown.appAppleId,
            packageName: shown.packageName, serviceAccountEmail: shown.serviceAccountEmail,
            secretEnding: try row.decode("secret_ending"), webhookSecretSet: shown.webhookSecretSet,
            stripePublicKey: shown.stripePublicKey, updatedAt: try row.decode("updated_at"))
    }

    /// Sets one provider's settings (replacing any), answering what was there before and what is now.
    static func put(
        _ tx: PGConnection, app: UUID, mode: Mode, provider: StoreProvider, _ checked: Checked, keyring: SecretKeyring
    ) throws -> (before: StoreSettingsView?, after: StoreSettingsView) {
        guard app != DefaultApp.id else { throw defaultAppRefused }
        let before = try tx.query(
            "SELECT \(columns) FROM grants.app_store_settings WHERE app_id = $1 AND mode = $2 AND provider = $3 FOR UPDATE",
            [app, mode.rawValue, provider.rawValue]
        ).first.map(view)
        let sealed = try seal(checked.secrets, app: app, mode: mode, provider: provider, keyring: keyring)
        let shown = String(decoding: try JSONEncoder.bus.encode(checked.shown), as: UTF8.self)
        let row = try tx.query(
            """
            INSERT INTO grants.app_store_settings AS s (app_id, mode, provider, settings, secret, secret_key_id, secret_ending)
            VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7)
            ON CONFLICT (app_id, mode, provider) DO UPDATE
            SET settings = excluded.settings, secret = excluded.secret, secret_key_id = excluded.secret_key_id,
                secret_ending = excluded.secret_ending, version = s.version + 1, updated_at = now()
            RETURNING \(columns)
            """,
            [app, mode.rawValue, provider.rawValue, shown, sealed.text, sealed.keyId, checked.ending]
        ).first!
        return (before, try view(row))
    }

    /// Removes one provider's settings, answering them; nil when none were set.
    static func clear(_ tx: PGConnection, app: UUID, mode: Mode, provider: StoreProvider) throws -> StoreSettingsView? {
        try tx.query(
            "DELETE FROM grants.app_store_settings WHERE app_id = $1 AND mode = $2 AND provider = $3 RETURNING \(columns)",
            [app, mode.rawValue, provider.rawValue]
        ).first.map(view)
    }

    /// The providers an app has settings for in a mode, in the order of `StoreProvider`.
    static func list(_ c: PGConnection, app: UUID, mode: Mode) throws -> [StoreSettingsView] {
        let views = try c.query(
            "SELECT \(columns) FROM grants.app_store_settings WHERE app_id = $1 AND mode = $2",
            [app, mode.rawValue]
        ).rows.map(view)
        return StoreProvider.allCases.compactMap { p in views.first { $0.provider == p } }
    }

    /// The version of one provider's settings, nil when none are set: cheap, for a cache to check.
    static func version(_ c: PGConnection, app: UUID, mode: Mode, provider: StoreProvider) throws -> Int64? {
        try c.query(
            "SELECT version FROM grants.app_store_settings WHERE app_id = $1 AND mode = $2 AND provider = $3",
            [app, mode.rawValue, provider.rawValue]
        ).first.map { try $0.decode("version") }
    }

    /// The one app whose Google Play settings of `mode` name `packageName` (a push names only its
    /// package); nil when none or several do.
    static func app(_ c: PGConnection, packageName: String, mode: Mode) throws -> UUID? {
        let rows = try c.query(
            """
            SELECT app_id FROM grants.app_store_settings
            WHERE provider = 'googleplay' AND mode = $1 AND settings->>'packageName' = $2 LIMIT 2
            """, [mode.rawValue, packageName]
        ).rows
        guard rows.count == 1 else { return nil }
        return try rows[0].decode("app_id")
    }

    /// One provider's settings with their secrets opened; nil when none are set.
    static func opened(
        _ c: PGConnection, app: UUID, mode: Mode, provider: StoreProvider, keyring: SecretKeyring
    ) throws
        -> Opened?
    {
        guard
            let row = try c.query(
                """
                SELECT settings::text AS settings, secret, secret_key_id, version FROM grants.app_store_settings
                WHERE app_id = $1 AND mode = $2 AND provider = $3
                """, [app, mode.rawValue, provider.rawValue]
            ).first
        else { return nil }
        let shown = try JSONDecoder.bus.decode(
            Public.self, from: Data(try row.decode("settings", as: String.self).utf8))
        let secrets = try open(
            try row.decode("secret"), keyId: try row.decode("secret_key_id"), app: app, mode: mode, provider: provider,
            keyring: keyring)
        return Opened(
            app: app, mode: mode, provider: provider, shown: shown, secrets: secrets, version: try row.decode("version")
        )
    }

    /// Seals under the current key every row sealed under another (after a rotation of
    /// `REDEEM_SECRET_KEY`); the version stays, since the settings do not change. Answers how many.
    static func reseal(_ pool: PGPool, keyring: SecretKeyring) async throws -> Int {
        try await pool.transaction { tx in
            let rows = try tx.query(
                """
                SELECT app_id, mode, provider, secret, secret_key_id FROM grants.app_store_settings
                WHERE secret_key_id <> $1 FOR UPDATE
                """, [keyring.current.id]
            ).rows
            for row in rows {
                let app: UUID = try row.decode("app_id")
                guard let mode = Mode(rawValue: try row.decode("mode")),
                    let provider = StoreProvider(rawValue: try row.decode("provider"))
                else { continue }
                let secrets = try open(
                    try row.decode("secret"), keyId: try row.decode("secret_key_id"), app: app, mode: mode,
                    provider: provider, keyring: keyring)
                let again = try seal(secrets, app: app, mode: mode, provider: provider, keyring: keyring)
                _ = try tx.query(
                    """
                    UPDATE grants.app_store_settings SET secret = $4, secret_key_id = $5
                    WHERE app_id = $1 AND mode = $2 AND provider = $3
                    """, [app, mode.rawValue, provider.rawValue, again.text, again.keyId])
            }
            return rows.count
        }
    }
}
