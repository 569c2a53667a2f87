import Core
import Foundation
import Runtime

/// How a CloudKit record name is proven to belong to the person sending it (docs/security.md,
/// "A record name is claimed only with proof"). A record name is not a secret: it shows in
/// RevenueCat's dashboard, in analytics and in support tickets, and whoever claims it first
/// receives its subscriber's entitlements. So the app sends a CloudKit web auth token beside it,
/// and accounts asks CloudKit Web Services whose token it is.
enum RecordNameProof: Sendable {
    /// Ask CloudKit (`REDEEM_CLOUDKIT_CONTAINER` and `REDEEM_CLOUDKIT_API_TOKEN` set).
    case cloudKit(CloudKitSettings)
    /// Take the client's word (`REDEEM_CLOUDKIT_TRUST_CLIENT=1`): unsafe, for development only.
    case trustClient
    /// Refuse every record name: 403 `cloudKitNotConfigured`.
    case notConfigured

    init(env: Environment) throws {
        let trust = try env.flag("REDEEM_CLOUDKIT_TRUST_CLIENT", default: false)
        if let settings = try CloudKitSettings(env: env) {
            self = .cloudKit(settings)  // the proof wins over trust when both are set
        } else {
            self = trust ? .trustClient : .notConfigured
        }
    }

    static let notConfiguredError = ServiceError(.cloudKitNotConfigured,
                                                 "this server cannot prove CloudKit record names (REDEEM_CLOUDKIT_CONTAINER is not set): record names are refused")

    static func unproven(_ field: String) -> ServiceError {
        ServiceError(.recordNameUnproven, "the record name must come with a cloudkitWebAuthToken of the same iCloud user", field: field)
    }
}

/// The container and API token a record name is proven with (CloudKit Web Services,
/// `GET [path]/database/1/[container]/[environment]/public/users/current`).
struct CloudKitSettings: Sendable {
    var container: String
    /// Made in CloudKit Console for the container and environment; a secret, never logged.
    var apiToken: String
    /// `production` or `development`.
    var environment: String
    /// `https://api.apple-cloudkit.com`; tests point it at a fake on loopback.
    var url: URL

    /// Nil when `REDEEM_CLOUDKIT_CONTAINER` is unset; a container without its API token, or a
    /// bad environment or URL, stops the start.
    init?(env: Environment) throws {
        guard let container = env.raw("REDEEM_CLOUDKIT_CONTAINER")?.trimmingCharacters(in: .whitespaces), !container.isEmpty else {
            if env.raw("REDEEM_CLOUDKIT_API_TOKEN") != nil {
                throw ConfigError(variable: "REDEEM_CLOUDKIT_CONTAINER", problem: "is required with REDEEM_CLOUDKIT_API_TOKEN")
            }
            return nil
        }
        guard container.hasPrefix("iCloud."), !container.contains("/") else {
            throw ConfigError(variable: "REDEEM_CLOUDKIT_CONTAINER", problem: "must be a container id such as iCloud.com.example.app")
        }
        guard let token = env.raw("REDEEM_CLOUDKIT_API_TOKEN")?.trimmingCharacters(in: .whitespacesAndNewlines), !token.isEmpty else {
            throw ConfigError(variable: "REDEEM_CLOUDKIT_API_TOKEN", problem: "is required with REDEEM_CLOUDKIT_CONTAINER")
        }
        self.container = container
        apiToken = token
        environment = try env.choice("REDEEM_CLOUDKIT_ENVIRONMENT", default: "production", allowed: ["production", "development"])
        url = try env.url("REDEEM_CLOUDKIT_URL", default: "https://api.apple-cloudkit.com")
    }

    /// The `users/current` URL for a web auth token, both tokens percent-encoded as query values
    /// (CloudKit's tokens hold `+`, `/` and `=`, which a query keeps as they are otherwise).
    func currentUserURL(webAuthToken: String) -> URL? {
        var base = url.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        guard let api = apiToken.addingPercentEncoding(withAllowedCharacters: allowed),
              let web = webAuthToken.addingPercentEncoding(withAllowedCharacters: allowed) else { return nil }
        return URL(string: base + "/database/1/\(container)/\(environment)/public/users/current?ckAPIToken=\(api)&ckWebAuthToken=\(web)")
    }
}
