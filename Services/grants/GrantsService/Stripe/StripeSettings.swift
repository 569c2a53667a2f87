import Core
import Foundation
import Runtime

/// The Stripe API settings (docs/stripe.md): read only when `REDEEM_STRIPE_SECRET_KEY` is set,
/// which is what "Stripe is connected" means. Each key serves the Redeem mode its prefix says
/// (`StripeKeys`), so a test coupon only ever reaches Stripe with a test key.
struct StripeSettings: Sendable {
    var keys: StripeKeys
    /// Stripe's API (`REDEEM_STRIPE_API_URL`, default `https://api.stripe.com`): a fake in tests.
    var apiURL: URL

    /// nil when Stripe is not connected.
    init?(env: Environment) throws {
        guard let keys = try StripeKeys(env: env) else { return nil }
        self.keys = keys
        apiURL = try env.url("REDEEM_STRIPE_API_URL", default: "https://api.stripe.com")
    }
}
