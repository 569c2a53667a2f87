import Foundation
import Synchronization

/// Spaces calls evenly at `perSecond` (no bursts), so no one-second window ever holds more than
/// `perSecond` calls. Callers over the rate wait in line; none is refused.
final class RateLimiter: Sendable {
    private let spacing: Duration
    private let next = Mutex<ContinuousClock.Instant>(.now)

    init(perSecond: Double) {
        // A hair wider than 1/rate, so rounding never lets rate+1 calls into one second.
        spacing = .nanoseconds(Int64(1_000_000_000 / perSecond * 1.01))
    }

    /// The moment the caller may go, reserved in order of arrival.
    func reserve(now: ContinuousClock.Instant = .now) -> ContinuousClock.Instant {
        next.withLock { n in
            let slot = Swift.max(n, now)
            n = slot + spacing
            return slot
        }
    }

    func acquire() async {
        let slot = reserve()
        let wait = slot - .now
        if wait > .zero { try? await Task.sleep(for: wait) }
    }
}
