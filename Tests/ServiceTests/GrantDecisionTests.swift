import Foundation
import Testing
@testable import GrantsService

/// The grant rules as a table, on the pure decision the grant pass records: what each
/// answer of a provider comes to, and when a retry is due. The jitter's random number is 0.5
/// (no spread), so a retry's pause is the backoff itself: 1 s, doubling per attempt, at most 300 s.
@Suite struct GrantDecisionTests {
    let policy = RetryPolicy(initial: 1, max: 300)

    func decide(_ answer: ProviderAnswer, attempt: Int = 1, random: Double = 0.5) -> GrantDecision {
        GrantDecision.decide(answer, attempt: attempt, policy: policy, random: random)
    }

    func http(_ status: Int, retryAfter: String? = nil, body: String = "") -> ProviderAnswer {
        .http(status: status, retryAfter: retryAfter, body: Data(body.utf8))
    }

    @Test func theLedgerAndEverySuccessStatusGrant() {
        #expect(decide(.recorded) == .succeed)
        for status in [200, 201, 204, 299] {
            #expect(decide(http(status)) == .succeed, "\(status)")
        }
        #expect(decide(http(201), attempt: 9) == .succeed, "however many attempts it took")
    }

    @Test func serverErrorsRetryWithBackoffDoublingFromOneSecondWithoutALimit() {
        #expect(decide(http(500)) == .retry(after: 1, reason: "provider error 500"))
        #expect(decide(http(503), attempt: 2) == .retry(after: 2, reason: "provider error 503"))
        #expect(decide(http(502), attempt: 4) == .retry(after: 8, reason: "provider error 502"))
        #expect(decide(http(599), attempt: 1000) == .retry(after: 300, reason: "provider error 599"), "never more than 5 minutes apart, never given up")
    }

    @Test func noAnswerRetriesLikeAServerError() {
        #expect(decide(.unreachable) == .retry(after: 1, reason: "provider unreachable or timed out"))
        #expect(decide(.unreachable, attempt: 3) == .retry(after: 4, reason: "provider unreachable or timed out"))
        #expect(decide(.notHTTP, attempt: 2) == .retry(after: 2, reason: "no HTTP response"))
    }

    /// 429 waits for the provider's `Retry-After` (in seconds) when it is later than the backoff;
    /// one that is earlier, absent or not a number of seconds leaves the backoff.
    @Test func rateLimitedRetriesHonouringRetryAfter() {
        let reason = "rate limited (429)"
        #expect(decide(http(429, retryAfter: "7")) == .retry(after: 7, reason: reason))
        #expect(decide(http(429, retryAfter: "2.5"), attempt: 1) == .retry(after: 2.5, reason: reason))
        #expect(decide(http(429, retryAfter: "1"), attempt: 4) == .retry(after: 8, reason: reason))
        #expect(decide(http(429), attempt: 2) == .retry(after: 2, reason: reason))
        #expect(decide(http(429, retryAfter: "Wed, 21 Oct 2026 07:28:00 GMT"), attempt: 3) == .retry(after: 4, reason: reason))
        #expect(decide(http(429, retryAfter: "900"), attempt: 3) == .retry(after: 900, reason: reason), "Retry-After wins over the cap too")
    }

    /// The jitter spreads a retry 20 % either side of the backoff, never past the cap.
    @Test func theJitterSpreadsARetryWithinTwentyPercent() {
        #expect(decide(http(500), attempt: 3, random: 0) == .retry(after: 3.2, reason: "provider error 500"))
        guard case .retry(let late, _) = decide(http(500), attempt: 3, random: 0.999) else {
            Issue.record("a 500 retries")
            return
        }
        #expect(late > 4.79 && late < 4.8)
        #expect(decide(http(500), attempt: 20, random: 0.999) == .retry(after: 300, reason: "provider error 500"))
    }

    /// Any other status fails for good, with the provider's message when its body has one.
    @Test func otherStatusesFailForGoodWithTheProvidersMessage() {
        #expect(decide(http(400, body: #"{"code":7225,"message":"Invalid app user id"}"#)) == .fail(reason: "Invalid app user id"))
        #expect(decide(http(404, body: "<html>not here</html>")) == .fail(reason: "provider refused the grant (404)"))
        #expect(decide(http(403, body: #"{"code":7225}"#)) == .fail(reason: "provider refused the grant (403)"))
        #expect(decide(http(409)) == .fail(reason: "provider refused the grant (409)"))
        #expect(decide(http(301)) == .fail(reason: "provider refused the grant (301)"), "a redirect is not followed to a grant")
        #expect(decide(http(422, body: #"{"message":"x"}"#), attempt: 7) == .fail(reason: "x"), "even after retries")
        let long = String(repeating: "é", count: 600)
        #expect(decide(http(400, body: #"{"message":"\#(long)"}"#)) == .fail(reason: String(repeating: "é", count: 500)))
    }

    @Test func aGrantThatCannotBeSentFailsAndAnUnknownProviderLeavesItPending() {
        #expect(decide(.badURL) == .fail(reason: "cannot build the provider URL"))
        #expect(decide(.unknownProvider) == .leave)
        #expect(decide(.unknownProvider, attempt: 50) == .leave)
    }
}
