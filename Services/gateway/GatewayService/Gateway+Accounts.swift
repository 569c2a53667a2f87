import Core
import Foundation
import HTTP

/// Routes of accounts, sessions, the appUserId link and API keys.
extension Gateway {
    struct SignUpBody: APIBody {
        static let schemaName: String? = "SignUp"
        var email: String
        var password: String
        var cloudkitRecordName: String?
        var cloudkitWebAuthToken: String?
    }
    struct SignInBody: APIBody {
        static let schemaName: String? = "SignIn"
        static let fieldRules: [String: [JSONSchema.Rule]] = [
            "totpCode": [.note("a member with TOTP on: the authenticator app's code, or a recovery code (401 totpRequired without it)")],
        ]
        var email: String
        var password: String
        var totpCode: String?
    }
    struct AppleBody: APIBody {
        static let schemaName: String? = "AppleSignIn"
        var identityToken: String
        var cloudkitRecordName: String?
        var cloudkitWebAuthToken: String?
    }
    struct RefreshBody: APIBody {
        static let schemaName: String? = "Refresh"
        var refreshToken: String
    }
    struct CloudKitBody: APIBody {
        static let schemaName: String? = "CloudKitLink"
        var recordName: String
        var cloudkitWebAuthToken: String?
    }
    /// `mode` left out: the mode of the key making it.
    struct APIKeyBody: APIBody {
        static let schemaName: String? = "ApiKeyInput"
        static let fieldRules: [String: [JSONSchema.Rule]] = [
            "mode": [.note("left out: the mode of the key making it; a test key makes test keys only (403)")],
        ]
        var name: String
        var role: Role
        var mode: Mode?
    }

    /// `{account, session}` without the internal `created` flag.
    struct AuthBody: APIBody, Encodable {
        static let schemaName: String? = "AuthResult"
        var account: AccountView
        var session: SessionTokens
    }

    /// `GET /v1/me`: the account, and where its store subscription is managed: RevenueCat's
    /// `management_url`, else the billing portal of the account's Stripe customer (a link to
    /// `GET /v1/billing-portal/{link}`); null without either, or when neither could be read.
    struct MeBody: APIBody, Encodable {
        static let schemaName: String? = "Me"
        static let fieldRules: [String: [JSONSchema.Rule]] = ["managementUrl": [.alwaysSent, .format("uri")]]
        var id: UUID, email: String?, emailVerified: Bool, appUserId: String, identities: [AccountView.Identity], createdAt: Date, managementUrl: String?

