import Core
import Foundation
import HTTP

/// `GET /redeem` and its three assets, and `GET /openapi.json`.
extension Gateway {
    /// Sent with every gateway response: no framing, no sniffing, no referrer, and for HTML a
    /// policy that allows only this origin's own script and style (no inline script at all).
    static let securityHeaders: [(String, String)] = [
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
        ("X-Frame-Options", "DENY"),
        ("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
        ("Cache-Control", "no-store"),
    ]

    static let pageRoutes: [APIRoute] = [
        .route(.get, "/openapi.json", "This document", answers: [200: .text("application/json")], handle: Gateway.openAPI),
        // `code` is read by the page's script, in the browser.
        // After Sign in with Apple the page comes back as /redeem?apple=1&code=<one-time sign-in
        // code>[&coupon=<the code it held>], or with error=.
        .route(.get, "/redeem", "The redeem page", query: [QueryParameter(name: "code", schema: .string, description: "a code to fill in (with apple=1: the one-time sign-in code)"),
                                                           QueryParameter(name: "apple", schema: .string, description: "1: back from Sign in with Apple"),
                                                           QueryParameter(name: "coupon", schema: .string, description: "with apple=1: the code to fill in"),
                                                           QueryParameter(name: "error", schema: .string, description: "with apple=1: why Sign in with Apple did not finish")],
               answers: [200: .text("text/html")], handle: Gateway.redeemPage),
        .route(.get, "/redeem/app.js", "The redeem page's script", answers: [200: .text("text/javascript")], handle: Gateway.redeemScript),
        // The web client (Clients/web, compiled by its build.sh), an ES module that app.js imports.
        .route(.get, "/redeem/client.js", "The web client, an ES module the redeem page imports",
               answers: [200: .text("text/javascript")], handle: Gateway.redeemClient),
        .route(.get, "/redeem/app.css", "The redeem page's style", answers: [200: .text("text/css")], handle: Gateway.redeemStyle),
    ]

    func openAPI(_ req: HTTPRequest) -> HTTPResponse {
        HTTPResponse(status: 200, headers: [("Content-Type", HTTPResponse.jsonContentType)], body: OpenAPIDocument.json)
    }
    func redeemPage(_ req: HTTPRequest) -> HTTPResponse {
        .text(200, config.appleWebSignIn ? RedeemPage.htmlWithApple : RedeemPage.html, contentType: "text/html; charset=utf-8")
    }
    func redeemScript(_ req: HTTPRequest) -> HTTPResponse { .text(200, RedeemPage.script, contentType: "text/javascript; charset=utf-8") }
    func redeemClient(_ req: HTTPRequest) -> HTTPResponse {
        .text(200, RedeemPage.client, contentType: "text/javascript; charset=utf-8")
    }
    func redeemStyle(_ req: HTTPRequest) -> HTTPResponse { .text(200, RedeemPage.css, contentType: "text/css; charset=utf-8") }
}

/// `GET /dashboard` and its two assets: the operator dashboard.
extension Gateway {
    static let dashboardRoutes: [APIRoute] = [
        .route(.get, "/dashboard", "The operator dashboard", answers: [200: .text("text/html")], handle: Gateway.dashboardPage),
        .route(.get, "/dashboard/app.js", "The dashboard's script", answers: [200: .text("text/javascript")], handle: Gateway.dashboardScript),
        .route(.get, "/dashboard/app.css", "The dashboard's style", answers: [200: .text("text/css")], handle: Gateway.dashboardStyle),
    ]

    func dashboardPage(_ req: HTTPRequest) -> HTTPResponse { .text(200, DashboardPage.html, contentType: "text/html; charset=utf-8") }
    func dashboardScript(_ req: HTTPRequest) -> HTTPResponse { .text(200, DashboardPage.script, contentType: "text/javascript; charset=utf-8") }
    func dashboardStyle(_ req: HTTPRequest) -> HTTPResponse { .text(200, DashboardPage.css, contentType: "text/css; charset=utf-8") }
}
