import Foundation

/// Request-scoped context carried through tasks and across the bus.
public enum LogContext {
    /// The request id of the HTTP request (or bus message) being handled, if any.
    @TaskLocal public static var requestId: String?
    /// Where the work under way sits in its trace (W3C Trace Context): logged as `trace.id`, and
    /// the parent of every span started under it (`Tracer`).
    @TaskLocal public static var trace: TraceContext?
}

/// A position in a W3C trace: the trace's id, and the span that is the parent of whatever starts
/// now. It travels as a `traceparent` (HTTP header, bus envelope field):
/// `00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`.
public struct TraceContext: Sendable, Equatable {
    public let traceId: String
    public let spanId: String
    /// The caller's sampling decision (flag 01): spans of an unsampled trace are not recorded.
    public let sampled: Bool

    public init(traceId: String, spanId: String, sampled: Bool = true) {
        self.traceId = traceId
        self.spanId = spanId
        self.sampled = sampled
    }

    /// A `traceparent` as W3C Trace Context level 1 reads it, or nil: a version other than 00 is read
    /// by its first four fields (a later version may add fields after them), version ff and all-zero
    /// ids are invalid, and hex must be lowercase.
    public init?(traceparent: String) {
        let parts = traceparent.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count >= 4, parts[0].count == 2, parts[1].count == 32, parts[2].count == 16, parts[3].count == 2,
            parts[0...3].allSatisfy({ $0.utf8.allSatisfy(Self.isLowerHex) }), parts[0] != "ff",
            parts[0] != "00" || parts.count == 4,
            parts[1].utf8.contains(where: { $0 != UInt8(ascii: "0") }),
            parts[2].utf8.contains(where: { $0 != UInt8(ascii: "0") }),
            let flags = UInt8(parts[3], radix: 16)
        else { return nil }
        self.init(traceId: String(parts[1]), spanId: String(parts[2]), sampled: flags & 1 == 1)
    }

    public var traceparent: String {
        // Made at its length at once: an interpolation grows its string twice on the way.
        var text = "00-"
        text.reserveCapacity(7 + traceId.utf8.count + spanId.utf8.count)
        text += traceId
        text += "-"
        text += spanId
        text += sampled ? "-01" : "-00"
        return text
    }

    /// The first span of a new trace.
    public static func root() -> TraceContext {
        var random = IdRandom()
        return TraceContext(
            traceId: randomHex(UInt64.random(in: 1...UInt64.max, using: &random), then: random.next()),
            spanId: randomHex(UInt64.random(in: 1...UInt64.max, using: &random)))
    }

    /// A new span of the same trace, under this one.
    public func child() -> TraceContext {
        var random = IdRandom()
        let spanId = Self.randomHex(UInt64.random(in: 1...UInt64.max, using: &random))
        return TraceContext(traceId: traceId, spanId: spanId, sampled: sampled)
    }

    private static func isLowerHex(_ c: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(c)
    }

    /// The numbers as fixed-width lowercase hex, 16 digits each: one allocation, the string's.
    static func randomHex(_ first: UInt64, then second: UInt64? = nil) -> String {
        String(unsafeUninitializedCapacity: second == nil ? 16 : 32) { buffer in
            func put(_ word: UInt64, at start: Int) {
                let digits: StaticString = "0123456789abcdef"
                for i in 0..<16 { buffer[start + i] = digits.utf8Start[Int((word >> UInt64(60 - 4 * i)) & 0xF)] }
            }
            put(first, at: 0)
            if let second { put(second, at: 16) }
            return second == nil ? 16 : 32
        }
    }
}
