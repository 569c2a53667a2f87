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
        // Read in one pass over the bytes, at the fields' fixed places: every bus message and
        // every grant call reads one (splitting it into substrings and counting their characters
        // took 4 µs of grants' CPU per completed redemption).
        var text = traceparent
        let read = text.withUTF8 { b -> TraceContext? in
            let dash = UInt8(ascii: "-"), zero = UInt8(ascii: "0")
            func hex(_ range: Range<Int>) -> Bool { range.allSatisfy { Self.isLowerHex(b[$0]) } }
            guard b.count >= 55, b[2] == dash, b[35] == dash, b[52] == dash,
                hex(0..<2), hex(3..<35), hex(36..<52), hex(53..<55),
                b[0] != UInt8(ascii: "f") || b[1] != UInt8(ascii: "f"),
                // Version 00 has these four fields alone; a later one may add more after a dash.
                b.count == 55 || (b[55] == dash && (b[0] != zero || b[1] != zero)),
                (3..<35).contains(where: { b[$0] != zero }), (36..<52).contains(where: { b[$0] != zero })
            else { return nil }
            return TraceContext(
                traceId: String(decoding: UnsafeBufferPointer(rebasing: b[3..<35]), as: UTF8.self),
                spanId: String(decoding: UnsafeBufferPointer(rebasing: b[36..<52]), as: UTF8.self),
                sampled: Self.hexValue(b[54]) & 1 == 1)
        }
        guard let read else { return nil }
        self = read
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

    /// A lowercase hex digit's value.
    private static func hexValue(_ c: UInt8) -> UInt8 {
        c <= UInt8(ascii: "9") ? c - UInt8(ascii: "0") : c - UInt8(ascii: "a") + 10
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
