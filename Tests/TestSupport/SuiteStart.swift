import Foundation
import Synchronization

/// Why each suite's one-time start (its stack, its fakes) failed, by suite. A suite can do nothing
/// without what it starts, but a failed start must fail only that suite: stopping the process
/// (`fatalError`) ended every suite after it unrun.
public enum SuiteStart {
    private static let failures = Mutex<[String: String]>([:])

    /// Runs a suite's start, from its class `setUp`; a thrown error is kept for `check`.
    public static func run(_ suite: AnyClass, _ start: () throws -> Void) {
        do {
            try start()
            failures.withLock { $0[String(reflecting: suite)] = nil }
        } catch {
            failures.withLock { $0[String(reflecting: suite)] = String(describing: error) }
        }
    }

    /// Throws, naming the reason, when the suite's start failed (each test calls it first).
    public static func check(_ suite: AnyClass) throws {
        if let reason = failures.withLock({ $0[String(reflecting: suite)] }) {
            throw TestFailure("\(String(reflecting: suite)) could not start: \(reason)")
        }
    }
}
