import Core
import Cryptography
import Foundation
import Runtime

/// Where the gateway checks Google's Pub/Sub pushes of real-time developer notifications
/// (docs/stores.md, "Completion on Android"): on when `REDEEM_PLAY_PUSH_AUDIENCE` is set, which
/// then needs the push service account; without it every push is 401. The package name is the
/// default app's when it has Google Play; a push of another package is another app's (docs/apps.md).
public struct GooglePushSettings: Sendable {
    /// `REDEEM_GOOGLE_JWKS`: Google's keys, a URL or a file.
    public var jwks: String
    public var audience: String
    public var serviceAccount: String
    /// `REDEEM_PLAY_PACKAGE_NAME`, the default app's package; nil when only other apps have Google Play.
    public var packageName: String?

    init?(env: Environment) throws {
        guard let audience = env.raw("REDEEM_PLAY_PUSH_AUDIENCE") else {
            if env.raw("REDEEM_PLAY_PUSH_SERVICE_ACCOUNT") != nil {
                throw ConfigError(variable: "REDEEM_PLAY_PUSH_AUDIENCE", problem: "is required when REDEEM_PLAY_PUSH_SERVICE_ACCOUNT is set")
            }
            return nil
        }
        self.audience = audience
        guard let account = env.raw("REDEEM_PLAY_PUSH_SERVICE_ACCOUNT"), account.contains("@") else {
            throw ConfigError(variable: "REDEEM_PLAY_PUSH_SERVICE_ACCOUNT", problem: "the push subscription's service account email is required with REDEEM_PLAY_PUSH_AUDIENCE")
        }
        serviceAccount = account
        packageName = env.raw("REDEEM_PLAY_PACKAGE_NAME")
        jwks = env.string("REDEEM_GOOGLE_JWKS", default: "https://www.googleapis.com/oauth2/v3/certs")
    }
}

/// Verifies the OIDC token Pub/Sub puts on a push (`Authorization: Bearer`), as Google documents:
/// RS256 by a key of Google's JWKS, `iss` `https://accounts.google.com` (or without the scheme),
/// `aud` the configured audience, not expired, and `email` the push subscription's service account
/// with `email_verified`. Anything else is refused (`invalidSignedData`, 401).
final class GooglePushVerifier: Sendable {
    struct Claims: Decodable {
        var iss: String
        var aud: String
        var exp: Double
        var email: String?
        var email_verified: Bool?
    }

    static let issuers: Set<String> = ["https://accounts.google.com", "accounts.google.com"]

    let settings: GooglePushSettings
    private let keys: JWKSource

    init(settings: GooglePushSettings) {
        self.settings = settings
        keys = JWKSource(settings.jwks)
    }

    static func refused(_ why: String) -> ServiceError { ServiceError(.invalidSignedData, "not a push from Google for this app: \(why)") }

    func verify(authorization: String?, now: Date = Date()) async throws {
        guard let authorization, authorization.hasPrefix("Bearer ") else { throw Self.refused("no bearer token") }
        let token = String(authorization.dropFirst("Bearer ".count))
        let loaded: [String: AsymmetricKey]
        do { loaded = try await keys.keys(for: JWKSource.kid(of: token)) } catch { throw ServiceError(.unavailable, "Google's keys could not be loaded") }
        let claims: Claims
        do {
            (_, claims) = try JWT.verify(token, as: Claims.self, algorithm: .rs256) { kid in kid.flatMap { loaded[$0] } }
        } catch {
            throw Self.refused("the token's signature is not Google's")
        }
        guard Self.issuers.contains(claims.iss) else { throw Self.refused("the token was not issued by Google") }
        guard claims.aud == settings.audience else { throw Self.refused("the token is for another audience") }
        guard claims.exp > now.timeIntervalSince1970 else { throw Self.refused("the token has expired") }
        guard claims.email == settings.serviceAccount, claims.email_verified == true else {
            throw Self.refused("the token names another service account")
        }
    }
}
