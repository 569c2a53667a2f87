import Foundation
import HTTP

/// `GET /redeem` and its two assets (SPEC §4.5).
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

    func addPageRoutes(to r: inout Router) {
        r.get("/redeem") { _ in .text(200, RedeemPage.html, contentType: "text/html; charset=utf-8") }
        r.get("/redeem/app.js") { _ in .text(200, RedeemPage.script, contentType: "text/javascript; charset=utf-8") }
        r.get("/redeem/app.css") { _ in .text(200, RedeemPage.css, contentType: "text/css; charset=utf-8") }
        r.get("/openapi.json") { _ in HTTPResponse(status: 200, headers: [("Content-Type", HTTPResponse.jsonContentType)], body: OpenAPIDocument.json) }
    }
}
