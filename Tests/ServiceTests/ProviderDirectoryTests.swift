import Foundation
import TestSupport
import Testing

@testable import Core
@testable import Cryptography
@testable import Database
@testable import GrantsService

/// Each app's own RevenueCat project (docs/apps.md): `ProviderDirectory` resolves
/// `revenuecat@<app>` and `revenuecat-sandbox@<app>` from the app's sealed settings, calling
/// RevenueCat (a fake that records the key it is called with) with that app's key and mode, and
/// follows the settings as they change or go.
@Suite struct ProviderDirectoryTests {
    static func put(_ pool: PGPool, app: UUID, mode: Mode, key: String, keyring: SecretKeyring) async throws {
        let checked = try AppCredentials.check(.revenueCat, mode: mode, StoreSettingsInput(secretKey: key))
        _ = try await pool.transaction { tx in
            try AppCredentials.put(tx, app: app, mode: mode, provider: .revenueCat, checked, keyring: keyring)
        }
    }

    /// Grants through the provider `name` resolves to, answering the key RevenueCat was called with.
    static func grant(_ directory: ProviderDirectory, _ name: String, fake: FakeRevenueCat) async throws -> String? {
        let resolved = try #require(await directory.resolve(name), "\(name) resolves")
        #expect(resolved.provider.name == name)
        #expect(resolved.limiter != nil, "an app's RevenueCat calls are rate limited")
        let before = fake.received.count
        let answer = await resolved.provider.grant(
            appUserId: "holder-\(UUID().uuidString)", entitlementId: "pro", endTimeMs: 1_900_000_000_000)
        guard case .http(let status, _, _) = answer else {
            Issue.record("no HTTP answer: \(answer)")
            return nil
        }
        #expect((200..<300).contains(status))
        #expect(fake.received.count == before + 1)
        return fake.received.last?.authorization
    }

