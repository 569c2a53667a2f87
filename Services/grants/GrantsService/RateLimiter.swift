import Foundation
import Synchronization

/// Spaces calls evenly at `perSecond` (no bursts), so no one-second window ever holds more than
/// `perSecond` calls. Callers over the rate wait in line; none is refused.
final class RateLimiter: Sendable {
    private let spacing: Duration
    private let next = Mutex<ContinuousClock.Instant>(.now)

    init(perSecond: Double) {
        // 10% wider than 1/rate: calls leave evenly spaced, but the network can bunch them up on the
        // way, and the provider counts arrivals. This margin absorbs up to ~100 ms of that.
        spacing = .nanoseconds(Int64(1_000_000_000 / perSecond * 1.1))
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
