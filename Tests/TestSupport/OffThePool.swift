import Foundation

/// Runs blocking work (a child process, starting a server) on a thread of its own and awaits it.
/// Swift Testing runs tests on the cooperative pool, which has one thread per core (two here): a
/// test that blocks one of them for seconds stalls every other test, and their deadlines lapse.
public func offThePool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try work() }) }.start()
    }
}