        init(_ a: AccountView, managementUrl: String?) {
            id = a.id; email = a.email; emailVerified = a.emailVerified; appUserId = a.appUserId; identities = a.identities; createdAt = a.createdAt
            self.managementUrl = managementUrl
        }
        private enum CodingKeys: String, CodingKey { case id, email, emailVerified, appUserId, identities, createdAt, managementUrl }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id)
            try c.encodeIfPresent(email, forKey: .email)
            try c.encode(emailVerified, forKey: .emailVerified)
            try c.encode(appUserId, forKey: .appUserId)
            try c.encode(identities, forKey: .identities)
            try c.encode(createdAt, forKey: .createdAt)
            try c.encode(managementUrl, forKey: .managementUrl)
        }
    }

    /// An API key at creation: the listed fields plus the secret, once.
    struct CreatedKey: APIBody, Encodable {
        static let schemaName: String? = "CreatedApiKey"
        var id: UUID, prefix: String, name: String, role: Role, mode: Mode, createdAt: Date, lastUsedAt: Date?, key: String
    }

    static let accountRoutes: [APIRoute] = [
        .route(.post, "/v1/accounts", "Create an account", answers: [201: .json(AuthBody.self)], errors: [403, 409, 422, 429, 503],
               handle: Gateway.signUp),
        .route(.post, "/v1/sessions", "Sign in with email and password (and a member's TOTP code)", answers: [200: .json(AuthBody.self)], errors: [401, 422, 429],
               handle: Gateway.signIn),
        .route(.post, "/v1/sessions/apple", "Sign in with Apple", answers: [200: .json(AuthBody.self), 201: .json(AuthBody.self)],
               errors: [401, 403, 409, 422, 429, 503], handle: Gateway.signInWithApple),
        .route(.post, "/v1/sessions/refresh", "Rotate a refresh token", answers: [200: .json(AuthBody.self)], errors: [401, 422],
               handle: Gateway.refresh),
        .route(.delete, "/v1/sessions/current", "Sign out", access: .user, answers: [204: .empty], handle: Gateway.signOut),
        .route(.get, "/v1/me", "The signed-in account, and where its store subscription is managed", access: .user,
               answers: [200: .json(MeBody.self)], errors: [404], handle: Gateway.me),
        // Redemptions are anonymised first (they stay, so caps count them), then the account goes:
        // a failure in between leaves an account the user can delete again.
        .route(.delete, "/v1/me", "Delete the signed-in account (sessions, identities, credentials)", access: .user,
               answers: [204: .empty], errors: [404], handle: Gateway.deleteMe),
        // The record name becomes the appUserId when the fresh one holds no store purchase (the
        // provider is asked: 503 when it cannot be, and nothing changes). CloudKit proves the
        // record name first (cloudkitWebAuthToken): 422 recordNameUnproven, 403 without CloudKit
        // settings, or when the account's email is unproven and its password not fresh.
        .route(.post, "/v1/me/cloudkit", "Link a CloudKit record name (it may become the appUserId)", access: .user,
               answers: [200: .json(Accounts.LinkCloudKit.Response.self)], errors: [403, 404, 409, 422, 503], handle: Gateway.linkCloudKit),
        // A live admin key manages keys of both modes, a test one only test keys (accounts decides).
        .route(.post, "/v1/api-keys", "Create an API key in the caller's app (the secret is shown once)",
               access: .appKey(.admin),
               answers: [201: .json(CreatedKey.self)], errors: [422], handle: Gateway.createAPIKey),
        .route(.get, "/v1/api-keys", "List the caller's app's API keys, newest first", access: .appKey(.admin),
            query: QueryParameter.page,
            answers: [200: .json(Page<APIKeyView>.self)], errors: [422], handle: Gateway.listAPIKeys),
        .route(
            .delete, "/v1/api-keys/{id}", "Revoke an API key", access: .appKey(.admin), answers: [204: .empty],
            errors: [404],
               handle: Gateway.revokeAPIKey),
    ]

    /// Accounts asks CloudKit (8 s at most) to prove a record name before it answers.
    static let cloudKitTimeout: Duration = .seconds(12)

    func signUp(_ req: HTTPRequest, _ body: Incoming<SignUpBody>) async throws -> HTTPResponse {
        try abuse.checkSignUp(ip: req.clientAddress)
        let b = try body.read()
        let result = try await accounts.request(Accounts.SignUp(email: b.email, password: b.password, cloudkitRecordName: b.cloudkitRecordName,
                                                                     cloudkitWebAuthToken: b.cloudkitWebAuthToken), timeout: Self.cloudKitTimeout)
        return .json(201, AuthBody(account: result.account, session: result.session))
    }

    func signIn(_ req: HTTPRequest, _ body: Incoming<SignInBody>) async throws -> HTTPResponse {
        let b = try body.read()
        try abuse.checkAuth(ip: req.clientAddress, email: b.email)
        let result = try await accounts.request(Accounts.SignIn(email: b.email, password: b.password, totpCode: b.totpCode))
        return .json(200, AuthBody(account: result.account, session: result.session))
    }

    func signInWithApple(_ req: HTTPRequest, _ body: Incoming<AppleBody>) async throws -> HTTPResponse {
        try abuse.checkAuth(ip: req.clientAddress, email: nil)
        let b = try body.read()
        let result = try await accounts.request(Accounts.SignInWithApple(identityToken: b.identityToken, cloudkitRecordName: b.cloudkitRecordName,
                                                                              cloudkitWebAuthToken: b.cloudkitWebAuthToken), timeout: Self.cloudKitTimeout)
        return .json(result.created ? 201 : 200, AuthBody(account: result.account, session: result.session))
    }

    func refresh(_ req: HTTPRequest, _ body: Incoming<RefreshBody>) async throws -> HTTPResponse {
        let b = try body.read()
        let result = try await accounts.request(Accounts.Refresh(refreshToken: b.refreshToken))
        return .json(200, AuthBody(account: result.account, session: result.session))
    }

    func signOut(_ req: HTTPRequest, _ user: Authenticator.User) async throws -> HTTPResponse {
        _ = try await accounts.request(Accounts.SignOut(sessionId: user.session))
        // This gateway refuses the token at once; the others learn it from the event.
        auth.sessionRevoked(SessionRevoked(sessionId: user.session, until: Date().addingTimeInterval(901)))
        return .noContent()
    }

    func me(_ req: HTTPRequest, _ user: Authenticator.User) async throws -> HTTPResponse {
        let view = try await accounts.request(Accounts.Me(accountId: user.account))
        // The environment's store and Stripe settings are the default app's (docs/apps.md): another
        // app's user gets the management URL of the app's own RevenueCat project, a Google Play
        // subscription's in the app's own package, else the billing portal of the app's own Stripe
        // account.
        guard user.app == DefaultApp.id else {
            async let store = try? await grants.request(
                Grants.StoreView(appUserId: view.appUserId, fresh: false, app: user.app))
            async let stripe = stripeManagementURL(req, account: user.account, app: user.app)
            let (storeView, portal) = await (store, stripe)
            return .json(200, MeBody(view, managementUrl: storeView?.managementUrl ?? portal))
        }
        // The store's view is extra: slow or down, the account is answered without it.
        async let store = try? await grants.request(Grants.StoreView(appUserId: view.appUserId, fresh: false))
        // RevenueCat's URL names the store of the latest subscription; without one, a Stripe
        // customer's billing portal (docs/stripe.md).
        async let stripe = stripeManagementURL(req, account: user.account)
        let (storeView, portal) = await (store, stripe)
        return .json(200, MeBody(view, managementUrl: storeView?.managementUrl ?? portal))
    }

    func deleteMe(_ req: HTTPRequest, _ user: Authenticator.User) async throws -> HTTPResponse {
        _ = try await coupons.request(Coupons.ForgetAccount(accountId: user.account))
        _ = try await accounts.request(Accounts.Delete(accountId: user.account))
        // This gateway refuses the token at once; the others learn it from the events.
        auth.sessionRevoked(SessionRevoked(sessionId: user.session, until: Date().addingTimeInterval(901)))
        return .noContent()
    }

    func linkCloudKit(_ req: HTTPRequest, _ user: Authenticator.User, _ body: Incoming<CloudKitBody>) async throws -> HTTPResponse {
        let b = try body.read()
        return .json(200, try await accounts.request(Accounts.LinkCloudKit(accountId: user.account, recordName: b.recordName,
                                                                                    cloudkitWebAuthToken: b.cloudkitWebAuthToken, sessionId: user.session),
                                                     timeout: Self.cloudKitTimeout))
    }

    func createAPIKey(_ req: HTTPRequest, _ key: Authenticator.Key, _ body: Incoming<APIKeyBody>) async throws -> HTTPResponse {
        let b = try body.read()
        let made = try await accounts.request(APIKeys.Create(name: b.name, role: b.role, mode: b.mode,
            callerMode: key.mode, app: key.app).by(key.actor))
        let k = made.apiKey
        return .json(201, CreatedKey(id: k.id, prefix: k.prefix, name: k.name, role: k.role, mode: k.mode,
                                     createdAt: k.createdAt, lastUsedAt: k.lastUsedAt, key: made.key))
    }

    func listAPIKeys(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        .json(
            200,
            try await accounts.request(
                APIKeys.List(
                    limit: try Query.limit(req), cursor: req.query["cursor"],
                    callerMode: key.mode, app: key.app)))
    }

    func revokeAPIKey(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        let id = try req.id(or: "no such API key")
        _ = try await accounts.request(APIKeys.Revoke(id: id, callerMode: key.mode, app: key.app).by(key.actor))
        auth.apiKeyRevoked(id)
        return .noContent()
    }
}
