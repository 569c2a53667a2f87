import Core
import Cryptography
import Foundation
import Runtime

/// The Google Play Developer API settings (offers on base plans, purchases, acknowledgements):
/// read only when `REDEEM_PLAY_SERVICE_ACCOUNT` is set, which is what "Google Play is connected"
/// means. Then the package name is required and the key file must hold a service account's RSA
/// key; a package name without the account is a mistake, refused at start.
struct PlaySettings: Sendable {
    var account: GoogleServiceAccount
    var packageName: String
    /// Where assertions are exchanged for access tokens; also the assertion's `aud`.
    var tokenURL: URL
    var apiURL: URL

    /// nil when Google Play is not connected.
    init?(env: Environment) throws {
        guard let path = env.raw("REDEEM_PLAY_SERVICE_ACCOUNT") else {
            if env.raw("REDEEM_PLAY_PACKAGE_NAME") != nil {
                throw ConfigError(variable: "REDEEM_PLAY_SERVICE_ACCOUNT", problem: "is required when REDEEM_PLAY_PACKAGE_NAME is set (set both, or neither)")
            }
            return nil
        }
        do { account = try GoogleServiceAccount(file: path) } catch {
            guard case .unreadableKey(let why) = error else { throw ConfigError(variable: "REDEEM_PLAY_SERVICE_ACCOUNT", problem: "unreadable") }
            throw ConfigError(variable: "REDEEM_PLAY_SERVICE_ACCOUNT", problem: "expected a service account's JSON key file: \(why)")
        }
        guard let package = env.raw("REDEEM_PLAY_PACKAGE_NAME") else {
            throw ConfigError(variable: "REDEEM_PLAY_PACKAGE_NAME", problem: "is required when REDEEM_PLAY_SERVICE_ACCOUNT is set")
        }
        guard Self.isPackageName(package) else {
            throw ConfigError(variable: "REDEEM_PLAY_PACKAGE_NAME", problem: "expected an Android package name such as com.example.app")
        }
        packageName = package
        tokenURL = try env.url("REDEEM_GOOGLE_TOKEN_URL", default: "https://oauth2.googleapis.com/token")
        apiURL = try env.url("REDEEM_PLAY_API_URL", default: "https://androidpublisher.googleapis.com")
    }

    /// Dot-separated segments of letters, digits and `_`, each starting with a letter, at least two.
    static func isPackageName(_ s: String) -> Bool {
        let parts = s.split(separator: ".", omittingEmptySubsequences: false)
        return s.count <= 150 && parts.count >= 2 && parts.allSatisfy { part in
            guard let first = part.first, first.isASCII, first.isLetter else { return false }
            return part.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
        }
    }
}
