import Core
import Foundation
import HTTP

/// Routes of `/v1/customers`: one end user's account as an operator sees it (Stripe's
/// `GET /v1/customers/{id}`), the dashboard's Customer page.
extension Gateway {
    /// An end user's account: what it is, how it signs in (yes or no, nothing secret), the
    /// redemptions of the caller's mode's coupons, and its entitlements as `GET /v1/me/entitlements`
    /// answers them to the account itself.
    struct CustomerBody: APIBody, Encodable {
        static let schemaName: String? = "Customer"
        static let fieldRules: [String: [JSONSchema.Rule]] = [
            "email": [.alwaysSent],
            "redemptions": [
                .note("newest first, of the caller's app's and mode's coupons; limit and cursor page them")
            ],
            "entitlements": [.note("the caller's app's, as GET /v1/me/entitlements answers the account itself in it")]
        ]
        /// The ways the account signs in: a password (`email`), Sign in with Apple, a linked
        /// CloudKit record name.
        struct SignIns: APIBody, Encodable {
            static let schemaName: String? = "CustomerSignIns"
            var email: Bool
            var apple: Bool
            var cloudkit: Bool
        }
        var id: UUID
        var appUserId: String
        var email: String?
        var emailVerified: Bool
        var createdAt: Date
        var signIns: SignIns
        var redemptions: Page<RedemptionView>
        var entitlements: Grants.Entitlements.Response

        private enum CodingKeys: String, CodingKey {
            case id, appUserId, email, emailVerified, createdAt, signIns, redemptions, entitlements
        }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id)
            try c.encode(appUserId, forKey: .appUserId)
            try c.encode(email, forKey: .email)
            try c.encode(emailVerified, forKey: .emailVerified)
            try c.encode(createdAt, forKey: .createdAt)
            try c.encode(signIns, forKey: .signIns)
            try c.encode(redemptions, forKey: .redemptions)
            try c.encode(entitlements, forKey: .entitlements)
        }

        init(
            _ a: AccountView, redemptions: Page<RedemptionView>, entitlements: Grants.Entitlements.Response
        ) {
            id = a.id
            appUserId = a.appUserId
            email = a.email
            emailVerified = a.emailVerified
            createdAt = a.createdAt
            let types = Set(a.identities.map(\.type))
            signIns = SignIns(
                email: types.contains("email"), apple: types.contains("apple"),
                cloudkit: types.contains("cloudkit"))
            self.redemptions = redemptions
            self.entitlements = entitlements
        }
    }

    static let customerRoutes: [APIRoute] = [
        // Accounts are shared by the modes and apps; a key sees the redemptions of its own app's and
        // mode's coupons, and its app's entitlements, only.
        .route(
            .get, "/v1/customers", "Find customers by email or appUserId (at most one each), with their redemptions",
            access: .appKey(.readonly),
            query: [
                QueryParameter(name: "email", schema: .string, description: "the account's email (any case)"),
                QueryParameter(
                    name: "appUserId", schema: .string,
                    description: "an id the account holds: its appUserId, an earlier one or a linked record name")
            ],
            answers: [200: .json(Page<CustomerBody>.self)], errors: [422], handle: Gateway.findCustomers),
        .route(
            .get, "/v1/customers/{appUserId}", "One customer: the account, its redemptions and entitlements",
            access: .appKey(.readonly), query: QueryParameter.page,
            answers: [200: .json(CustomerBody.self)], errors: [404, 422], handle: Gateway.getCustomer)
    ]

    func getCustomer(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        let id = req.pathParameters["appUserId"] ?? ""
        guard let account = try await accounts.request(Accounts.Customers(appUserId: id)).data.first else {
            throw ServiceError(.notFound, "no such customer")
        }
        return .json(
            200,
            try await customer(
                account, mode: key.mode, app: key.app, limit: try Query.limit(req), cursor: req.query["cursor"]))
    }

    func findCustomers(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        let email = req.query["email"].flatMap { $0.isEmpty ? nil : $0 }
        let appUserId = req.query["appUserId"].flatMap { $0.isEmpty ? nil : $0 }
        guard email != nil || appUserId != nil else {
            throw HTTPError.invalid("email", "give an email or an appUserId to look for")
        }
        let found = try await accounts.request(Accounts.Customers(appUserId: appUserId, email: email)).data
        var data: [CustomerBody] = []
        for account in found {
            data.append(
                try await customer(account, mode: key.mode, app: key.app, limit: Keyset.defaultLimit, cursor: nil))
        }
        return .json(200, Page(data: data, nextCursor: nil))
    }

    /// The account with the first page of its redemptions of `app`'s and `mode`'s coupons and its
    /// entitlements in `app`, read by the same requests the account's own `GET /v1/me/redemptions`
    /// and `GET /v1/me/entitlements` make in that app.
    func customer(
        _ account: AccountView, mode: Mode, app: UUID, limit: Int, cursor: String?
    ) async throws -> CustomerBody {
        async let redemptions = coupons.request(
            Coupons.MyRedemptions(accountId: account.id, limit: limit, cursor: cursor, mode: mode, app: app))
        async let entitlements = grants.request(Grants.Entitlements(appUserId: account.appUserId, app: app))
        return CustomerBody(account, redemptions: try await redemptions, entitlements: try await entitlements)
    }
}
