import Core
import Foundation

extension StripeKeys {
    /// `REDEEM_STRIPE_SECRET_KEY` (or the file `REDEEM_STRIPE_SECRET_KEY_FILE` names); nil when
    /// neither is set: Stripe is not connected.
    public init?(env: Environment) throws {
        guard let given = try env.valueOrFile("REDEEM_STRIPE_SECRET_KEY", file: "REDEEM_STRIPE_SECRET_KEY_FILE") else {
            return nil
        }
        try self.init(text: given.text, variable: given.variable)
    }
}
