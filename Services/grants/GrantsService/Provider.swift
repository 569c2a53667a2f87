import Core
import Foundation
import FoundationNetworking
import Outbound
import Runtime
#if canImport(FoundationNetworking)
#endif

/// What a provider call came to, as facts: no rule is applied yet (`GrantDecision.decide` applies
/// them all).
enum ProviderAnswer: Sendable, Equatable {
    /// Redeem's own ledger holds the grant: there was nothing to call.
    case recorded
    /// The provider answered: its status, its `Retry-After` header as sent, and its body.
    case http(status: Int, retryAfter: String?, body: Data)
    /// An answer came that was not HTTP.
    case notHTTP
    /// No answer: the provider could not be reached, or did not answer within the timeout.
    case unreachable
    /// The call could not be made: the grant's ids do not make a URL.
    case badURL
    /// The grant names a provider this instance does not have.
    case unknownProvider
}

/// An entitlement provider.
protocol EntitlementProvider: Sendable {
    /// `local`, `revenuecat` or `revenuecat-sandbox`: stored with each grant.
    var name: String { get }
    func grant(appUserId: String, entitlementId: String, endTimeMs: Int64) async -> ProviderAnswer
}

/// Redeem's own ledger: the grants table is the record, so there is nothing to call.
struct LocalLedger: EntitlementProvider {
    let name: String
    func grant(appUserId: String, entitlementId: String, endTimeMs: Int64) async -> ProviderAnswer { .recorded }
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
        session = .outbound(timeout: timeout, connectionsPerHost: 32)
    }

    static func pathComponent(_ s: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s
    }

    func grant(appUserId: String, entitlementId: String, endTimeMs: Int64) async -> ProviderAnswer {
        let path = "/v1/subscribers/\(Self.pathComponent(appUserId))/entitlements/\(Self.pathComponent(entitlementId))/promotional"
        guard let url = URL(string: base.absoluteString.trimmingCharacters(in: CharacterSet(charactersIn: "/")) + path) else { return .badURL }
        var req = URLRequest(url: url, timeoutInterval: timeout)
        req.httpMethod = "POST"
        req.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization")
        req.setValue("application/json", forHTTPHeaderField: "Content-Type")
        req.httpBody = Data(#"{"end_time_ms":\#(endTimeMs)}"#.utf8)
        do {
            let (data, resp) = try await session.outboundData(for: req, dependency: "revenuecat")
            guard let http = resp as? HTTPURLResponse else { return .notHTTP }
            return .http(status: http.statusCode, retryAfter: http.value(forHTTPHeaderField: "Retry-After"), body: data)
        } catch {
            return .unreachable
        }
    }

    /// RevenueCat errors are `{"message": …, "code": …}`.
    static func message(_ data: Data) -> String? {
        guard let o = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let m = o["message"] as? String else { return nil }
        return String(m.prefix(500))
    }
}

/// Exponential backoff with jitter: from 1 s, doubling, at most `max` apart, and never
/// sooner than the provider's `Retry-After`. A value type so tests drive it without sleeping.
struct RetryPolicy: Sendable {
    var initial: TimeInterval = 1
    var max: TimeInterval = 300

    /// The delay before attempt `attempt + 1` (attempt counts from 1). `random` in 0..<1.
    func delay(afterAttempt attempt: Int, retryAfter: TimeInterval?, random: Double) -> TimeInterval {
        Swift.max(Backoff(initial: initial, max: max, jitter: 0.2).delay(afterFailures: attempt, random: random), retryAfter ?? 0)
    }
}
