import Core
import Foundation
import Runtime

/// Where the accounts service sends mail (verification and reset codes): an SMTP server and the
/// sender's address. Without `REDEEM_SMTP_URL` there is no mail, and verification and reset
/// answer `mailNotConfigured` (docs/configuration.md, "Mail").
struct MailConfig: Sendable {
    /// `smtp://` or `smtps://`, with the user and password in it when the server wants them. A
    /// secret: never logged (`redacted` is what logs show).
    var url: String
    /// The envelope sender and `From:` address.
    var from: String
    /// Whether the URL carries credentials: then `smtp://` must switch to TLS (STARTTLS) before
    /// logging in, so a password never crosses the network in the clear.
    var hasCredentials: Bool
    /// Scheme, host and port only.
    var redacted: String

    /// nil when `REDEEM_SMTP_URL` (or `REDEEM_SMTP_URL_FILE`) is not set.
    init?(env: Environment) throws {
        guard let given = try env.valueOrFile("REDEEM_SMTP_URL", file: "REDEEM_SMTP_URL_FILE") else {
            if env.raw("REDEEM_MAIL_FROM") != nil {
                throw ConfigError(variable: "REDEEM_MAIL_FROM", problem: "is set but REDEEM_SMTP_URL is not: mail needs both")
            }
            return nil
        }
        // Parsed for checking only; libcurl reads the URL itself (and its percent-encoded password).
        guard let parts = URLComponents(string: given.text), let scheme = parts.scheme?.lowercased(), ["smtp", "smtps"].contains(scheme),
              let host = parts.host, !host.isEmpty, parts.path.isEmpty || parts.path == "/" || !parts.path.dropFirst().contains("/") else {
            // The value is not echoed: it may hold a password.
            throw ConfigError(variable: given.variable, problem: "expected smtp://[user:password@]host[:port] or smtps://…")
        }
        guard let from = env.raw("REDEEM_MAIL_FROM") else {
            throw ConfigError(variable: "REDEEM_MAIL_FROM", problem: "is required with REDEEM_SMTP_URL, e.g. no-reply@example.com")
        }
        do { _ = try AccountRules.checkEmail(from, field: "REDEEM_MAIL_FROM") } catch {
            throw ConfigError(variable: "REDEEM_MAIL_FROM", problem: "expected a plain address such as no-reply@example.com")
        }
        url = given.text
        self.from = from.trimmingCharacters(in: .whitespaces)
        hasCredentials = parts.user != nil || parts.password != nil
        redacted = "\(scheme)://\(host)\(parts.port.map { ":\($0)" } ?? "")"
    }
}
