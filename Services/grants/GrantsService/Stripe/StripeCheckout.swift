import Core
import Database
import Foundation

/// Stripe Checkout for web redemptions (docs/stripe.md): the Checkout Session of a reservation,
/// and the billing portal of an account that bought through it. Only grants holds the keys.
extension GrantsService {
    /// A Checkout Session in subscription mode: the plan's price, the coupon's promotion code
    /// applied, the redemption's id as `client_reference_id`, the account's Stripe customer.
    func stripeCheckout(_ req: Grants.StripeCheckout) async throws -> Grants.StripeCheckout.Response {
        guard let client = stripe[req.mode] else {
            throw ServiceError(.unavailable, "Stripe is not connected in \(req.mode.rawValue) mode")
        }
        let promotion = try await pool.withConnection { c in
            try c.query(
                """
                SELECT custom_code_id FROM grants.store_tasks
                WHERE coupon_id = $1 AND store = 'stripe' AND action = 'provision' AND custom_code_id IS NOT NULL
                """, [req.couponId]
            ).first?.decode("custom_code_id", as: String.self)
        }
        guard let promotion else {
            throw ServiceError(.unavailable, "the coupon's Stripe promotion code is not made yet; try again")
        }
        let customer = try await stripeCustomer(
            client, account: req.accountId, appUserId: req.appUserId, mode: req.mode)
        let form: [(String, String)] = [
            ("mode", "subscription"),
            ("line_items[0][price]", req.priceId), ("line_items[0][quantity]", "1"),
            ("discounts[0][promotion_code]", promotion),
            ("client_reference_id", req.redemptionId.lowercasedString),
            ("customer", customer),
            ("metadata[app_user_id]", req.appUserId),
            ("metadata[redeem_redemption_id]", req.redemptionId.lowercasedString),
            ("subscription_data[metadata][app_user_id]", req.appUserId),
            ("success_url", req.successURL), ("cancel_url", req.cancelURL)
        ]
        let session = try await Self.callingStripe { () async throws(AppleCallError) -> StripeClient.Session in
            try await client.createCheckoutSession(form)
        }
        return .init(checkoutUrl: session.url)
    }

    /// A billing-portal session for the account's Stripe customer (its latest, of either mode).
    func stripePortal(_ req: Grants.StripePortal) async throws -> Grants.StripePortal.Response {
        let known = try await pool.withConnection { c in
            try c.query(
                """
                SELECT customer_id, mode FROM grants.stripe_customers WHERE account_id = $1 ORDER BY created_at DESC LIMIT 1
                """, [req.accountId]
            ).first.map { (try $0.decode("customer_id", as: String.self), try $0.decode("mode", as: String.self)) }
        }
        guard let known, let client = stripe[Mode(rawValue: known.1) ?? .live] else {
            throw ServiceError(.notFound, "this account has no Stripe subscription")
        }
        let customer = known.0, back = req.returnURL
        let portal = try await Self.callingStripe { () async throws(AppleCallError) -> StripeClient.Session in
            try await client.createPortalSession(customer: customer, returnURL: back)
        }
        return .init(url: portal.url)
    }

    /// The account's customer in `mode`: made at its first checkout, then reused. Two first
    /// checkouts at once keep the customer stored first.
    func stripeCustomer(_ client: StripeClient, account: UUID, appUserId: String, mode: Mode) async throws -> String {
        let stored = try await pool.withConnection { c in
            try c.query(
                "SELECT customer_id FROM grants.stripe_customers WHERE account_id = $1 AND mode = $2",
                [account, mode.rawValue]
            ).first?.decode("customer_id", as: String.self)
        }
        if let stored { return stored }
        let form = [("metadata[app_user_id]", appUserId), ("metadata[redeem_account_id]", account.lowercasedString)]
        let made = try await Self.callingStripe { () async throws(AppleCallError) -> StripeClient.Customer in
            try await client.createCustomer(form)
        }
        return try await pool.withConnection { c in
            try c.query(
                """
                INSERT INTO grants.stripe_customers (account_id, mode, customer_id) VALUES ($1, $2, $3)
                ON CONFLICT (account_id, mode) DO UPDATE SET mode = stripe_customers.mode RETURNING customer_id
                """, [account, mode.rawValue, made.id]
            ).first!.decode("customer_id")
        }
    }

    /// A Stripe call, its failure as `unavailable` with Stripe's reason.
    static func callingStripe<T: Sendable>(_ call: () async throws(AppleCallError) -> T) async throws(ServiceError) -> T
    {
        do {
            return try await call()
        } catch {
            throw stripeUnavailable(error)
        }
    }

    static func stripeUnavailable(_ e: AppleCallError) -> ServiceError {
        switch e {
        case .retryLater(_, let reason): ServiceError(.unavailable, "Stripe did not answer: \(reason.prefix(200))")
        case .refused(_, let message): ServiceError(.unavailable, String(message.prefix(300)))
        }
    }
}
