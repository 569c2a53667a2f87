import Core
import Cryptography
import Foundation
import Runtime

/// Settings of the accounts service (README configuration table).
struct AccountsConfig: Sendable {
    /// Lifetime of access tokens: at most 15 minutes.
    var accessTokenTTL: TimeInterval
    var refreshTokenTTL: TimeInterval
    /// How long a spent refresh token presented again gets the pair it was exchanged for instead
    /// of revoking its session (`REDEEM_REFRESH_GRACE`, 0 turns it off): a phone whose refresh
    /// answer was lost retries with the same token.
    var refreshGrace: TimeInterval
    /// A bootstrap admin key to create at start (`REDEEM_ADMIN_KEY`, or the file
    /// `REDEEM_ADMIN_KEY_FILE` names: compose makes one). Never logged.
    var adminKey: String?
    /// Sign in with Apple audiences (`REDEEM_APPLE_CLIENT_ID`, comma-separated): the app's
    /// bundle id and the web flow's Services ID. A token for any of them is accepted.
    var appleClientIds: [String]
    var appleJWKS: String?
    var eventsBind: [String]
    /// The grants service: a link that adopts a record name moves the holder's grants there.
    var grantsBus: [String]
    /// The SMTP server and sender of verification and reset mail; nil: no mail (`MailConfig`).
    var mail: MailConfig?
    /// How record names are proven: by CloudKit, by the client's word (unsafe), or not at all.
    var recordNames: RecordNameProof
    /// Password hashes computed at once (`REDEEM_PASSWORD_HASH_CONCURRENCY`), 19 MiB each; 8 per
    /// place may wait, and a request beyond those is answered 503 (`PasswordHasher`).
    var passwordHashConcurrency: Int
    /// Verification and reset mail per email address and per client address (`MailLimits`).
    var mailLimits: MailLimits

    init(env: Environment) throws {
        accessTokenTTL = TimeInterval(try env.int("REDEEM_ACCESS_TOKEN_TTL", default: 900, range: 5...900))
        refreshTokenTTL = TimeInterval(try env.int("REDEEM_REFRESH_TOKEN_TTL", default: 30 * 86400, range: 60...(365 * 86400)))
        refreshGrace = TimeInterval(try env.int("REDEEM_REFRESH_GRACE", default: 10, range: 0...60))
        let admin = try env.valueOrFile("REDEEM_ADMIN_KEY", file: "REDEEM_ADMIN_KEY_FILE")
        adminKey = admin?.text
        if let key = adminKey {
            guard APIKeySecret.mode(of: key) != nil, key.count >= 24, key.count <= 200 else {
                throw ConfigError(variable: admin!.variable, problem: "must be sk_live_… or sk_test_… with at least 16 characters after the prefix")
            }
        }
        appleClientIds = (env.raw("REDEEM_APPLE_CLIENT_ID") ?? "").split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        appleJWKS = env.raw("REDEEM_APPLE_JWKS")
        eventsBind = try BusAddress.eventsBind("accounts", env)
        grantsBus = try BusAddress.requests("grants", env)
        mail = try MailConfig(env: env)
        recordNames = try RecordNameProof(env: env)
        // 4 × 19 MiB: within the memory the Kubernetes example gives accounts, with room for the rest.
        passwordHashConcurrency = try env.int("REDEEM_PASSWORD_HASH_CONCURRENCY", default: 4, range: 1...64)
        mailLimits = try MailLimits(env: env)
    }
}

/// The shape of secret API keys: `sk_live_…` / `sk_test_…`.
enum APIKeySecret {
    static func mode(of key: String) -> Mode? {
        if key.hasPrefix("sk_live_") { return .live }
        if key.hasPrefix("sk_test_") { return .test }
        return nil
    }

    static func generate(mode: Mode) -> String { "sk_\(mode.rawValue)_" + Crypto.randomToken(bytes: 24) }

    /// What lists show: the mode prefix and four characters.
    static func prefix(of key: String) -> String { String(key.prefix(12)) }

    static func hash(_ key: String) -> [UInt8] { Crypto.sha256(Array(key.utf8)) }
}
