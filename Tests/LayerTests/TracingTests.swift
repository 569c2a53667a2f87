import Core
import Foundation
import Synchronization
import Testing

@testable import Telemetry

@Suite struct TraceContextTests {
    /// W3C Trace Context level 1's rules for reading a `traceparent`.
    @Test(arguments: [
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true, true),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true, false),
        // A later version may add fields; version 00 may not.
        ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", true, true),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", false, false),
        ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-", true, true),
        ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03", true, true),
        ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-02", true, false),
        ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", false, false),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-011", false, false),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01", false, false),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0F", false, false),
        ("00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false, false),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01", false, false),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01", false, false),
        ("00-4bf92f3577b34da6a3ce929d0e0e473é-00f067aa0ba902b7-01", false, false),
        ("0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false, false),
        ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false, false),
        ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", false, false),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false, false),
        ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false, false),
        ("00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", false, false),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", false, false),
        ("", false, false)
    ])
    func readsATraceparent(_ text: String, valid: Bool, sampled: Bool) {
        let context = TraceContext(traceparent: text)
        #expect((context != nil) == valid, "\(text)")
        if let context {
            #expect(context.sampled == sampled)
            #expect(context.traceId == "4bf92f3577b34da6a3ce929d0e0e4736")
        }
    }

    @Test func writesWhatItReadsAndMakesFreshIds() throws {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        #expect(try #require(TraceContext(traceparent: text)).traceparent == text)
        let root = TraceContext.root()
        #expect(TraceContext(traceparent: root.traceparent) == root)
        let child = root.child()
        #expect(child.traceId == root.traceId && child.spanId != root.spanId && child.spanId.count == 16)
        #expect(TraceContext.root().traceId != root.traceId)
        // Ids come from the pool (IdRandomness), 4 kB at a time: across more than a pool's worth
        // of ids, none repeats and none is all zeros (a pool handed out twice, or unfilled).
        var seen = Set<String>()
        for _ in 0..<600 {
            let t = TraceContext.root()
            seen.insert(t.traceId)
            #expect(t.traceId.contains { $0 != "0" } && t.spanId.contains { $0 != "0" })
        }
        #expect(seen.count == 600)
    }

    /// A span is the child of the current position, current while its work runs, and recorded
    /// (with its parent, and failed when its work threw) only when an exporter is set.
    @Test func spansNestAndAreExported() async throws {
        final class Sink: SpanExporter, @unchecked Sendable {
            let got = Mutex<[SpanRecord]>([])
            func export(service: String, _ spans: [SpanRecord]) async { got.withLock { $0 += spans } }
        }
        let sink = Sink()
        let tracer = Tracer()
        tracer.configure(service: "test", exporter: sink)
        struct Boom: Error {}
        let parent = TraceContext.root()
        let inner = await tracer.span("outer", kind: .server, parent: parent) {
            let outer = LogContext.trace
            try? await tracer.span("inner", kind: .client) { () async throws -> Void in throw Boom() }
            return outer
        }
        await tracer.flush()
        let spans = sink.got.withLock { $0 }
        let outer = try #require(spans.first { $0.name == "outer" })
        let failed = try #require(spans.first { $0.name == "inner" })
        #expect(outer.traceId == parent.traceId && outer.parentSpanId == parent.spanId && outer.spanId == inner?.spanId)
        #expect(failed.parentSpanId == outer.spanId && failed.failed && !outer.failed && failed.kind == .client)
        #expect(LogContext.trace == nil)
    }
}

@Suite struct ProcessMetricsTests {
    /// proc(5)'s stat line, whose command name may hold spaces and parentheses.
    @Test func readsProcStat() throws {
        var fields = Array(repeating: "0", count: 50)
        fields[14] = "250"
        fields[15] = "150"
        fields[22] = "1000"
        fields[23] = "123456789"
        fields[24] = "2048"
        let line = "4242 (a (weird) name) " + fields[3...].joined(separator: " ")
        let r = try #require(
            ProcessMetrics.parse(stat: line, bootTime: 1_700_000_000, ticksPerSecond: 100, pageSize: 4096))
        #expect(
            r
                == ProcessMetrics.Reading(
                    cpuSeconds: 4, residentBytes: 2048 * 4096, virtualBytes: 123_456_789, startTime: 1_700_000_010))
        #expect(ProcessMetrics.parse(stat: "garbage", bootTime: 0, ticksPerSecond: 100, pageSize: 4096) == nil)
    }

    @Test func thisProcessReadsItself() throws {
        let r = try #require(ProcessMetrics.read())
        #expect(r.residentBytes > 1_000_000 && r.cpuSeconds > 0)
        #expect(abs(r.startTime - Date().timeIntervalSince1970) < 24 * 3600)
        let m = MetricsRegistry()
        ProcessMetrics.register(on: m, service: "test")
        let text = m.render()
        #expect(text.contains("# TYPE process_cpu_seconds_total counter"))
        #expect(text.contains("redeem_build_info{service=\"test\",version=\"\(Build.version)\"} 1"))
        #expect(text.contains("process_open_fds "))
    }
}
