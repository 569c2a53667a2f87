/// The redeem page: one small document, its script, the web client it imports and its style, served by the
/// gateway with no external assets and no inline script (the CSP forbids it).
enum RedeemPage {
    static let html = String(decoding: PackageResources.redeem_html, as: UTF8.self)

    /// The page with its "Sign in with Apple" button shown (the web flow is configured).
    static let htmlWithApple = html.replacingOccurrences(of: #"<div id="apple-area" class="apple-area" hidden>"#, with: #"<div id="apple-area" class="apple-area">"#)

    static let css = String(decoding: PackageResources.redeem_css, as: UTF8.self)

    /// The web client's module as `Clients/web/build.sh` compiles it (checked in; WebClientTests
    /// fails when it differs from the sources).
    static let client = String(decoding: PackageResources.redeem_client_js, as: UTF8.self)
}
