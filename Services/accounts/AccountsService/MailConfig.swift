import Core
import Foundation
import Outbound
import Runtime

/// Where the accounts service sends mail (verification and reset codes): an SMTP server and the
/// sender's address. Without `REDEEM_SMTP_URL` there is no mail, and verification and reset
/// answer `mailNotConfigured` (docs/configuration.md, "Mail").
struct MailConfig: Sendable {
    /// How the connection to the server is protected.
    enum Security: Sendable, Equatable {
        /// `smtps://`: TLS from the start.
        case tls
        /// `smtp://`: the session must switch to TLS (STARTTLS) before anything is sent, with or
        /// without credentials; a server that does not offer it gets no mail.
        case startTLS
        /// `smtp+insecure://`: plain text, for a relay on this machine only (the host must be a
        /// loopback address), and never with credentials.
        case none
    }

    /// The URL libcurl is given: `smtp://` or `smtps://`, with the user and password in it when the
    /// server wants them. A secret: never logged (`redacted` is what logs show).
    var url: String
    /// The envelope sender and `From:` address.
    var from: String
    var security: Security
    /// Whether the URL carries credentials (they are only ever sent over TLS).
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
        guard let parts = URLComponents(string: given.text), let scheme = parts.scheme?.lowercased(), ["smtp", "smtps", "smtp+insecure"].contains(scheme),
              let host = parts.host, !host.isEmpty, parts.path.isEmpty || parts.path == "/" || !parts.path.dropFirst().contains("/") else {
            // The value is not echoed: it may hold a password.
            throw ConfigError(variable: given.variable, problem: "expected smtp://[user:password@]host[:port] or smtps://…")
        }
        hasCredentials = parts.user != nil || parts.password != nil
        switch scheme {
        case "smtps": security = .tls
        case "smtp": security = .startTLS
        default:
            guard Self.isLoopback(host) else {
                throw ConfigError(variable: given.variable, problem: "smtp+insecure:// sends mail in the clear: only to a loopback host (127.0.0.1, ::1, localhost)")
            }
            guard !hasCredentials else {
                throw ConfigError(variable: given.variable, problem: "smtp+insecure:// never carries a user or password: use smtp:// (STARTTLS) or smtps://")
            }
            security = .none
        }
        guard let from = env.raw("REDEEM_MAIL_FROM") else {
            throw ConfigError(variable: "REDEEM_MAIL_FROM", problem: "is required with REDEEM_SMTP_URL, e.g. no-reply@example.com")
        }
        do { _ = try AccountRules.checkEmail(from, field: "REDEEM_MAIL_FROM") } catch {
            throw ConfigError(variable: "REDEEM_MAIL_FROM", problem: "expected a plain address such as no-reply@example.com")
        }
        // libcurl knows smtp:// only; whether it may stay plain is `security`'s to say.
        url = security == .none ? "smtp" + given.text.drop { $0 != ":" } : given.text
        self.from = from.trimmingCharacters(in: .whitespaces)
        redacted = "\(scheme)://\(host)\(parts.port.map { ":\($0)" } ?? "")"
    }

    /// `localhost`, or an address in 127.0.0.0/8 or ::1.
    static func isLoopback(_ host: String) -> Bool {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        if bare.lowercased() == "localhost" { return true }
        var v4 = in_addr(), v6 = in6_addr()
        if inet_pton(AF_INET, bare, &v4) == 1 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
        if inet_pton(AF_INET6, bare, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } == [UInt8](repeating: 0, count: 15) + [1] }
        return false
    }
}

extension SMTPClient {
    /// A client for the configured server: TLS is required unless the settings name a loopback
    /// relay as `smtp+insecure://`.
    init(config: MailConfig, timeout: Duration = .seconds(30)) {
        let server = Server(url: config.url, from: config.from, requireTLS: config.security != .none)
        self.init(server: server, timeout: timeout)
    }
}
