extension DashboardPage {
    /// The dashboard's one script. The session's tokens live in its memory only (never in the URL,
    /// cookies or storage), as on the redeem page; storage keeps only the id of the app chosen in the
    /// app switcher. Everything from the server or the URL is put in
    /// the document with `textContent` or `value`, never as markup. Errors are the server's own
    /// messages, shown next to the field the error names.
    static let script = String(decoding: PackageResources.dashboard_js, as: UTF8.self)
}
