import Foundation

/// Waits until `done()` holds or `deadline` passes, looking every `interval`; answers whether it
/// holds. For counters that other threads bring to zero (requests still being answered at a
/// stop), where nothing rings when they get there.
public func waitUntil(_ deadline: ContinuousClock.Instant, every interval: Duration, _ done: () -> Bool) async -> Bool {
    while !done() && ContinuousClock.now < deadline {
        try? await Task.sleep(for: interval)
    }
    return done()
}
