import BenchSupport
import Core
import Foundation
import HTTP
import Telemetry

// The gateway's access-log line at `info`, timed (bench/log-line): ROUNDS rounds of LINES lines
// each, written through a `LogSink` to /dev/null as the gateway writes them (its writer thread
// included), then the same line encoded with `JSONEncoder` and handed to the same sink, the way
// lines were written before `LogLine` (the reference). CPU per line is the process's CPU time
// (user and system, every thread) over the lines; the best round of each is printed.

struct Fields: Encodable {
    let time: String, level: String, service: String, msg: String
    let requestId: String, traceId: String
    let method: String, route: String, path: String, status: Int, durationMs: Double
    enum CodingKeys: String, CodingKey {
        case time, level, service, msg, method = "http.method", route = "http.route", path = "http.path"
        case status = "http.status", durationMs = "http.duration_ms", requestId = "request.id", traceId = "trace.id"
    }
}

let bench = BenchRounds(name: "bench-log-line", defaultCount: 200_000)
guard let devNull = FileHandle(forWritingAtPath: "/dev/null") else { fatalError("no /dev/null") }
let sink = LogSink(handle: devNull)
let logger = Logger(service: "gateway", minimum: .info, sink: sink)
let requestId = "0f8c1d2e-5b6a-4c3d-9e8f-7a6b5c4d3e2f"
let traceId = "4bf92f3577b34da6a3ce929d0e0e4736"

/// The best round, in ns of CPU per line, the sink's writer thread included.
@MainActor func best(_ body: (Int) -> Void) -> Double { bench.best(body, settle: { sink.flush() }) }

let line = best { i in
    logger.log(.info, "http request", requestId: requestId, traceId: traceId, typed: HTTPAccessFields(
        method: "POST", route: "/v1/redemptions", path: "/v1/redemptions", status: 201,
        hundredthsOfMs: Int64(i % 5000)))
}
// BENCH_LINE_ONLY=1: the access line alone (to profile it).
if ProcessInfo.processInfo.environment["BENCH_LINE_ONLY"] == "1" {
    print(String(format: "access line: %.0f ns of CPU per line", line))
    exit(0)
}
let encoder = JSONEncoder()
encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
let reference = best { i in
    let fields = Fields(
        time: Timestamp.iso8601(Date()), level: "info", service: "gateway", msg: "http request", requestId: requestId,
        traceId: traceId, method: "POST", route: "/v1/redemptions", path: "/v1/redemptions", status: 201,
        durationMs: Double(i % 5000) / 100)
    guard let data = try? encoder.encode(fields) else { return }
    sink.write(Array(data) + [0x0A], urgent: false)
}
print(String(format: "access line: %.0f ns of CPU per line; JSONEncoder's line (the reference): %.0f ns; ratio %.2f",
             line, reference, line / reference))
