import Core
import Foundation
import FoundationNetworking
#if canImport(FoundationNetworking)
#endif

/// What a provider call came to.
enum ProviderOutcome: Sendable, Equatable {
    case granted
    /// Try again (5xx, timeout, 429), after `after` seconds when the provider said so.
    case retry(after: TimeInterval?, reason: String)
    /// Never try again (4xx other than 429); the provider's message is kept.
    case fail(reason: String)
}

/// An entitlement provider (SPEC §5).
protocol EntitlementProvider: Sendable {
    /// `local`, `revenuecat` or `revenuecat-sandbox`: stored with each grant.
    var name: String { get }
    func grant(appUserId: String, entitlementId: String, endTimeMs: Int64) async -> ProviderOutcome
}

/// Redeem's own ledger: the grants table is the record, so there is nothing to call.
struct LocalLedger: EntitlementProvider {
    let name: String
    func grant(appUserId: String, entitlementId: String, endTimeMs: Int64) async -> ProviderOutcome { .granted }
}

/// RevenueCat's v1 promotional entitlements: `POST {base}/v1/subscribers/{id}/entitlements/{ent}/promotional`
/// with `{"end_time_ms": …}`. Re-sending the same `end_time_ms` is a duplicate RevenueCat ignores.
struct RevenueCat: EntitlementProvider {
    let name: String
    let base: URL
    let key: String
    let timeout: TimeInterval
    let session: URLSession

    init(name: String, base: URL, key: String, timeout: TimeInterval) {
        self.name = name
        self.base = base
        self.key = key
        self.timeout = timeout
        let config = URLSessionConfiguration.ephemeral
        config.timeoutIntervalForRequest = timeout
        config.httpMaximumConnectionsPerHost = 32
        session = URLSession(configuration: config)
    }

    static func pathComponent(_ s: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s
    }

    func grant(appUserId: String, entitlementId: String, endTimeMs: Int64) async -> ProviderOutcome {
        let path = "/v1/subscribers/\(Self.pathComponent(appUserId))/entitlements/\(Self.pathComponent(entitlementId))/promotional"
        guard let url = URL(string: base.absoluteString.trimmingCharacters(in: CharacterSet(charactersIn: "/")) + path) else {
            return .fail(reason: "cannot build the provider URL")
        }
        var req = URLRequest(url: url, timeoutInterval: timeout)
        req.httpMethod = "POST"
        req.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization")
        req.setValue("application/json", forHTTPHeaderField: "Content-Type")
        req.httpBody = Data(#"{"end_time_ms":\#(endTimeMs)}"#.utf8)
        do {
            let (data, resp) = try await session.data(for: req)
            guard let http = resp as? HTTPURLResponse else { return .retry(after: nil, reason: "no HTTP response") }
            let status = http.statusCode
            switch status {
            case 200..<300:
                return .granted
            case 429:
                let after = http.value(forHTTPHeaderField: "Retry-After").flatMap(TimeInterval.init)
                return .retry(after: after, reason: "rate limited (429)")
            case 500...:
                return .retry(after: nil, reason: "provider error \(status)")
            default:
                return .fail(reason: Self.message(data) ?? "provider refused the grant (\(status))")
            }
        } catch {
            return .retry(after: nil, reason: "provider unreachable or timed out")
        }
    }

    /// RevenueCat errors are `{"message": …, "code": …}`.
    static func message(_ data: Data) -> String? {
        guard let o = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let m = o["message"] as? String else { return nil }
        return String(m.prefix(500))
    }
}

/// Exponential backoff with jitter (SPEC §5): from 1 s, doubling, at most `max` apart, and never
/// sooner than the provider's `Retry-After`. A value type so tests drive it without sleeping.
struct RetryPolicy: Sendable {
    var initial: TimeInterval = 1
    var max: TimeInterval = 300

    /// The delay before attempt `attempt + 1` (attempt counts from 1). `random` in 0..<1.
    func delay(afterAttempt attempt: Int, retryAfter: TimeInterval?, random: Double) -> TimeInterval {
        let exp = min(max, initial * pow(2, Double(Swift.max(0, attempt - 1))))
        let jittered = exp * (0.8 + 0.4 * random)
        return Swift.max(Swift.min(jittered, max), retryAfter ?? 0)
    }
}
