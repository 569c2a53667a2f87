import Core
import Foundation
import HTTP

/// An app's own store and RevenueCat settings (docs/apps.md), per mode: set, shown (never a
/// secret) and removed by a deployment admin or an admin key of the app itself. The default
/// app's settings are the environment's `REDEEM_*` settings: they are not stored, and setting
/// them here is refused.
extension Gateway {
    struct StoreSettingsBody: APIBody {
        static let schemaName: String? = "StoreSettingsInput"
        static let fieldRules: [String: [JSONSchema.Rule]] = [
            "issuerId": [.note("appstore: the App Store Connect API key's issuer id")],
            "keyId": [.note("appstore: the App Store Connect API key's id")],
            "privateKey": [.note("appstore: the API key's .p8 file, a P-256 private key in PEM (secret)")],
            "appAppleId": [.pattern("^[0-9]{1,20}$"), .note("appstore: the app's Apple id")],
            "serviceAccount": [.note("googleplay: the service account's JSON key file, as text (secret)")],
            "packageName": [.note("googleplay: the app's package name")],
            "secretKey": [
                .note("stripe: sk_test_… in test mode, sk_live_… in live; revenuecat: the secret API key (secret)")
            ],
            "webhookSecret": [.note("stripe, optional: the webhook endpoint's signing secret, whsec_… (secret)")],
            "stripePublicKey": [
                .note("revenuecat, optional: the public API key of the project's Stripe app, for Stripe receipts")
            ]
        ]
        var issuerId: String?
        var keyId: String?
        var privateKey: String?
        var appAppleId: String?
        var serviceAccount: String?
        var packageName: String?
        var secretKey: String?
        var webhookSecret: String?
        var stripePublicKey: String?
    }

    static let appStoreRoutes: [APIRoute] = [
        .route(
            .get, "/v1/apps/{id}/stores", "An app's store and RevenueCat settings in the caller's mode, never a secret",
            access: .appKey(.admin), answers: [200: .json(AppStores.List.Response.self)], errors: [404],
            handle: Gateway.listAppStores),
        .route(
            .put, "/v1/apps/{id}/stores/{provider}",
            "Set an app's settings of one provider (appstore, googleplay, stripe, revenuecat) in the caller's mode",
            access: .appKey(.admin), answers: [200: .json(StoreSettingsView.self)], errors: [404, 422],
            handle: Gateway.putAppStore),
        .route(
            .delete, "/v1/apps/{id}/stores/{provider}", "Remove an app's settings of one provider in the caller's mode",
            access: .appKey(.admin), answers: [204: .empty], errors: [404], handle: Gateway.clearAppStore)
    ]

    /// The app the path names, if the caller may manage it: its own app, or any app for a
    /// deployment admin. Another app's is 404, as every object of another app is.
    func managedApp(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> UUID {
        let id = try req.id(or: "no such app")
        if id == key.app { return id }
        guard key.deploymentAdmin else { throw ServiceError(.notFound, "no such app") }
        _ = try await accounts.request(Apps.Get(id: id))
        return id
    }

    static func storeProvider(_ req: HTTPRequest) throws -> StoreProvider {
        guard let provider = req.pathParameters["provider"].flatMap(StoreProvider.init(rawValue:)) else {
            throw ServiceError(
                .notFound,
                "no such store provider; one of \(StoreProvider.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return provider
    }

    func listAppStores(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        let app = try await managedApp(req, key)
        guard app != DefaultApp.id else { return .json(200, AppStores.List.Response(data: [])) }
        return .json(200, try await grants.request(AppStores.List(app: app, mode: key.mode)))
    }

    func putAppStore(
        _ req: HTTPRequest, _ key: Authenticator.Key, _ body: Incoming<StoreSettingsBody>
    ) async throws
        -> HTTPResponse
    {
        let app = try await managedApp(req, key)
        let provider = try Self.storeProvider(req)
        let b = try body.read()
        let input = StoreSettingsInput(
            issuerId: b.issuerId, keyId: b.keyId, privateKey: b.privateKey, appAppleId: b.appAppleId,
            serviceAccount: b.serviceAccount, packageName: b.packageName, secretKey: b.secretKey,
            webhookSecret: b.webhookSecret, stripePublicKey: b.stripePublicKey)
        let put = AppStores.Put(app: app, mode: key.mode, provider: provider, input: input)
        return .json(200, try await grants.request(put.by(key.actor)))
    }

    func clearAppStore(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        let app = try await managedApp(req, key)
        let provider = try Self.storeProvider(req)
        _ = try await grants.request(AppStores.Clear(app: app, mode: key.mode, provider: provider).by(key.actor))
        return .noContent()
    }
}
