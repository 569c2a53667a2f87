import Core
import Foundation
import Runtime

/// Settings of the coupons service (README configuration table).
struct CouponsConfig: Sendable {
    /// Seconds a discount reservation waits for its purchase confirmation.
    var reservationTTL: TimeInterval
    /// How often expired reservations are released.
    var sweepInterval: Duration
    var defaultEntitlement: String
    /// Where grants pulls grant commands (PUSH connects here).
    var grantCommands: [String]
    /// Where grants answers requests (`REDEEM_GRANTS_BUS`): another app's store settings.
    var grantsBus: [String]
    var stores: StoreSettings

    init(env: Environment) throws {
        reservationTTL = TimeInterval(try env.int("REDEEM_RESERVATION_TTL", default: 86_400, range: 1...(90 * 86_400)))
        sweepInterval = .milliseconds(
            try env.int("REDEEM_RESERVATION_SWEEP_MS", default: 30_000, range: 100...3_600_000))
        defaultEntitlement = env.string("REDEEM_DEFAULT_ENTITLEMENT", default: "all")
        grantCommands = try BusAddress.grantCommands(env)
        grantsBus = try BusAddress.requests("grants", env)
        stores = try StoreSettings(env: env)
    }
}

/// What coupons knows of the stores (docs/stores.md, "Settings"). Grants talks to them; coupons
/// only learns whether the App Store is connected, the app's Apple id (for the offer-code page)
/// and how long a new code settles at Apple.
struct StoreSettings: Sendable {
    /// `REDEEM_ASC_KEY_ID` is set: coupons that cover iOS with plans become App Store offers.
    var appStoreConnected: Bool
    /// The app's Apple id (`REDEEM_APPLE_APP_ID`), required once the App Store is connected.
    var appleAppId: String?
    /// Seconds after Apple made a custom code before its offer counts as `ready` (a first verified
    /// purchase makes it ready sooner).
    var offerSettle: TimeInterval
    /// `REDEEM_PLAY_SERVICE_ACCOUNT` is set: coupons that cover Android with plans become Google
    /// Play offers, one per base plan.
    var playConnected = false
    /// Seconds after Google activated an offer before it counts as `ready` (a first verified
    /// purchase makes it ready sooner).
    var playOfferSettle: TimeInterval = 900
    /// The modes Stripe is connected in (`REDEEM_STRIPE_SECRET_KEY`: a `sk_test_…` key connects
    /// test mode, a `sk_live_…` key live mode): coupons of such a mode that cover the web become
    /// Stripe coupons. Coupons reads only the keys' prefixes; grants makes the calls.
    var stripeModes: Set<Mode> = []
    /// For another app than the default one: its own Apple id in a mode (`AppleAppIds`), which
    /// replaces `appleAppId` once the coupon's mode is known (`forMode`). Nil for the default app.
    var appleAppIdOfMode: (@Sendable (Mode) throws -> String?)?

    /// No store connected: coupons behave as before stores (no offers, never `notReady`).
    static let none = StoreSettings(appStoreConnected: false, appleAppId: nil, offerSettle: 3600)

    init(
        appStoreConnected: Bool, appleAppId: String?, offerSettle: TimeInterval, playConnected: Bool = false,
        playOfferSettle: TimeInterval = 900
    ) {
        self.appStoreConnected = appStoreConnected
        self.appleAppId = appleAppId
        self.offerSettle = offerSettle
        self.playConnected = playConnected
        self.playOfferSettle = playOfferSettle
    }

    /// How long a new offer of `store` settles before it is `ready`.
    func settle(_ store: Store) -> TimeInterval {
        switch store {
        case .appStore: offerSettle
        case .playStore: playOfferSettle
        case .stripe: 0  // a promotion code is usable once Stripe answers with it
        }
    }

    init(env: Environment) throws {
        appStoreConnected = env.raw("REDEEM_ASC_KEY_ID") != nil
        appleAppId = env.raw("REDEEM_APPLE_APP_ID")
        if let id = appleAppId, !(1...20).contains(id.count) || !id.allSatisfy({ $0.isASCII && $0.isNumber }) {
            throw ConfigError(
                variable: "REDEEM_APPLE_APP_ID", problem: "expected the app's Apple id, a number such as 1234567890")
        }
        if appStoreConnected && appleAppId == nil {
            throw ConfigError(
                variable: "REDEEM_APPLE_APP_ID",
                problem: "required once the App Store is connected (REDEEM_ASC_KEY_ID is set)")
        }
        offerSettle = TimeInterval(try env.int("REDEEM_APPLE_OFFER_SETTLE", default: 3600, range: 0...(7 * 86_400)))
        playConnected = env.raw("REDEEM_PLAY_SERVICE_ACCOUNT") != nil
        playOfferSettle = TimeInterval(try env.int("REDEEM_PLAY_OFFER_SETTLE", default: 900, range: 0...(7 * 86_400)))
        stripeModes = Set(try StripeKeys(env: env)?.modes ?? [])
    }

    /// The settings a coupon of `mode` is answered with: another app's own Apple id of the mode
    /// (which may throw `AppleAppIds.Unknown`), the environment's for the default app.
    func forMode(_ mode: Mode) throws -> StoreSettings {
        guard let appleAppIdOfMode else { return self }
        var settings = self
        settings.appleAppId = try appleAppIdOfMode(mode)
        return settings
    }

    /// Apple's offer-code page with `code` filled in, when the app's id is known.
    func redemptionURL(code: String) -> String? {
        appleAppId.map { AppStoreHandoff.redemptionURL(appId: $0, code: code) }
    }

    /// What validate hands an iOS client for a coupon with App Store offers: the offer-code page
    /// of each ready plan, with that plan's code (`codes`, by product id), and the plan asked for
    /// (else the first ready one) as `redemptionUrl`; the coupon's own code when no plan is ready.
    /// Nil without the App Store's id.
    func appStoreHandoff(codes: [String: String], coupon code: String, plan: String? = nil) -> AppStoreHandoff? {
        let first = plan.flatMap { codes[$0] } ?? codes.min { $0.key < $1.key }?.value ?? code
        guard let url = redemptionURL(code: first) else { return nil }
        let urls = codes.compactMapValues { redemptionURL(code: $0) }
        return AppStoreHandoff(redemptionUrl: url, appAccountToken: nil, redemptionUrls: urls.isEmpty ? nil : urls)
    }
}
