import Core

/// How `/openapi.json` names and groups the operations, for generated clients: a readable
/// `operationId` per route (a generator's method names) and a tag per route (its grouping).
/// `OpenAPINamingTests` keeps the table exactly the route table.
enum OperationNaming {
    /// By `METHOD path`. A route missing here is named from its method and path
    /// (`post_v1_coupons_code_codes`) until it is added.
    static let ids: [String: String] = [
        "GET /dashboard": "getDashboard",
        "GET /dashboard/app.css": "getDashboardStyle",
        "GET /dashboard/app.js": "getDashboardScript",
        "POST /dashboard/session": "signInToDashboard",
        "POST /dashboard/session/refresh": "refreshDashboardSession",
        "DELETE /dashboard/session": "signOutOfDashboard",
        "GET /healthz": "getHealth",
        "DELETE /mcp": "endMcpSession",
        "POST /mcp": "callMcp",
        "GET /openapi.json": "getOpenApiDocument",
        "GET /redeem": "getRedeemPage",
        "GET /redeem/app.css": "getRedeemPageStyle",
        "GET /redeem/app.js": "getRedeemPageScript",
        "GET /redeem/client.js": "getWebClient",
        "POST /v1/accounts": "signUp",
        "POST /v1/accounts/email/confirm": "confirmEmail",
        "GET /v1/api-keys": "listApiKeys",
        "POST /v1/api-keys": "createApiKey",
        "DELETE /v1/api-keys/{id}": "revokeApiKey",
        "GET /v1/audit": "listAuditEntries",
        "GET /v1/apps": "listApps",
        "POST /v1/apps": "createApp",
        "GET /v1/apps/{id}/stores": "listAppStoreSettings",
        "PUT /v1/apps/{id}/stores/{provider}": "setAppStoreSettings",
        "DELETE /v1/apps/{id}/stores/{provider}": "removeAppStoreSettings",
        "POST /v1/apps/{id}/stores/stripe/webhooks": "receiveAppStripeEvent",
        "GET /v1/code-downloads/{token}": "downloadCodesByAddress",
        "GET /v1/coupons": "listCoupons",
        "POST /v1/coupons": "createCoupon",
        "POST /v1/coupons/validate": "validateCode",
        "DELETE /v1/coupons/{code}": "deactivateCoupon",
        "GET /v1/coupons/{code}": "getCoupon",
        "PATCH /v1/coupons/{code}": "updateCoupon",
        "POST /v1/coupons/{code}/codes": "createUniqueCodes",
        "GET /v1/coupons/{code}/codes.csv": "downloadUniqueCodes",
        "GET /v1/coupons/{code}/redemptions": "listCouponRedemptions",
        "GET /v1/stats/redemptions": "getRedemptionStats",
        "GET /v1/customers": "findCustomers",
        "GET /v1/customers/{appUserId}": "getCustomer",
        "POST /v1/coupons/{code}/redemption-exports": "createRedemptionExport",
        "GET /v1/redemption-downloads/{token}": "downloadRedemptionExport",
        "DELETE /v1/me": "deleteMe",
        "GET /v1/me": "getMe",
        "POST /v1/me/apple": "linkApple",
        "POST /v1/me/cloudkit": "linkCloudKit",
        "POST /v1/me/email/verify": "sendEmailVerification",
        "GET /v1/me/entitlements": "listMyEntitlements",
        "GET /v1/me/redemptions": "listMyRedemptions",
        "POST /v1/me/totp": "startTotp",
        "POST /v1/me/totp/confirm": "confirmTotp",
        "POST /v1/me/totp/disable": "disableTotp",
        "GET /v1/members": "listMembers",
        "POST /v1/members": "inviteMember",
        "POST /v1/members/accept": "acceptInvitation",
        "GET /v1/members/invites": "listInvitations",
        "DELETE /v1/members/invites/{id}": "revokeInvitation",
        "GET /v1/members/settings": "getMemberSettings",
        "PATCH /v1/members/settings": "updateMemberSettings",
        "DELETE /v1/members/{id}": "removeMember",
        "PATCH /v1/members/{id}": "updateMember",
        "GET /v1/plans": "listPlans",
        "POST /v1/plans": "createPlan",
        "GET /v1/plans/{productId}": "getPlan",
        "PATCH /v1/plans/{productId}": "updatePlan",
        "POST /v1/redemptions": "redeemCode",
        "GET /v1/redemptions/{id}": "getRedemption",
        "POST /v1/redemptions/{id}/purchase": "completePurchase",
        "POST /v1/redemptions/{id}/release": "releaseRedemption",
        "POST /v1/sessions": "signIn",
        "POST /v1/sessions/apple": "signInWithApple",
        "POST /v1/sessions/apple/callback": "receiveAppleCallback",
        "GET /v1/sessions/apple/start": "startAppleSignIn",
        "DELETE /v1/sessions/current": "signOut",
        "POST /v1/sessions/exchange": "exchangeSignInCode",
        "POST /v1/sessions/password/reset": "requestPasswordReset",
        "POST /v1/sessions/password/reset/confirm": "resetPassword",
        "POST /v1/sessions/refresh": "refreshSession",
        "POST /v1/stores/apple/notifications": "receiveAppleNotification",
        "POST /v1/stores/google/notifications": "receiveGoogleNotification",
        "POST /v1/stores/stripe/webhooks": "receiveStripeEvent",
        "POST /v1/me/billing-portal": "openBillingPortal",
        "GET /v1/billing-portal/{link}": "followBillingPortalLink",
        "POST /v1/test_helpers/redemptions/{id}/purchase": "simulatePurchase",
        "POST /v1/test_helpers/store_offers/{id}/ready": "readyStoreOffer",
        "GET /v1/webhooks": "listWebhooks",
        "POST /v1/webhooks": "createWebhook",
        "DELETE /v1/webhooks/{id}": "deleteWebhook",
        "PATCH /v1/webhooks/{id}": "updateWebhook",
        "POST /v1/webhooks/{id}/rotate-secret": "rotateWebhookSecret",
        "POST /v1/webhooks/{id}/deliveries/{deliveryId}/retry": "retryWebhookDelivery",
        "GET /v1/webhooks/{id}/deliveries": "listWebhookDeliveries",
        "POST /v1/webhooks/{id}/test": "sendTestWebhook"
    ]

