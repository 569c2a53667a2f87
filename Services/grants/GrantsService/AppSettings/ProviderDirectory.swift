import Core
import Cryptography
import Database
import Foundation
import Synchronization

/// The entitlement providers grants call, by the name each grant stores. The deployment's come from
/// the environment (`local`, `local-sandbox`, `revenuecat`, `revenuecat-sandbox`); each app's own
/// RevenueCat project is `revenuecat@<app id>` (its live mode settings) and
/// `revenuecat-sandbox@<app id>` (its test mode settings), built from the app's stored settings
/// (`AppCredentials`) the first time a grant names it, each with its own rate limiter.
///
/// A built provider is used for `recheck` seconds, then its settings' version is read again: a
/// change on another instance is noticed within that time, and one made here at once (`forget`).
/// Settings removed leave the name unknown, so its grants wait (`GrantDecision.leave`) until they
/// are set again.
final class ProviderDirectory: Sendable {
    /// A provider and the limiter its calls wait for (nil: not limited).
    struct Resolved: Sendable {
        let provider: any EntitlementProvider
        let limiter: RateLimiter?
    }

    private struct Built: Sendable {
        var resolved: Resolved?
        var version: Int64?
        var checkedAt: ContinuousClock.Instant
    }

    private let fixed: [String: Resolved]
    private let pool: PGPool?
    private let keyring: SecretKeyring
    private let revenueCatURL: URL
    private let timeout: TimeInterval
    private let rate: Double
    private let recheck: Duration
    private let built = Mutex<[String: Built]>([:])
    /// One limiter per name, kept across rebuilds: a project's rate does not start again with a new key.
    private let limiters = Mutex<[String: RateLimiter]>([:])

    init(
        fixed: [String: any EntitlementProvider], limiters fixedLimiters: [String: RateLimiter], pool: PGPool?,
        keyring: SecretKeyring, revenueCatURL: URL, timeout: TimeInterval, rate: Double,
        recheck: Duration = .seconds(30)
    ) {
        self.fixed = fixed.mapValues { Resolved(provider: $0, limiter: fixedLimiters[$0.name]) }
        self.pool = pool
        self.keyring = keyring
        self.revenueCatURL = revenueCatURL
        self.timeout = timeout
        self.rate = rate
        self.recheck = recheck
    }

    /// The name of an app's RevenueCat provider: its live mode project, or its test mode one for
    /// sandbox grants.
    static func revenueCatName(app: UUID, sandbox: Bool) -> String {
        (sandbox ? "revenuecat-sandbox@" : "revenuecat@") + app.lowercasedString
    }

    /// The app and mode a per-app provider name stands for; nil for any other name.
    static func parse(_ name: String) -> (app: UUID, mode: Mode)? {
        let parts = name.split(separator: "@", maxSplits: 1)
        guard parts.count == 2, let app = UUID(parsing: String(parts[1])) else { return nil }
        switch parts[0] {
        case "revenuecat": return (app, .live)
        case "revenuecat-sandbox": return (app, .test)
        default: return nil
        }
    }

    /// The providers an app's grants go to: its own RevenueCat project's names where it has one
    /// set (live mode for live grants, test mode for sandbox ones), nil where it has none and the
    /// caller keeps its choice (the default app never has any: its settings are the environment's).
    func names(forApp app: UUID) async throws -> (live: String?, sandbox: String?) {
        guard app != DefaultApp.id, let pool else { return (nil, nil) }
        let set = try await pool.withConnection { c in
            (
                live: try AppCredentials.version(c, app: app, mode: .live, provider: .revenueCat) != nil,
                test: try AppCredentials.version(c, app: app, mode: .test, provider: .revenueCat) != nil
            )
        }
        return (
            set.live ? Self.revenueCatName(app: app, sandbox: false) : nil,
            set.test ? Self.revenueCatName(app: app, sandbox: true) : nil
        )
    }

    /// Whether `name` is one of the deployment's providers without a rate limit, whose new grants
    /// may be called at once (`GrantWorker.leaseAtBirth`).
    func unlimitedFixed(_ name: String) -> Bool {
        fixed[name].map { $0.limiter == nil } ?? false
    }

    /// The provider `name` stands for; nil when there is none (no such setting, its settings
    /// removed, or they could not be read just now: the grant waits and is tried again).
    func resolve(_ name: String) async -> Resolved? {
        if let f = fixed[name] { return f }
        guard let (app, mode) = Self.parse(name), let pool else { return nil }
        let now = ContinuousClock.now
        let cached = built.withLock { $0[name] }
        if let cached, now - cached.checkedAt < recheck { return cached.resolved }
        do {
            let current = try await pool.withConnection { c in
                try AppCredentials.version(c, app: app, mode: mode, provider: .revenueCat)
            }
            if let cached, cached.version == current {
                built.withLock { $0[name]?.checkedAt = now }
                return cached.resolved
            }
            let opened = try await pool.withConnection { [keyring] c in
                try AppCredentials.opened(c, app: app, mode: mode, provider: .revenueCat, keyring: keyring)
            }
            let resolved = opened.flatMap { o -> Resolved? in
                guard let key = o.secrets.secretKey else { return nil }
                let limiter = limiters.withLock { l in
                    if let made = l[name] { return made }
                    let made = RateLimiter(perSecond: rate)
                    l[name] = made
                    return made
                }
                return Resolved(
                    provider: RevenueCat(name: name, base: revenueCatURL, key: key, timeout: timeout), limiter: limiter)
            }
            built.withLock { $0[name] = Built(resolved: resolved, version: opened?.version, checkedAt: now) }
            return resolved
        } catch {
            return nil
        }
    }

    /// Drops what was built for `app`: its settings changed on this instance.
    func forget(app: UUID) {
        built.withLock { b in
            for sandbox in [false, true] { b[Self.revenueCatName(app: app, sandbox: sandbox)] = nil }
        }
    }
}
