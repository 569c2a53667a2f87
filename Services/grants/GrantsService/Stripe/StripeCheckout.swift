import Core
import Cryptography
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

    /// A billing-portal session for the account's Stripe customer (its latest, of either mode),
    /// the account named by the request or by a portal link (`stripePortalLink`).
    func stripePortal(_ req: Grants.StripePortal) async throws -> Grants.StripePortal.Response {
        let account: UUID
        if let link = req.link {
            guard let opened = StripePortalLink.open(link, keyring: keyring, now: Date()) else {
                throw ServiceError(
                    .notFound, "this billing-portal link is unknown or has expired; read GET /v1/me again")
            }
            account = opened
        } else if let id = req.accountId {
            account = id
        } else {
            throw ServiceError(.invalid, "name the account or a portal link")
        }
        let known = try await pool.withConnection { c in
            try c.query(
                """
                SELECT customer_id, mode FROM grants.stripe_customers WHERE account_id = $1 AND customer_id IS NOT NULL
                ORDER BY created_at DESC LIMIT 1
                """, [account]
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

    /// A link to the account's billing portal for `GET /v1/me` (`managementUrl`), when the account
    /// has a Stripe customer whose mode's key grants holds; nil otherwise. No Stripe call: the
    /// portal session is made only when the link is followed.
    func stripePortalLink(_ req: Grants.StripePortalLink) async throws -> Grants.StripePortalLink.Response {
        guard !stripe.isEmpty else { return .init(link: nil) }
        let modes = try await pool.withConnection { c in
            try c.query(
                "SELECT mode FROM grants.stripe_customers WHERE account_id = $1 AND customer_id IS NOT NULL",
                [req.accountId]
            ).rows.map { try $0.decode("mode", as: String.self) }
        }
        guard modes.contains(where: { Mode(rawValue: $0).map { stripe[$0] != nil } ?? false }) else {
            return .init(link: nil)
        }
        return .init(link: StripePortalLink.make(account: req.accountId, keyring: keyring, now: Date()))
    }

    /// The account's customer in `mode`: made at its first checkout, then reused. The making is
    /// claimed first (`claim_stripe_customer`): of checkouts at once, the one holding the claim asks
    /// Stripe and the others wait for the customer it records. Stripe's Idempotency-Key, derived
    /// from the account, mode and app user, makes a claimant that took over an expired claim (its
    /// holder died after Stripe made the customer) get that same customer back.
    func stripeCustomer(_ client: StripeClient, account: UUID, appUserId: String, mode: Mode) async throws -> String {
        // The claim outlasts the call to Stripe (one try, `providerTimeout`); waiting longer than
        // that means its holder is gone, and the claim is taken over.
        let lease = config.providerTimeout + 2
        let deadline = Date().addingTimeInterval(lease * 2)
        while true {
            let claim = try await pool.withConnection { c in
                try c.query(
                    "SELECT made, claimed FROM grants.claim_stripe_customer($1, $2, $3)",
                    [account, mode.rawValue, lease]
                ).first.map {
                    (try $0.decodeIfPresent("made", as: String.self), try $0.decode("claimed", as: Bool.self))
                }
            }
            if let made = claim?.0 { return made }
            if claim?.1 == true {
                return try await makeStripeCustomer(client, account: account, appUserId: appUserId, mode: mode)
            }
            guard Date() < deadline else {
                throw ServiceError(.unavailable, "the account's Stripe customer is still being made; try again")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Makes the customer whose claim this caller holds, and records it; a failure gives the claim up.
    private func makeStripeCustomer(
        _ client: StripeClient, account: UUID, appUserId: String, mode: Mode
    ) async throws -> String {
        let form = [("metadata[app_user_id]", appUserId), ("metadata[redeem_account_id]", account.lowercasedString)]
        let key = Self.customerIdempotencyKey(account: account, mode: mode, appUserId: appUserId)
        let made: StripeClient.Customer
        do {
            made = try await Self.callingStripe { () async throws(AppleCallError) -> StripeClient.Customer in
                try await client.createCustomer(form, idempotencyKey: key)
            }
        } catch {
            try? await pool.withConnection { c in
                _ = try c.query("SELECT grants.release_stripe_customer($1, $2)", [account, mode.rawValue])
            }
            throw error
        }
        return try await pool.withConnection { c in
            try c.query(
                "SELECT grants.record_stripe_customer($1, $2, $3) AS customer_id", [account, mode.rawValue, made.id]
            ).first!.decode("customer_id")
        }
    }

    /// Stripe's Idempotency-Key for making the account's customer in `mode`: the same for every
    /// attempt with the same parameters (Stripe refuses a key reused with others, so the app user,
    /// which may change, is part of it).
    static func customerIdempotencyKey(account: UUID, mode: Mode, appUserId: String) -> String {
        let user = Crypto.sha256(Array(appUserId.utf8)).prefix(8).map { String(format: "%02x", $0) }.joined()
        return "redeem-customer-\(account.lowercasedString)-\(mode.rawValue)-\(user)"
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
