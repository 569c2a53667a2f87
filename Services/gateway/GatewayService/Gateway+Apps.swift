import Core
import Foundation
import HTTP

/// Apps (docs/apps.md): one deployment serves several apps. Making them is for admins of the whole
/// deployment (`Authenticator.Key.deploymentAdmin`), who list them all; another member lists the
/// apps they have a role in (the dashboard's app switcher). Everything else is scoped by the app
/// of the key, or for a member by `Redeem-App`.
extension Gateway {
    struct AppBody: APIBody {
        static let schemaName: String? = "AppInput"
        static let fieldRules: [String: [JSONSchema.Rule]] = ["name": [.note("1 to 100 characters")]]
        var name: String
    }

    static let appRoutes: [APIRoute] = [
        .route(
            .post, "/v1/apps",
            "Create an app (deployment admins: a live admin key of the default app, or an admin member)",
            access: .key(.admin), answers: [201: .json(AppView.self)], errors: [422], handle: Gateway.createApp),
        .route(
            .get, "/v1/apps",
            "List the deployment's apps (a member who is no deployment admin: the apps they have a role in), oldest first",
            access: Access(requirement: .key(.readonly)) { auth, request in try await auth.requireAppsReader(request) },
            query: QueryParameter.page, answers: [200: .json(Page<AppView>.self)], errors: [422],
            handle: Gateway.listApps)
    ]

    static let notDeploymentAdmin = ServiceError(.forbidden, "only an admin of the whole deployment manages apps")

    func createApp(_ req: HTTPRequest, _ key: Authenticator.Key, _ body: Incoming<AppBody>) async throws -> HTTPResponse
    {
        guard key.deploymentAdmin else { throw Self.notDeploymentAdmin }
        return .json(201, try await accounts.request(Apps.Create(name: try body.read().name).by(key.actor)))
    }

    /// `member` nil: a deployment admin, who sees every app.
    func listApps(_ req: HTTPRequest, _ member: (account: UUID, session: UUID)?) async throws -> HTTPResponse {
        .json(
            200,
            try await accounts.request(
                Apps.List(
                    limit: try Query.limit(req), cursor: req.query["cursor"], member: member?.account,
                    session: member?.session)))
    }
}
