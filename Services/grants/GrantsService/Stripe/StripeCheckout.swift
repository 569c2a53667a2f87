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
        let app = DefaultApp.of(req.app)
        let client: StripeClient
        if app == DefaultApp.id {
            guard let made = stripe[req.mode] else {
                throw ServiceError(.unavailable, "Stripe is not connected in \(req.mode.rawValue) mode")
            }
            client = made
        } else {
            // Another app's own settings; without its webhook secret nothing would complete the
            // reservation, so no session is made.
            guard let own = try await appStripe(app: app, mode: req.mode) else {
                throw ServiceError(.unavailable, "this app has no Stripe settings in \(req.mode.rawValue) mode")
            }
            guard own.takesEvents else {
                throw ServiceError(
                    .unavailable,
                    "this app's Stripe settings in \(req.mode.rawValue) mode have no webhookSecret, so nothing"
                        + " would complete a checkout: set it (its endpoint is /v1/apps/{id}/stores/stripe/webhooks)")
            }
            client = own.client
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
            client, account: req.accountId, appUserId: req.appUserId, mode: req.mode, app: app)
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

    /// A billing-portal session for the account's Stripe customer (its latest, of either mode) in
    /// the app's Stripe account, the account named by the request or by a portal link
    /// (`stripePortalLink`, which names its app).
    func stripePortal(_ req: Grants.StripePortal) async throws -> Grants.StripePortal.Response {
        let account: UUID, app: UUID
        if let link = req.link {
            guard let opened = StripePortalLink.open(link, keyring: keyring, now: Date()) else {
                throw ServiceError(
                    .notFound, "this billing-portal link is unknown or has expired; read GET /v1/me again")
            }
            (account, app) = opened
        } else if let id = req.accountId {
            (account, app) = (id, DefaultApp.of(req.app))
        } else {
            throw ServiceError(.invalid, "name the account or a portal link")
        }
        let known = try await pool.withConnection { c in
            try Self.stripeCustomers(c, account: account, app: app).first
        }
        guard let known, let client = try await stripeClient(app: app, mode: known.mode) else {
            throw ServiceError(.notFound, "this account has no Stripe subscription")
        }
        let customer = known.customer, back = req.returnURL
        let portal = try await Self.callingStripe { () async throws(AppleCallError) -> StripeClient.Session in
            try await client.createPortalSession(customer: customer, returnURL: back)
        }
        return .init(url: portal.url)
    }

    /// A link to the account's billing portal for `GET /v1/me` (`managementUrl`), when the account
    /// has a Stripe customer in the app whose mode's key grants holds (the environment's for the
    /// default app, the app's own Stripe settings for another); nil otherwise. No Stripe call: the
    /// portal session is made only when the link is followed.
    func stripePortalLink(_ req: Grants.StripePortalLink) async throws -> Grants.StripePortalLink.Response {
        let app = DefaultApp.of(req.app)
        guard app != DefaultApp.id || !stripe.isEmpty else { return .init(link: nil) }
        let modes = try await pool.withConnection { c in
            try Self.stripeCustomers(c, account: req.accountId, app: app).map(\.mode)
        }
        var keyed = false
        for mode in Set(modes) where !keyed {
            keyed = try await stripeClient(app: app, mode: mode) != nil
        }
        guard keyed else { return .init(link: nil) }
        return .init(link: StripePortalLink.make(account: req.accountId, app: app, keyring: keyring, now: Date()))
    }

    /// The account's Stripe customers in the app's Stripe account, the latest first.
    static func stripeCustomers(
        _ c: PGConnection, account: UUID, app: UUID
    ) throws -> [(customer: String, mode: Mode)] {
        let rows =
            app == DefaultApp.id
            ? try c.query(
                """
                SELECT customer_id, mode FROM grants.stripe_customers WHERE account_id = $1 AND customer_id IS NOT NULL
                ORDER BY created_at DESC
                """, [account]
            ).rows
            : try c.query(
                """
                SELECT customer_id, mode FROM grants.stripe_app_customers
                WHERE account_id = $1 AND app_id = $2 AND customer_id IS NOT NULL ORDER BY created_at DESC
                """, [account, app]
            ).rows
        return try rows.map { (try $0.decode("customer_id"), Mode(rawValue: try $0.decode("mode")) ?? .live) }
    }

    /// The Stripe client of an app in a mode: the environment's key for the default app; another
    /// app's built from its own Stripe settings of that mode, read at each call; nil without a key.
    func stripeClient(app: UUID, mode: Mode) async throws -> StripeClient? {
        guard app != DefaultApp.id else { return stripe[mode] }
        return try await appStripe(app: app, mode: mode)?.client
    }

    /// Another app's Stripe client of a mode, built from its settings once per version of them
    /// (a cheap read checks the version at each call, so a change is used at once); nil when the
    /// app has none.
    func appStripe(app: UUID, mode: Mode) async throws -> AppStripeClient? {
        let name = app.lowercasedString + "/" + mode.rawValue
        let version = try await pool.withConnection { c in
            try AppCredentials.version(c, app: app, mode: mode, provider: .stripe)
        }
        guard let version else {
            appStripeClients.withLock { $0[name] = nil }
            return nil
        }
        if let kept = appStripeClients.withLock({ $0[name] }), kept.version == version { return kept }
        let opened = try await pool.withConnection { [keyring] c in
            try AppCredentials.opened(c, app: app, mode: mode, provider: .stripe, keyring: keyring)
        }
        guard let opened, let client = Self.appStripeClient(opened, config: config) else { return nil }
        let made = AppStripeClient(
            client: client, version: opened.version, takesEvents: opened.secrets.webhookSecret != nil)
        appStripeClients.withLock { $0[name] = made }
        return made
    }

    /// A client of another app's Stripe account, from its opened settings; one try per call, as
    /// the environment's.
    static func appStripeClient(_ o: AppCredentials.Opened, config: GrantsConfig) -> StripeClient? {
        guard let key = o.secrets.secretKey else { return nil }
        let once = AppleRetry(policy: RetryPolicy(initial: 1, max: config.maxRetryDelay), maxAttempts: 1)
        return StripeClient(base: config.stripeAPIURL, key: key, timeout: config.providerTimeout, retry: once)
    }

    /// An event sent to an app's own Stripe endpoint, checked against the `webhookSecret` of the
    /// app's Stripe settings of either mode (Stripe's test mode has endpoints of its own).
    func stripeVerify(_ req: Grants.StripeVerify) async throws -> Grants.StripeVerify.Response {
        guard req.app != DefaultApp.id else { return .init(verdict: .notSet) }
        let secrets = try await pool.withConnection { [keyring] c in
            try Mode.allCases.compactMap { mode in
                try AppCredentials.opened(c, app: req.app, mode: mode, provider: .stripe, keyring: keyring)?.secrets
                    .webhookSecret
            }
        }
        guard !secrets.isEmpty else { return .init(verdict: .notSet) }
        do {
            try StripeSignature.verify(payload: req.payload, header: req.signature, secrets: secrets, now: Date())
            return .init(verdict: .valid)
        } catch {
            switch error {
            case .malformed: return .init(verdict: .malformed)
            case .forged: return .init(verdict: .forged)
            case .stale: return .init(verdict: .stale)
            }
        }
    }

    /// The account's customer in `mode`: made at its first checkout, then reused. The making is
    /// claimed first (`claim_stripe_customer`): of checkouts at once, the one holding the claim asks
    /// Stripe and the others wait for the customer it records. Stripe's Idempotency-Key, derived
    /// from the account, mode and app user, makes a claimant that took over an expired claim (its
    /// holder died after Stripe made the customer) get that same customer back.
    /// Another app's customers are in its own Stripe account: claimed and recorded per app
    /// (`grants.stripe_app_customers`).
    func stripeCustomer(
        _ client: StripeClient, account: UUID, appUserId: String, mode: Mode, app: UUID = DefaultApp.id
    ) async throws -> String {
        // The claim outlasts the call to Stripe (one try, `providerTimeout`); waiting longer than
        // that means its holder is gone, and the claim is taken over.
        let lease = config.providerTimeout + 2
        let deadline = Date().addingTimeInterval(lease * 2)
        while true {
            let claim = try await pool.withConnection { c in
                try
                    (app == DefaultApp.id
                    ? c.query(
                        "SELECT made, claimed FROM grants.claim_stripe_customer($1, $2, $3)",
                        [account, mode.rawValue, lease])
                    : c.query(
                        "SELECT made, claimed FROM grants.claim_stripe_app_customer($1, $2, $3, $4)",
                        [account, app, mode.rawValue, lease])
                ).first.map {
                    (try $0.decodeIfPresent("made", as: String.self), try $0.decode("claimed", as: Bool.self))
                }
            }
            if let made = claim?.0 { return made }
            if claim?.1 == true {
                return try await makeStripeCustomer(
                    client, account: account, appUserId: appUserId, mode: mode, app: app)
            }
            guard Date() < deadline else {
                throw ServiceError(.unavailable, "the account's Stripe customer is still being made; try again")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Makes the customer whose claim this caller holds, and records it; a failure gives the claim up.
    private func makeStripeCustomer(
        _ client: StripeClient, account: UUID, appUserId: String, mode: Mode, app: UUID
    ) async throws -> String {
        var form = [("metadata[app_user_id]", appUserId), ("metadata[redeem_account_id]", account.lowercasedString)]
        var key = Self.customerIdempotencyKey(account: account, mode: mode, appUserId: appUserId)
        if app != DefaultApp.id {
            form.append(("metadata[redeem_app_id]", app.lowercasedString))
            key += "-" + app.lowercasedString
        }
        let made: StripeClient.Customer
        do {
            made = try await Self.callingStripe { () async throws(AppleCallError) -> StripeClient.Customer in
                try await client.createCustomer(form, idempotencyKey: key)
            }
        } catch {
            try? await pool.withConnection { c in
                _ =
                    try app == DefaultApp.id
                    ? c.query("SELECT grants.release_stripe_customer($1, $2)", [account, mode.rawValue])
                    : c.query("SELECT grants.release_stripe_app_customer($1, $2, $3)", [account, app, mode.rawValue])
            }
            throw error
        }
        return try await pool.withConnection { c in
            try
                (app == DefaultApp.id
                ? c.query(
                    "SELECT grants.record_stripe_customer($1, $2, $3) AS customer_id", [account, mode.rawValue, made.id])
                : c.query(
                    "SELECT grants.record_stripe_app_customer($1, $2, $3, $4) AS customer_id",
                    [account, app, mode.rawValue, made.id])
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

/// Another app's Stripe client (docs/apps.md), with the version of the settings it was built from.
struct AppStripeClient: Sendable {
    let client: StripeClient
    let version: Int64
    /// The settings have a webhook secret: the app's endpoint takes Stripe's events.
    let takesEvents: Bool
}
