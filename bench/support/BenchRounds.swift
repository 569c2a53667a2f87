import Core
import Foundation

/// What a timing executable under bench/ is run with: `--version` (answered here, as every
/// executable of the package answers it), or how many operations a round and how many rounds.
/// An operation's cost is the process's CPU time over the round (user and system, every thread,
/// so work handed to another thread counts), and the best round is the figure.
public struct BenchRounds {
    public let count: Int
    public let rounds: Int

    public init(name: String, defaultCount: Int, defaultRounds: Int = 5) {
        let arguments = CommandLine.arguments.dropFirst()
        if arguments.first == "--version" {
            print("\(name) \(Build.version)")
            exit(0)
        }
        let numbers = arguments.compactMap { Int($0) }
        count = numbers.first ?? defaultCount
        rounds = numbers.dropFirst().first ?? defaultRounds
    }

    /// The best round, in ns of CPU per operation; `settle` runs at the end of each round, inside
    /// it (a log sink's flush, say).
    public func best(_ operation: (Int) throws -> Void, settle: () -> Void = {}) rethrows -> Double {
        var result = Double.infinity
        for _ in 0..<rounds {
            let before = Self.cpuSeconds()
            for i in 0..<count { try operation(i) }
            settle()
            result = min(result, (Self.cpuSeconds() - before) / Double(count) * 1e9)
        }
        return result
    }

    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let seconds = usage.ru_utime.tv_sec + usage.ru_stime.tv_sec
        return Double(seconds) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }
}
