import Core
import Foundation
import HTTP

/// The dashboard's session: it survives a reload without the page ever holding a refresh token.
/// Signing in here answers the access token (kept in the page's memory) and puts the refresh token
/// in a cookie only the gateway reads (`HttpOnly`), only over HTTPS or loopback (`Secure`), never
/// sent by another site's request (`SameSite=Strict`), and only to `/dashboard`. A reload asks
/// `POST /dashboard/session/refresh` for a new access token; the refresh token rotates as
/// `/v1/sessions/refresh` rotates it, so a stolen old cookie ends the session.
extension Gateway {
    static let dashboardCookieName = "redeem_dashboard"
    /// The routes whose credential is the session cookie, not a bearer token (`/openapi.json`
    /// describes them with the `dashboardSession` scheme).
    static let cookieAuthenticated: Set<String> = ["POST /dashboard/session/refresh"]

    /// A dashboard session as the page gets it: never the refresh token.
    struct DashboardSession: APIBody, Encodable {
        static let schemaName: String? = "DashboardSession"
        var account: AccountView
        var accessToken: String
        var expiresAt: Date
    }

    static let dashboardSessionRoutes: [APIRoute] = [
        .route(
            .post, "/dashboard/session", "Sign in to the dashboard (the refresh token goes in an HttpOnly cookie)",
            answers: [200: .json(DashboardSession.self)], errors: [401, 422, 429], handle: Gateway.dashboardSignIn),
        .route(
            .post, "/dashboard/session/refresh", "A new access token for the dashboard, from its session cookie",
            answers: [200: .json(DashboardSession.self)], errors: [401], handle: Gateway.dashboardRefresh),
        .route(
            .delete, "/dashboard/session", "Sign out of the dashboard: the session ends and its cookie is cleared",
            access: .user, answers: [204: .empty], handle: Gateway.dashboardSignOut)
    ]

    func dashboardSignIn(_ req: HTTPRequest, _ body: Incoming<SignInBody>) async throws -> HTTPResponse {
        let b = try body.read()
        try abuse.checkAuth(ip: req.clientAddress, email: b.email)
        let result = try await accounts.request(
            Accounts.SignIn(email: b.email, password: b.password, totpCode: b.totpCode))
        return Self.dashboardSession(result)
    }

    func dashboardRefresh(_ req: HTTPRequest) async throws -> HTTPResponse {
        guard let token = Self.cookie(Self.dashboardCookieName, in: req.header("cookie")) else {
            return Self.dashboardSignedOut(ServiceError(.notIdentified, "no dashboard session"), req)
        }
        do {
            return Self.dashboardSession(try await accounts.request(Accounts.Refresh(refreshToken: token)))
        } catch let e as ServiceError where GatewayErrors.status(of: e.code) == 401 {
            return Self.dashboardSignedOut(e, req)
        }
    }

    func dashboardSignOut(_ req: HTTPRequest, _ user: Authenticator.User) async throws -> HTTPResponse {
        var response = try await signOut(req, user)
        response.headers.append(("Set-Cookie", Self.clearedDashboardCookie))
        return response
    }

    static func dashboardSession(_ result: AuthResult) -> HTTPResponse {
        .json(
            200,
            DashboardSession(
                account: result.account, accessToken: result.session.accessToken, expiresAt: result.session.expiresAt),
            headers: [
                ("Set-Cookie", "\(dashboardCookieName)=\(result.session.refreshToken); \(dashboardCookieAttributes)"),
                ("Cache-Control", "no-store")
            ])
    }

    /// A refresh that cannot be: its error, and the cookie cleared.
    static func dashboardSignedOut(_ error: ServiceError, _ req: HTTPRequest) -> HTTPResponse {
        var response = GatewayErrors.response(for: error, request: req)
        response.headers.append(("Set-Cookie", clearedDashboardCookie))
        return response
    }

    /// A browser session's cookie (no `Max-Age`): the refresh token's own lifetime still bounds it.
    static let dashboardCookieAttributes = "Path=/dashboard; HttpOnly; Secure; SameSite=Strict"
    static let clearedDashboardCookie = "\(dashboardCookieName)=; \(dashboardCookieAttributes); Max-Age=0"
}
