import Foundation

/// What the grant pass does with a grant once its provider call has ended.
enum GrantDecision: Equatable, Sendable {
    /// The entitlement is granted: settle the grant succeeded, then tell coupons it completed.
    case succeed
    /// Never try again: settle the grant failed with `reason`, queue `redemption.failed`, and tell
    /// coupons, which gives the use back.
    case fail(reason: String)
    /// Try again after `after` seconds, keeping `reason` on the grant meanwhile.
    case retry(after: TimeInterval, reason: String)
    /// Record nothing: the grant stays pending and leased, and once the lease ends it is claimed
    /// again (by an instance that has its provider, if one does).
    case leave

    /// The one statement of the grant rules: pure, with the attempt (counted from 1), the retry
    /// policy and the jitter's random number (0..<1) as inputs. A 2xx grants; 429 (after the
    /// provider's `Retry-After` in seconds, when later than the backoff), a 5xx, no answer and an
    /// answer that is not HTTP retry with backoff, without a limit on attempts; any other status
    /// fails for good with the provider's message (RevenueCat's `message`, at most 500 characters)
    /// or the status.
    static func decide(_ answer: ProviderAnswer, attempt: Int, policy: RetryPolicy, random: Double) -> GrantDecision {
        func retry(after retryAfter: TimeInterval? = nil, _ reason: String) -> GrantDecision {
            .retry(after: policy.delay(afterAttempt: attempt, retryAfter: retryAfter, random: random), reason: reason)
        }
        switch answer {
        case .recorded:
            return .succeed
        case .unknownProvider:
            return .leave
        case .badURL:
            return .fail(reason: "cannot build the provider URL")
        case .notHTTP:
            return retry("no HTTP response")
        case .unreachable:
            return retry("provider unreachable or timed out")
        case .http(let status, let retryAfter, let body):
            switch status {
            case 200..<300: return .succeed
            case 429: return retry(after: retryAfter.flatMap(TimeInterval.init), "rate limited (429)")
            case 500...: return retry("provider error \(status)")
            default: return .fail(reason: RevenueCat.message(body) ?? "provider refused the grant (\(status))")
            }
        }
    }
}
