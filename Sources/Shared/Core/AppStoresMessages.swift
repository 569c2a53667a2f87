import Foundation

// The store and RevenueCat settings of an app other than the default one (docs/apps.md), per mode:
// kept by grants, the secrets sealed under `REDEEM_SECRET_KEY` (gateway → grants). The default
// app's settings are the environment's `REDEEM_*` settings, never stored.

/// A provider whose settings an app keeps: App Store Connect, Google Play, Stripe or RevenueCat.
public enum StoreProvider: String, Codable, Sendable, CaseIterable, WireEnum {
    case appStore = "appstore"
    case googlePlay = "googleplay"
    case stripe
    case revenueCat = "revenuecat"
}

/// The fields given to set one provider's settings. Each provider takes its own (docs/apps.md);
/// a field another provider takes is refused, so nothing is stored that would not be used.
public struct StoreSettingsInput: Codable, Sendable, Equatable {
    /// App Store Connect: the API key's issuer and id, its `.p8` private key (PEM) and the app's Apple id.
    public var issuerId: String?
    public var keyId: String?
    public var privateKey: String?
    public var appAppleId: String?
    /// Google Play: the service account's JSON key file (its text) and the app's package name.
    public var serviceAccount: String?
    public var packageName: String?
    /// Stripe (`sk_test_…` in test mode, `sk_live_…` in live) and RevenueCat: the secret API key.
    public var secretKey: String?
    /// Stripe: the signing secret of its webhook endpoint (`whsec_…`), optional.
    public var webhookSecret: String?
    /// RevenueCat, optional: the public API key of the project's Stripe app, the bearer of the
    /// receipts of the app's Stripe checkouts (not secret).
    public var stripePublicKey: String?

    public init(
        issuerId: String? = nil, keyId: String? = nil, privateKey: String? = nil, appAppleId: String? = nil,
        serviceAccount: String? = nil, packageName: String? = nil, secretKey: String? = nil,
        webhookSecret: String? = nil, stripePublicKey: String? = nil
    ) {
        self.stripePublicKey = stripePublicKey
        self.issuerId = issuerId
        self.keyId = keyId
        self.privateKey = privateKey
        self.appAppleId = appAppleId
        self.serviceAccount = serviceAccount
        self.packageName = packageName
        self.secretKey = secretKey
        self.webhookSecret = webhookSecret
    }
}

/// One provider's stored settings of an app and mode as the API shows them: the fields that are
/// not secret, and of the secret only its last four characters.
public struct StoreSettingsView: Codable, Sendable, Equatable {
    public var provider: StoreProvider
    public var mode: Mode
    public var issuerId: String?
    public var keyId: String?
    public var appAppleId: String?
    public var packageName: String?
    /// Google Play: the service account's email.
    public var serviceAccountEmail: String?
    /// The last four characters of the secret (the API key, the private key's PEM text or the
    /// service account's key), to tell settings apart.
    public var secretEnding: String
    /// Stripe: whether a webhook signing secret is set.
    public var webhookSecretSet: Bool?
    /// RevenueCat: the public API key of the project's Stripe app, when set.
    public var stripePublicKey: String?
    public var updatedAt: Date

    public init(
        provider: StoreProvider, mode: Mode, issuerId: String? = nil, keyId: String? = nil, appAppleId: String? = nil,
        packageName: String? = nil, serviceAccountEmail: String? = nil, secretEnding: String,
        webhookSecretSet: Bool? = nil, stripePublicKey: String? = nil, updatedAt: Date
    ) {
        self.stripePublicKey = stripePublicKey
        self.provider = provider
        self.mode = mode
        self.issuerId = issuerId
        self.keyId = keyId
        self.appAppleId = appAppleId
        self.packageName = packageName
        self.serviceAccountEmail = serviceAccountEmail
        self.secretEnding = secretEnding
        self.webhookSecretSet = webhookSecretSet
        self.updatedAt = updatedAt
    }
}

public enum AppStores {
    /// Sets (or replaces) one provider's settings of an app in a mode. `invalid` with the field
    /// for a missing or wrong one, and for the default app, whose settings are the environment's.
    public struct Put: BusRequest, AuditedRequest {
        public static let type = "grants.appStores.put"
        public typealias Response = StoreSettingsView
        public var actor: AuditActor? = nil
        public var app: UUID
        public var mode: Mode
        public var provider: StoreProvider
        public var input: StoreSettingsInput
        public init(app: UUID, mode: Mode, provider: StoreProvider, input: StoreSettingsInput) {
            self.app = app
            self.mode = mode
            self.provider = provider
            self.input = input
        }
    }

    /// The providers an app has settings for in a mode, in the order of `StoreProvider`.
    public struct List: BusRequest {
        public static let type = "grants.appStores.list"
        public struct Response: Codable, Sendable, Equatable {
            public var data: [StoreSettingsView]
            public init(data: [StoreSettingsView]) { self.data = data }
        }
        public var app: UUID
        public var mode: Mode
        public init(app: UUID, mode: Mode) {
            self.app = app
            self.mode = mode
        }
    }

    /// Removes one provider's settings of an app in a mode; `notFound` when none are set.
    public struct Clear: BusRequest, AuditedRequest {
        public static let type = "grants.appStores.clear"
        public typealias Response = Empty
        public var actor: AuditActor? = nil
        public var app: UUID
        public var mode: Mode
        public var provider: StoreProvider
        public init(app: UUID, mode: Mode, provider: StoreProvider) {
            self.app = app
            self.mode = mode
            self.provider = provider
        }
    }
}