    @Test func anAppsRevenueCatIsCalledWithItsOwnKeyPerModeAndFollowsItsChanges() async throws {
        let url = try await TestPostgres.shared().freshDatabase()
        let pool = PGPool(url: url, maxConnections: 2)
        defer { pool.close() }
        try await GrantsService.migrator.apply(on: pool)
        let fake = try FakeRevenueCat()
        let keyring = SecretKeyring.random()
        func directory(recheck: Duration) -> ProviderDirectory {
            ProviderDirectory(
                fixed: ["local": LocalLedger(name: "local")], limiters: [:], pool: pool, keyring: keyring,
                revenueCatURL: fake.url, timeout: 5, rate: 1000, recheck: recheck)
        }
        let here = directory(recheck: .seconds(3600))
        let app = UUID.random(), other = UUID.random()
        let live = ProviderDirectory.revenueCatName(app: app, sandbox: false)
        let sandbox = ProviderDirectory.revenueCatName(app: app, sandbox: true)
        #expect(live == "revenuecat@" + app.lowercasedString && sandbox == "revenuecat-sandbox@" + app.lowercasedString)

        // Nothing set: no names to choose, and a grant naming one waits (unknown).
        let none = try await here.names(forApp: app)
        #expect(none.live == nil && none.sandbox == nil)
        #expect(await here.resolve(live) == nil)

        try await Self.put(pool, app: app, mode: .live, key: "sk_app_live_one", keyring: keyring)
        try await Self.put(pool, app: app, mode: .test, key: "sk_app_test_one", keyring: keyring)
        try await Self.put(pool, app: other, mode: .live, key: "sk_other_live", keyring: keyring)
        here.forget(app: app)
        let names = try await here.names(forApp: app)
        #expect(names.live == live && names.sandbox == sandbox)
        let otherNames = try await here.names(forApp: other)
        #expect(otherNames.live != nil && otherNames.sandbox == nil, "another app with live settings only")
        #expect(try await Self.grant(here, live, fake: fake) == "Bearer sk_app_live_one")
        #expect(
            try await Self.grant(here, sandbox, fake: fake) == "Bearer sk_app_test_one",
            "test mode's project for sandbox grants")
        #expect(
            try await Self.grant(here, ProviderDirectory.revenueCatName(app: other, sandbox: false), fake: fake)
                == "Bearer sk_other_live")
        // The deployment's providers as they were; a name that is not an app's is unknown.
        #expect(await here.resolve("local")?.provider is LocalLedger)
        #expect(here.unlimitedFixed("local") && !here.unlimitedFixed(live))
        #expect(await here.resolve("revenuecat@not-an-app") == nil)
        #expect(await here.resolve("stripe@" + app.lowercasedString) == nil)
        // The default app's settings are the environment's: it has no names of its own.
        let ofDefault = try await here.names(forApp: DefaultApp.id)
        #expect(ofDefault.live == nil && ofDefault.sandbox == nil)

        // A new key: noticed at once where it was set (`forget`), and by another instance at its
        // next check of the version.
        let elsewhere = directory(recheck: .zero)
        #expect(try await Self.grant(elsewhere, live, fake: fake) == "Bearer sk_app_live_one")
        try await Self.put(pool, app: app, mode: .live, key: "sk_app_live_two", keyring: keyring)
        #expect(try await Self.grant(here, live, fake: fake) == "Bearer sk_app_live_one", "cached until forgotten")
        here.forget(app: app)
        #expect(try await Self.grant(here, live, fake: fake) == "Bearer sk_app_live_two")
        #expect(try await Self.grant(elsewhere, live, fake: fake) == "Bearer sk_app_live_two")

        // Removed: the name is unknown again.
        _ = try await pool.transaction { tx in
            try AppCredentials.clear(tx, app: app, mode: .live, provider: .revenueCat)
        }
        #expect(await elsewhere.resolve(live) == nil)
        #expect(try await here.names(forApp: app).live == nil)

        // Sealed under another key (a copy of the database without REDEEM_SECRET_KEY): not opened.
        let stranger = ProviderDirectory(
            fixed: [:], limiters: [:], pool: pool, keyring: SecretKeyring.random(), revenueCatURL: fake.url, timeout: 5,
            rate: 1000)
        #expect(await stranger.resolve(sandbox) == nil)
        await fake.stop()
    }

    @Test func theSettingsOfEachProviderAreCheckedFieldByField() throws {
        let apple = try TestAppleAPIKey()
        let pem = try String(contentsOf: apple.privateKeyFile, encoding: .utf8)
        let checked = try AppCredentials.check(
            .appStore, mode: .live,
            StoreSettingsInput(issuerId: apple.issuerId, keyId: apple.keyId, privateKey: pem, appAppleId: "123"))
        #expect(checked.shown.keyId == apple.keyId && checked.secrets.privateKey == pem && checked.ending.count == 4)
        func field(_ provider: StoreProvider, _ mode: Mode = .live, _ input: StoreSettingsInput) -> String? {
            do {
                _ = try AppCredentials.check(provider, mode: mode, input)
                return nil
            } catch let e as ServiceError {
                return e.field
            } catch { return "?" }
        }
        #expect(field(.stripe, .test, StoreSettingsInput(secretKey: "sk_live_abc")) == "secretKey")
        #expect(field(.stripe, .live, StoreSettingsInput(secretKey: "rk_live_abc")) == nil, "a restricted key")
        #expect(field(.stripe, .test, StoreSettingsInput(secretKey: "sk_test_abc", webhookSecret: "whsec_x1")) == nil)
        #expect(field(.revenueCat, .live, StoreSettingsInput(issuerId: "x", secretKey: "sk_abcdefgh")) == "issuerId")
        #expect(field(.revenueCat, .live, StoreSettingsInput()) == "secretKey")
        // RevenueCat's Stripe app public key: optional, checked, shown (not secret); Stripe takes none.
        let rc = try AppCredentials.check(
            .revenueCat, mode: .live, StoreSettingsInput(secretKey: "sk_abcdefgh", stripePublicKey: "strp_abc123"))
        #expect(rc.shown.stripePublicKey == "strp_abc123" && rc.secrets.secretKey == "sk_abcdefgh")
        #expect(
            field(.revenueCat, .live, StoreSettingsInput(secretKey: "sk_abcdefgh", stripePublicKey: "strp abc"))
                == "stripePublicKey")
        #expect(
            field(.stripe, .live, StoreSettingsInput(secretKey: "sk_live_abc", stripePublicKey: "strp_abc"))
                == "stripePublicKey")
        #expect(
            field(.googlePlay, .live, StoreSettingsInput(serviceAccount: "{}", packageName: "com.a.b"))
                == "serviceAccount")
        #expect(
            field(.appStore, .live, StoreSettingsInput(issuerId: "i", keyId: "k", privateKey: pem, appAppleId: "12a"))
                == "appAppleId")
    }
}
