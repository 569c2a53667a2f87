import Core
import Foundation
import Runtime

/// Settings of the grants service (README configuration table).
struct GrantsConfig: Sendable {
    var provider: String
    var revenueCatURL: URL
    var revenueCatKey: String?
    var revenueCatSandboxKey: String?
    /// Provider calls per second (RevenueCat allows about 480 customer requests a minute).
    var providerRate: Double
    var webhookSchedule: [TimeInterval]
    var webhookAllowPrivate: Bool
    var commandsBind: [String]
    var eventsBind: [String]
    var couponsBus: [String]
    var maxRetryDelay: TimeInterval
    var providerTimeout: TimeInterval
    /// Set when the App Store is connected (`REDEEM_ASC_KEY_ID`): offers and their codes.
    var appStoreConnect: AppStoreConnectSettings?
    /// Where App Store Connect is (`REDEEM_ASC_URL`), for other apps' own settings too.
    var appStoreConnectURL: URL
    /// Where Google's token endpoint and the Play Developer API are (`REDEEM_GOOGLE_TOKEN_URL`,
    /// `REDEEM_PLAY_API_URL`), for other apps' own Google Play settings too.
    var googleTokenURL: URL
    var playAPIURL: URL
    /// Set when `REDEEM_APPSTORE_KEY_ID` is: purchases fetched from the App Store Server API.
    var appStoreServer: AppStoreServerSettings?
    /// Set when Google Play is connected (`REDEEM_PLAY_SERVICE_ACCOUNT`): offers on base plans,
    /// purchases read and acknowledged.
    var play: PlaySettings?
    /// Set when Stripe is connected (`REDEEM_STRIPE_SECRET_KEY`): Stripe coupons and promotion
    /// codes for the web, with the key of each coupon's mode.
    var stripe: StripeSettings?
    /// Where Stripe is (`REDEEM_STRIPE_API_URL`), for other apps' own Stripe settings too.
    var stripeAPIURL: URL
    /// RevenueCat's Stripe app public key (`REDEEM_REVENUECAT_STRIPE_PUBLIC_KEY`): set, a completed
    /// Stripe checkout's subscription is sent to RevenueCat as a receipt.
    var revenueCatStripeKey: String?

    init(env: Environment) throws {
        provider = try env.choice("REDEEM_ENTITLEMENT_PROVIDER", default: "local", allowed: ["local", "revenuecat"])
        revenueCatURL = try env.url("REDEEM_REVENUECAT_URL", default: "https://api.revenuecat.com")
        revenueCatKey = env.raw("REDEEM_REVENUECAT_KEY")
        revenueCatSandboxKey = env.raw("REDEEM_REVENUECAT_SANDBOX_KEY")
        if provider == "revenuecat" && revenueCatKey == nil {
            throw ConfigError(variable: "REDEEM_REVENUECAT_KEY", problem: "is required when REDEEM_ENTITLEMENT_PROVIDER is revenuecat")
        }
        providerRate = try env.double("REDEEM_PROVIDER_RATE", default: 8, range: 0.1...100_000)
        let gaps = env.list("REDEEM_WEBHOOK_RETRY_SCHEDULE", default: ["5", "300", "1800", "7200", "18000", "36000", "50400", "72000", "86400"])
        webhookSchedule = try gaps.map {
            guard let v = Double($0), v >= 0 else {
                throw ConfigError(variable: "REDEEM_WEBHOOK_RETRY_SCHEDULE", problem: "expected seconds separated by commas, got \"\($0.prefix(20))\"")
            }
            return v
        }
        webhookAllowPrivate = try env.flag("REDEEM_WEBHOOK_ALLOW_PRIVATE", default: false)
        commandsBind = try BusAddress.grantCommandsBind(env)
        eventsBind = try BusAddress.eventsBind("grants", env)
        couponsBus = try BusAddress.requests("coupons", env)
        maxRetryDelay = TimeInterval(try env.int("REDEEM_GRANT_MAX_RETRY_SECONDS", default: 300, range: 1...3600))
        providerTimeout = TimeInterval(try env.int("REDEEM_PROVIDER_TIMEOUT_SECONDS", default: 10, range: 1...120))
        appStoreConnect = try AppStoreConnectSettings(env: env)
        appStoreConnectURL = try env.url("REDEEM_ASC_URL", default: "https://api.appstoreconnect.apple.com")
        appStoreServer = try AppStoreServerSettings(env: env)
        play = try PlaySettings(env: env)
        googleTokenURL = try env.url("REDEEM_GOOGLE_TOKEN_URL", default: "https://oauth2.googleapis.com/token")
        playAPIURL = try env.url("REDEEM_PLAY_API_URL", default: "https://androidpublisher.googleapis.com")
        stripe = try StripeSettings(env: env)
        stripeAPIURL = try env.url("REDEEM_STRIPE_API_URL", default: "https://api.stripe.com")
        revenueCatStripeKey = env.raw("REDEEM_REVENUECAT_STRIPE_PUBLIC_KEY")
    }
}
