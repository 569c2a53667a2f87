import Core
import Foundation
import HTTP
import Runtime
import Synchronization

/// A token bucket: `capacity` requests at once, refilled at `perSecond`. Time is an input, so
/// tests drive it without sleeping.
struct TokenBucket: Sendable {
    let capacity: Double
    let perSecond: Double
    private(set) var tokens: Double
    private(set) var updated: Double

    init(capacity: Double, perSecond: Double, now: Double) {
        self.capacity = capacity
        self.perSecond = perSecond
        tokens = capacity
        updated = now
    }

    /// Takes one token; when none is left, answers the seconds until one is.
    mutating func take(now: Double) -> Double? {
        tokens = min(capacity, tokens + (now - updated) * perSecond)
        updated = now
        if tokens >= 1 {
            tokens -= 1
            return nil
        }
        return (1 - tokens) / perSecond
    }

    func isFull(now: Double) -> Bool { tokens + (now - updated) * perSecond >= capacity }
}

/// Invalid codes seen from one account or address; past `threshold` within `window` seconds,
/// the code routes are locked for `lockSeconds` (code-guessing defence). Time is an input.
struct Lockout: Sendable {
    var failures: [Double] = []
    var lockedUntil: Double = 0

    /// Seconds left of a lock, or nil.
    func locked(now: Double) -> Double? { lockedUntil > now ? lockedUntil - now : nil }

    mutating func fail(now: Double, threshold: Int, window: Double, lockSeconds: Double) {
        failures = failures.filter { $0 > now - window } + [now]
        if failures.count >= threshold {
            lockedUntil = now + lockSeconds
            failures.removeAll()
        }
    }
}

/// The gateway's abuse limits (README "Abuse limits"): per-address and per-account rate limits
/// on sign-in, sign-up, validate and redeem, and lock-out after repeated invalid codes. Kept in
/// memory per gateway instance.
final class AbuseGuard: Sendable {
    struct Limits: Sendable {
        var enabled = true
        /// Sign-in attempts (password or Apple) per minute, per address and per email.
        var authPerMinute = 60
        var signUpPerMinute = 30
        /// Validate + redeem per minute per account (addresses get twice as many).
        var codesPerMinute = 120
        var lockoutThreshold = 10
        var lockoutWindow: Double = 600
        var lockoutSeconds: Double = 900

        init() {}

        init(env: Environment) throws {
            enabled = try env.flag("REDEEM_RATE_LIMITS", default: true)
            authPerMinute = try env.int("REDEEM_LIMIT_AUTH_PER_MINUTE", default: 60, range: 1...100_000)
            signUpPerMinute = try env.int("REDEEM_LIMIT_SIGNUP_PER_MINUTE", default: 30, range: 1...100_000)
            codesPerMinute = try env.int("REDEEM_LIMIT_CODES_PER_MINUTE", default: 120, range: 1...100_000)
            lockoutThreshold = try env.int("REDEEM_LOCKOUT_INVALID_CODES", default: 10, range: 1...10_000)
            lockoutSeconds = Double(try env.int("REDEEM_LOCKOUT_SECONDS", default: 900, range: 1...86_400))
        }
    }

    let limits: Limits
    private let buckets = Mutex<[String: TokenBucket]>([:])
    private let lockouts = Mutex<[String: Lockout]>([:])
    private let clock: @Sendable () -> Double

    init(limits: Limits, clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) {
        self.limits = limits
        self.clock = clock
    }

    static func rateLimited(_ seconds: Double) -> HTTPError {
        let after = max(1, Int(seconds.rounded(.up)))
        return HTTPError(429, "rateLimited", "too many requests; try again in \(after) s", headers: [("Retry-After", String(after))])
    }

    /// Throws 429 when `key` has used its `perMinute`.
    func check(_ key: String, perMinute: Int) throws {
        guard limits.enabled else { return }
        let now = clock()
        let wait = buckets.withLock { b -> Double? in
            var bucket = b[key] ?? TokenBucket(capacity: Double(perMinute), perSecond: Double(perMinute) / 60, now: now)
            let w = bucket.take(now: now)
            b[key] = bucket
            if b.count > 100_000 { b = b.filter { !$0.value.isFull(now: now) } }  // forget idle keys
            return w
        }
        if let wait { throw Self.rateLimited(wait) }
    }

    func checkAuth(ip: String, email: String?) throws {
        try check("auth.ip.\(ip)", perMinute: limits.authPerMinute)
        if let email { try check("auth.email.\(email.lowercased())", perMinute: limits.authPerMinute) }
    }

    func checkSignUp(ip: String) throws { try check("signup.ip.\(ip)", perMinute: limits.signUpPerMinute) }

    /// Verification mails an account asks for: as many a minute as sign-in attempts.
    func checkMail(account: UUID) throws { try check("mail.account.\(account)", perMinute: limits.authPerMinute) }

    /// Validate and redeem: locked-out callers first, then the rates.
    func checkCodes(ip: String, account: UUID) throws {
        guard limits.enabled else { return }
        let now = clock()
        let locked = lockouts.withLock { l in
            [l["ip.\(ip)"]?.locked(now: now), l["account.\(account)"]?.locked(now: now)].compactMap { $0 }.max()
        }
        if let locked { throw Self.rateLimited(locked) }
        try check("codes.account.\(account)", perMinute: limits.codesPerMinute)
        try check("codes.ip.\(ip)", perMinute: limits.codesPerMinute * 2)
    }

    /// An invalid code (not found) counts toward a lock-out of the account and the address.
    func invalidCode(ip: String, account: UUID) {
        guard limits.enabled else { return }
        let now = clock()
        lockouts.withLock { l in
            for key in ["ip.\(ip)", "account.\(account)"] {
                var entry = l[key] ?? Lockout()
                entry.fail(now: now, threshold: limits.lockoutThreshold, window: limits.lockoutWindow, lockSeconds: limits.lockoutSeconds)
                l[key] = entry
            }
        }
    }

    /// Store notifications are public, and checking a signature costs a certificate chain and an
    /// ECDSA verification. An address that sent `lockoutThreshold` documents that were not
    /// Apple's within the lock-out window is answered 429 without any of that, for the lock-out
    /// time. Apple's own notifications always verify, so they never count.
    func checkStoreNotifications(ip: String) throws {
        guard limits.enabled else { return }
        let now = clock()
        if let locked = lockouts.withLock({ $0["notifications.ip.\(ip)"]?.locked(now: now) }) { throw Self.rateLimited(locked) }
    }

    func storeNotificationRefused(ip: String) {
        guard limits.enabled else { return }
        let now = clock()
        lockouts.withLock { l in
            var entry = l["notifications.ip.\(ip)"] ?? Lockout()
            entry.fail(now: now, threshold: limits.lockoutThreshold, window: limits.lockoutWindow, lockSeconds: limits.lockoutSeconds)
            l["notifications.ip.\(ip)"] = entry
            if l.count > 100_000 { l = l.filter { $0.value.locked(now: now) != nil || !$0.value.failures.isEmpty } }
        }
    }
}
