/// The operator dashboard: one document, one style sheet and one script, served by the
/// gateway under the same strict CSP as the redeem page (no inline script, nothing from elsewhere).
/// It calls the same public API as any client, with a member's session.
enum DashboardPage {
    static let html = String(decoding: PackageResources.dashboard_html, as: UTF8.self)

    static let css = String(decoding: PackageResources.dashboard_css, as: UTF8.self)
}
