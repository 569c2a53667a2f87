import Core
import Cryptography
import Foundation
import Runtime

/// The App Store Connect API settings (offers and their codes): read only when
/// `REDEEM_ASC_KEY_ID` is set, which is what "the App Store is connected" means. Then the issuer,
/// the key file and the app's id are required, and the key file must hold a P-256 private key;
/// an issuer or key file without the key id is a mistake, refused at start.
struct AppStoreConnectSettings: Sendable {
    var issuerId: String
    var keyId: String
    var privateKey: ES256Key
    var url: URL
    /// The app's Apple id (the same setting coupons builds the offer-code page from).
    var appId: String

    /// nil when the App Store is not connected.
    init?(env: Environment) throws {
        guard let keyId = try AppleKeySettings.keyId(env, keyId: "REDEEM_ASC_KEY_ID", companions: ["REDEEM_ASC_ISSUER_ID", "REDEEM_ASC_PRIVATE_KEY"]) else {
            return nil
        }
        self.keyId = keyId
        issuerId = try AppleKeySettings.required(env, "REDEEM_ASC_ISSUER_ID", with: "REDEEM_ASC_KEY_ID")
        privateKey = try AppleKeySettings.privateKey(env, "REDEEM_ASC_PRIVATE_KEY", with: "REDEEM_ASC_KEY_ID")
        url = try env.url("REDEEM_ASC_URL", default: "https://api.appstoreconnect.apple.com")
        appId = try AppleKeySettings.required(env, "REDEEM_APPLE_APP_ID", with: "REDEEM_ASC_KEY_ID")
        guard appId.count <= 20, appId.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw ConfigError(variable: "REDEEM_APPLE_APP_ID", problem: "expected the app's Apple id, a number such as 1234567890")
        }
    }
}

/// The App Store Server API settings (verifying purchases): read only when
/// `REDEEM_APPSTORE_KEY_ID` is set; then the issuer, the In-App Purchase key file and the bundle
/// id are required.
struct AppStoreServerSettings: Sendable {
    var issuerId: String
    var keyId: String
    var privateKey: ES256Key
    var bundleId: String
    var url: URL
    var sandboxURL: URL

    init?(env: Environment) throws {
        guard let keyId = try AppleKeySettings.keyId(env, keyId: "REDEEM_APPSTORE_KEY_ID",
                                                     companions: ["REDEEM_APPSTORE_ISSUER_ID", "REDEEM_APPSTORE_PRIVATE_KEY"]) else { return nil }
        self.keyId = keyId
        issuerId = try AppleKeySettings.required(env, "REDEEM_APPSTORE_ISSUER_ID", with: "REDEEM_APPSTORE_KEY_ID")
        privateKey = try AppleKeySettings.privateKey(env, "REDEEM_APPSTORE_PRIVATE_KEY", with: "REDEEM_APPSTORE_KEY_ID")
        bundleId = try AppleKeySettings.required(env, "REDEEM_APPLE_BUNDLE_ID", with: "REDEEM_APPSTORE_KEY_ID")
        url = try env.url("REDEEM_APPSTORE_URL", default: "https://api.storekit.apple.com")
        sandboxURL = try env.url("REDEEM_APPSTORE_SANDBOX_URL", default: "https://api.storekit-sandbox.apple.com")
    }
}

/// What both sets of Apple settings read the same way.
enum AppleKeySettings {
    /// The key id, or nil when neither it nor any of its `companions` is set (the API is not
    /// used); a companion without the key id is refused.
    static func keyId(_ env: Environment, keyId: String, companions: [String]) throws -> String? {
        if let id = env.raw(keyId) { return id }
        if let stray = companions.first(where: { env.raw($0) != nil }) {
            throw ConfigError(variable: keyId, problem: "is required when \(stray) is set (set all of \(([keyId] + companions).joined(separator: ", ")), or none)")
        }
        return nil
    }

    static func required(_ env: Environment, _ name: String, with keyId: String) throws -> String {
        guard let value = env.raw(name) else { throw ConfigError(variable: name, problem: "is required when \(keyId) is set") }
        return value
    }

    /// The private key in the `.p8` file (PKCS#8 PEM) the variable names, read at start.
    static func privateKey(_ env: Environment, _ name: String, with keyId: String) throws -> ES256Key {
        let path = try required(env, name, with: keyId)
        guard let data = FileManager.default.contents(atPath: path), let key = ES256Key.privateKey(pem: String(decoding: data, as: UTF8.self)) else {
            throw ConfigError(variable: name, problem: "cannot read a P-256 private key (.p8) from \"\(path.suffix(80))\"")
        }
        return key
    }
}
