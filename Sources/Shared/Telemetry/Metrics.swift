import Foundation
import Synchronization

/// A registry of counters, gauges and histograms that renders the Prometheus text format
/// (version 0.0.4). Label values are escaped; series are rendered in a stable order.
public final class MetricsRegistry: Sendable {
    public typealias Labels = [String: String]

    private struct Family {
        var kind: String
        var help: String
        var buckets: [Double] = []
        var counters: [Labels: Double] = [:]
        var histograms: [Labels: Histogram] = [:]

        /// Counts `value` in the series of `labels`, in place.
        mutating func observe(_ labels: Labels, _ value: Double) {
            let buckets = self.buckets
            histograms[labels, default: Histogram(counts: Array(repeating: 0, count: buckets.count))].record(value, buckets: buckets)
        }
    }

    private struct Histogram {
        var counts: [UInt64]
        var sum: Double = 0
        var count: UInt64 = 0

        mutating func record(_ value: Double, buckets: [Double]) {
            for (i, bound) in buckets.enumerated() where value <= bound { counts[i] += 1 }
            sum += value
            count += 1
        }
    }

    private let families = Mutex<[String: Family]>([:])
    /// Gauges read at render time (e.g. outbox depth), by metric name.
    private let gaugeReaders = Mutex<[String: (help: String, kind: String, read: @Sendable () -> [(Labels, Double)])]>([:])

    public static let defaultBuckets: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    public init() {}

    public func increment(_ name: String, help: String, labels: Labels = [:], by amount: Double = 1) {
        families.withLock { f in
            f[name, default: Family(kind: "counter", help: help)].counters[labels, default: 0] += amount
        }
    }

    public func setGauge(_ name: String, help: String, labels: Labels = [:], _ value: Double) {
        families.withLock { f in
            f[name, default: Family(kind: "gauge", help: help)].counters[labels] = value
        }
    }

    /// Registers a gauge whose values are read when metrics are rendered.
    public func gauge(_ name: String, help: String, read: @escaping @Sendable () -> [(Labels, Double)]) {
        gaugeReaders.withLock { $0[name] = (help, "gauge", read) }
    }

    /// Registers a counter whose values are read when metrics are rendered (a total kept elsewhere,
    /// such as the CPU time the kernel counts).
    public func counter(_ name: String, help: String, read: @escaping @Sendable () -> [(Labels, Double)]) {
        gaugeReaders.withLock { $0[name] = (help, "counter", read) }
    }

    public func observe(_ name: String, help: String, labels: Labels = [:], _ value: Double, buckets: [Double] = MetricsRegistry.defaultBuckets) {
        // Mutated in place: copying the family out and back copied every series of it per call.
        families.withLock { f in
            f[name, default: Family(kind: "histogram", help: help, buckets: buckets)].observe(labels, value)
        }
    }

    /// The current value of a counter or gauge series (for tests and health reports).
    public func value(_ name: String, labels: Labels = [:]) -> Double? {
        families.withLock { $0[name]?.counters[labels] }
    }

    public func render() -> String {
        var out = ""
        let snapshot = families.withLock { $0 }
        for name in snapshot.keys.sorted() {
            let f = snapshot[name]!
            out += "# HELP \(name) \(f.help)\n# TYPE \(name) \(f.kind)\n"
            for (labels, v) in f.counters.sorted(by: { Self.key($0.key) < Self.key($1.key) }) {
                out += "\(name)\(Self.format(labels)) \(Self.number(v))\n"
            }
            for (labels, h) in f.histograms.sorted(by: { Self.key($0.key) < Self.key($1.key) }) {
                for (i, bound) in f.buckets.enumerated() {
                    out += "\(name)_bucket\(Self.format(labels, extra: ("le", Self.number(bound)))) \(h.counts[i])\n"
                }
                out += "\(name)_bucket\(Self.format(labels, extra: ("le", "+Inf"))) \(h.count)\n"
                out += "\(name)_sum\(Self.format(labels)) \(Self.number(h.sum))\n"
                out += "\(name)_count\(Self.format(labels)) \(h.count)\n"
            }
        }
        let readers = gaugeReaders.withLock { $0 }
        for name in readers.keys.sorted() {
            let r = readers[name]!
            out += "# HELP \(name) \(r.help)\n# TYPE \(name) \(r.kind)\n"
            for (labels, v) in r.read() { out += "\(name)\(Self.format(labels)) \(Self.number(v))\n" }
        }
        return out
    }

    private static func key(_ l: Labels) -> String { l.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",") }

    private static func format(_ labels: Labels, extra: (String, String)? = nil) -> String {
        var pairs = labels.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        if let extra { pairs.append(extra) }
        guard !pairs.isEmpty else { return "" }
        return "{" + pairs.map { "\($0.0)=\"\(escape($0.1))\"" }.joined(separator: ",") + "}"
    }

    static func escape(_ v: String) -> String {
        v.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n")
    }

    private static func number(_ v: Double) -> String {
        if v == v.rounded(), abs(v) < 1e15 { return String(Int64(v)) }
        return String(v)
    }
}