    static func id(_ route: APIRoute) -> String {
        ids["\(route.method.rawValue) \(route.path)"]
            ?? route.method.rawValue.lowercased()
            + route.path.map { "/.-".contains($0) ? "_" : $0 == "{" || $0 == "}" ? "" : String($0) }.joined()
    }

    /// The tags, in the document's order, each with the path prefixes it covers (the longest
    /// matching prefix decides: `/v1/coupons/{code}/codes` is a unique code's, not a coupon's).
    static let tags: [(name: String, description: String, prefixes: [String])] = [
        (
            "Accounts", "Sign-up, sign-in and sessions, the signed-in account and its links",
            ["/v1/accounts", "/v1/sessions", "/v1/me", "/v1/billing-portal"]
        ),
        (
            "Redemptions", "What an app calls: validate a code, redeem it, follow and complete the redemption",
            ["/v1/coupons/validate", "/v1/redemptions", "/v1/me/redemptions", "/v1/me/entitlements"]
        ),
        ("Coupons", "Coupons and their redemptions, for operators",
         ["/v1/coupons", "/v1/stats", "/v1/redemption-downloads"]),
        (
            "Unique codes", "Single-use codes by the thousand under one coupon, and their one-time CSV",
            ["/v1/coupons/{code}/codes", "/v1/code-downloads"]
        ),
        ("Customers", "End users' accounts with their redemptions and entitlements, for operators", ["/v1/customers"]),
        ("Plans", "The store subscriptions coupons cover", ["/v1/plans"]),
        ("Stores", "Signed notifications from the App Store and Google Play", ["/v1/stores"]),
        ("Test helpers", "Test mode only: what a store would do", ["/v1/test_helpers"]),
        ("Webhooks", "Endpoints, their signed events and delivery logs", ["/v1/webhooks"]),
        ("Apps", "The deployment's apps: each has its own keys and objects", ["/v1/apps"]),
        ("API keys", "Operator keys, live and test", ["/v1/api-keys"]),
        (
            "Members", "The dashboard's team: invitations, roles, two-step verification",
            ["/v1/members", "/v1/me/totp"]
        ),
        ("Audit log", "Every operator change", ["/v1/audit"]),
        ("MCP", "The Model Context Protocol server", ["/mcp"]),
        ("Pages", "The redeem page, the dashboard and its session, and this document",
         ["/redeem", "/dashboard", "/openapi.json"]),
        ("Operations", "Health, readiness and metrics", ["/healthz", "/readyz", "/backends", "/metrics"])
    ]

    static func tag(_ path: String) -> String {
        var best: (name: String, length: Int)?
        for tag in tags {
            for prefix in tag.prefixes
            where path == prefix || path.hasPrefix(prefix + "/") || path.hasPrefix(prefix + ".") {
                if prefix.count > (best?.length ?? -1) { best = (tag.name, prefix.count) }
            }
        }
        return best?.name ?? "Other"
    }
}
