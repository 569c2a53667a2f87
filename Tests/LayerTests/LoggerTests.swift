import Foundation
import Testing

@testable import Core
@testable import Telemetry

@Suite struct LoggerTests {
    @Test func writesOneJSONObjectPerLineWithRequestId() throws {
        let sink = LogSink(capturing: ())
        let logger = Logger(service: "coupons", sink: sink)
        LogContext.$requestId.withValue("req-42") {
            logger.info("redeemed", ["redemption.id": "r1", "count": 3])
        }
        logger.debug("hidden below the minimum level")
        #expect(sink.lines.count == 1)
        let object = try #require(JSONSerialization.jsonObject(with: Data(sink.lines[0].utf8)) as? [String: Any])
        #expect(object["service"] as? String == "coupons")
        #expect(object["level"] as? String == "info")
        #expect(object["msg"] as? String == "redeemed")
        #expect(object["request.id"] as? String == "req-42")
        #expect(object["redemption.id"] as? String == "r1")
        #expect(object["count"] as? Int == 3)
        #expect(Timestamp.parse(object["time"] as? String ?? "") != nil)
    }

    @Test func fieldValuesKeepTheirJSONKinds() throws {
        let sink = LogSink(capturing: ())
        Logger(service: "s", sink: sink).warning(
            "kinds",
            [
                "ok": true, "ms": 1.5, "n": Int64(7), "at": Date(timeIntervalSince1970: 1_764_483_573.125),
                "nan": Double.nan, "other": Duration.seconds(2)
            ])
        let object = try #require(JSONSerialization.jsonObject(with: Data(sink.lines[0].utf8)) as? [String: Any])
        #expect(object["ok"] as? Bool == true)
        #expect(object["ms"] as? Double == 1.5)
        #expect(object["n"] as? Int == 7)
        #expect(object["at"] as? String == "2025-11-30T06:19:33.125Z")
        #expect(object["nan"] as? String == "nan")
        #expect(object["other"] as? String == "2.0 seconds")
        #expect(sink.lines[0].hasPrefix("{\"at\":"), "keys sorted")
    }

    /// Numbers and times are written straight into the line, as the `String` each stood for
    /// before wrote them: an integer as `String(n)`; hundredths as `Double(n) / 100` (integral
    /// without a fraction, else its shortest decimal), also near 2⁵³ / 100 where the two places
    /// give way to the double's own text; a time as `Timestamp.iso8601`.
    @Test func numbersAndTimesAreWrittenAsTheirTextWas() {
        func written(_ body: (inout [UInt8]) -> Void) -> String {
            var out = [UInt8]()
            body(&out)
            return String(decoding: out, as: UTF8.self)
        }
        func asDouble(_ d: Double) -> String { d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : d.description }
        var rng = SystemRandomNumberGenerator()
        let limit = Int64(1 << 53 / 100)
        var integers: [Int64] = [0, 1, -1, 9, 10, -10, .max, .min, .max - 1, .min + 1]
        var hundredths: [Int64] = [
            0, 1, -1, 5, -5, 10, 99, 100, 101, 110, -110, 12_345, limit - 1, limit, limit + 1, -limit, .max, .min + 1
        ]
        for _ in 0..<20_000 {
            integers.append(Int64.random(in: .min ... .max, using: &rng))
            hundredths.append(Int64.random(in: -1_000_000...1_000_000, using: &rng))
            hundredths.append(Int64.random(in: -limit * 2...limit * 2, using: &rng))
        }
        for n in integers { #expect(written { LogLine.integer(n, into: &$0) } == String(n)) }
        for n in hundredths {
            #expect(written { LogLine.hundredths(n, into: &$0) } == asDouble(Double(n) / 100), "\(n)")
        }
        for seconds in [0, 1_764_483_573.125, -62_135_596_800, 253_402_300_799.999, Double.random(in: 0...4e9)] {
            let date = Date(timeIntervalSince1970: seconds)
            #expect(written { Timestamp.iso8601(date, into: &$0) } == Timestamp.iso8601(date))
        }
        // In a line: the access log's duration and status, and the time.
        var line = LogLine()
        line.add("at", .time(Date(timeIntervalSince1970: 1_764_483_573.125)))
        line.add("ms", .hundredths(1_230))
        line.add("n", .int(-42))
        #expect(
            String(decoding: line.finish(), as: UTF8.self)
                == #"{"at":"2025-11-30T06:19:33.125Z","ms":12.3,"n":-42}"# + "\n")
    }

    /// Keys sort by their UTF-8 bytes, also where their first eight bytes tie or one key is a
    /// prefix of another (the sort compares those eight bytes as a number first).
    @Test func keysSortByTheirBytesWhereTheirFirstEightTie() throws {
        let keys = [
            "http.routes", "http.route", "http.r", "aaaaaaaab", "aaaaaaaaa", "aaaaaaaa", "Z", "é", "e", "time2", "zz"
        ]
        let sink = LogSink(capturing: ())
        Logger(service: "s", sink: sink).warning(
            "m", Dictionary(uniqueKeysWithValues: keys.map { ($0, 1 as any Sendable) }))
        let line = try #require(sink.lines.first)
        let all = keys + ["level", "msg", "service", "time"]
        let written = all.map { key in line.utf8.ranges(of: "\"\(key)\":".utf8).first!.lowerBound }
        let expected = all.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        #expect(zip(all, written).sorted { $0.1 < $1.1 }.map(\.0) == expected)
    }

    /// Lines are written byte by byte (`LogLine`): whatever a message or field holds (quotes,
    /// backslashes, control characters, any Unicode), the line parses back to exactly it.
    @Test func everyStringReadsBackAsItWasLogged() throws {
        var samples = [
            "", "plain", "quote \" and \\ backslash", "tab\tnew\nline\r", "\u{0}\u{1}\u{1F}\u{7F}", "é ü 日本 🎟️",
            "</script>"
        ]
        for _ in 0..<300 {
            samples.append(String((0..<24).map { _ in Character(Unicode.Scalar(UInt8.random(in: 0...127))) }))
        }
        let sink = LogSink(capturing: ())
        let logger = Logger(service: "s", sink: sink)
        for s in samples { logger.warning(s, ["field": s, "negative": -12, "fraction": 0.1, "whole": 2.0]) }
        #expect(sink.lines.count == samples.count)
        for (line, s) in zip(sink.lines, samples) {
            let object = try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
            #expect(object["msg"] as? String == s)
            #expect(object["field"] as? String == s)
            #expect(object["negative"] as? Int == -12)
            #expect(object["fraction"] as? Double == 0.1)
            #expect(object["whole"] as? Double == 2)
        }
    }

    @Test func fieldsAreBuiltOnlyForLinesThatAreWritten() {
        final class Counter: @unchecked Sendable { var n = 0 }
        let built = Counter()
        func fields() -> [String: any Sendable] {
            built.n += 1
            return ["k": "v"]
        }
        let sink = LogSink(capturing: ())
        let logger = Logger(service: "s", minimum: .warning, sink: sink)
        logger.info("below the minimum", fields())
        #expect(built.n == 0)
        logger.warning("written", fields())
        #expect(built.n == 1)
        #expect(sink.lines.count == 1)
    }

    @Test func messagesWithNewlinesStayOnOneLine() {
        let sink = LogSink(capturing: ())
        Logger(service: "s", sink: sink).warning("line1\nline2")
        #expect(sink.lines.count == 1)
        #expect(!sink.lines[0].contains("\n"))
    }

    @Test func timestampsHaveMilliseconds() {
        let d = Date(timeIntervalSince1970: 1_764_483_573.125)
        #expect(Timestamp.iso8601(d) == "2025-11-30T06:19:33.125Z")
        #expect(abs(Timestamp.parse("2025-11-30T06:19:33.125Z")!.timeIntervalSince(d)) < 0.001)
        // A Double holds .293 as .29299…: still printed (and sent as milliseconds) as .293.
        let tricky = Date(timeIntervalSince1970: 1_798_614_830.293)
        #expect(Timestamp.iso8601(tricky).hasSuffix(".293Z"))
        #expect(Timestamp.milliseconds(tricky) == 1_798_614_830_293)
    }

    /// `iso8601` and `parse` do their own date arithmetic: from 1583 (Foundation's calendar is
    /// Julian before the Gregorian reform; ISO 8601 and PostgreSQL are proleptic Gregorian) they
    /// print what Foundation's formatter prints, leap days and times before 1970 included, and every
    /// time from year 1 to 9999 reads back as the same instant.
    @Test func timestampsMatchFoundationsFormatter() {
        let foundation = Date.ISO8601FormatStyle(timeZone: .gmt)  // whole seconds: it truncates fractions
        let first = -62_135_596_800_000 as Int64  // 0001-01-01T00:00:00.000Z
        let reform = -12_212_553_600_000 as Int64  // 1583-01-01T00:00:00.000Z
        let last = 253_402_300_799_999 as Int64  // 9999-12-31T23:59:59.999Z
        var rng = SystemRandomNumberGenerator()
        var instants: [Int64] = [
            reform, last, 0, -1, 951_782_400_000, 951_868_799_999, -2_203_891_200_000, 4_107_542_400_000
        ]
        instants += (0..<5_000).map { _ in Int64.random(in: reform...last, using: &rng) }
        for ms in instants {
            let date = Date(timeIntervalSince1970: Double(ms) / 1000)
            let text = Timestamp.iso8601(date)
            let second = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000)
            let fraction = String(ms - second * 1000)
            let expected =
                foundation.format(Date(timeIntervalSince1970: Double(second))).dropLast()
                + "." + String(repeating: "0", count: 3 - fraction.count) + fraction + "Z"
            #expect(text == expected, "\(ms)")
        }
        for ms in instants + [first] + (0..<2_000).map({ _ in Int64.random(in: first...reform, using: &rng) }) {
            let text = Timestamp.iso8601(Date(timeIntervalSince1970: Double(ms) / 1000))
            #expect(Timestamp.parse(text).map(Timestamp.milliseconds) == ms, "\(text)")
        }
        #expect(Timestamp.iso8601(Date(timeIntervalSince1970: -1 / 1000)) == "1969-12-31T23:59:59.999Z")
        #expect(Timestamp.iso8601(Date(timeIntervalSince1970: 951_782_400)) == "2000-02-29T00:00:00.000Z")
        #expect(Timestamp.iso8601(Date(timeIntervalSince1970: -62_135_596_800)) == "0001-01-01T00:00:00.000Z")
    }

    @Test func timestampsReadRFC3339AndNothingElse() {
        let base = 1_796_019_573.0  // 2026-11-30T06:19:33Z
        let read: [(String, Double)] = [
            ("2026-11-30T06:19:33Z", base), ("2026-11-30T06:19:33z", base), ("2026-11-30t06:19:33Z", base),
            ("2026-11-30T06:19:33.1Z", base + 0.1), ("2026-11-30T06:19:33.123456789Z", base + 0.123),
            ("2026-11-30T06:19:33.12345678901234567890Z", base + 0.123), ("2026-11-30T06:19:33.9999Z", base + 0.999),
            ("2026-11-30T06:19:33+01:00", base - 3600), ("2026-11-30T06:19:33+0100", base - 3600),
            ("2026-11-30T06:19:33+01", base - 3600), ("2026-11-30T06:19:33.5-05:30", base + 0.5 + 19_800)
        ]
        for (text, seconds) in read {
            #expect(
                Timestamp.parse(text).map { abs($0.timeIntervalSince1970 - seconds) < 0.000_001 } == true, "\(text)")
        }
        let refused = [
            "2026-11-30T06:19:33", "2026-11-30T06:19:33.Z", "2026-11-30T06:19:33 Z", "2026-11-30T06:19:33Zjunk",
            "2026-11-30T06:19:33GMT", "2026-11-30T06:19:33+24:00", "2026-11-30T06:19:33+01:60",
            "2026-11-30T06:19:33+01:00:30",
            "2026-11-30T06:19:33.12a4Z", "2026-02-29T00:00:00Z", "2026-11-30T24:00:00Z", "2026-11-30T06:19:60Z",
            "0000-01-01T00:00:00Z", "12026-11-30T06:19:33Z", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00",
            "2026-11-30 06:19:33Z", "2026-1-30T06:19:33Z", ""
        ]
        for text in refused { #expect(Timestamp.parse(text) == nil, "\(text)") }
        // Fractions are cut to the millisecond, never rounded across a day or a year.
        #expect(Timestamp.parse("9999-12-31T23:59:59.9999Z").map(Timestamp.iso8601) == "9999-12-31T23:59:59.999Z")
        #expect(Timestamp.parse("2024-02-29T23:59:59.9999Z").map(Timestamp.iso8601) == "2024-02-29T23:59:59.999Z")
        #expect(Timestamp.parse("0001-01-01T01:00:00+01:00").map(Timestamp.iso8601) == "0001-01-01T00:00:00.000Z")
    }

    @Test func aTypedLineReadsLikeTheSameFieldsGivenAsADictionary() throws {
        struct Fields: LogFields {
            let route: String, status: Int, ms: Double
            func write(to line: inout LogLine) {
                line.add("http.route", .string(route))
                line.add("http.status", .int(Int64(status)))
                line.add("http.duration_ms", .double(ms))
            }
        }
        let sink = LogSink(capturing: ())
        let logger = Logger(service: "gateway", sink: sink)
        LogContext.$requestId.withValue("req-7") {
            logger.log(.info, "http request", typed: Fields(route: "/v1/x/{id}", status: 201, ms: 1.25))
            logger.info("http request", ["http.route": "/v1/x/{id}", "http.status": 201, "http.duration_ms": 1.25])
        }
        #expect(sink.lines.count == 2)
        func withoutTime(_ line: String) throws -> NSDictionary {
            let parsed = try JSONSerialization.jsonObject(with: Data(line.utf8))
            #expect(parsed is [String: Any], "each line is a JSON object")
            let o = parsed as? [String: Any] ?? [:]
            #expect(Timestamp.parse(o["time"] as? String ?? "") != nil)
            return o.filter { $0.key != "time" } as NSDictionary
        }
        #expect(try withoutTime(sink.lines[0]) == withoutTime(sink.lines[1]))
        #expect(sink.lines[0].hasPrefix(#"{"http.duration_ms":1.25,"#), "keys sorted across both parts")
        #expect(sink.lines[0].contains(#""request.id":"req-7""#))

        final class Counter: @unchecked Sendable { var n = 0 }
        let built = Counter()
        func fields() -> Fields {
            built.n += 1
            return Fields(route: "/", status: 200, ms: 0)
        }
        Logger(service: "s", minimum: .warning, sink: sink).log(.info, "below the minimum", typed: fields())
        #expect(built.n == 0)
    }
}

/// A log line that cannot be written (its reader gone, a full disk) is dropped; FileHandle.write
/// would trap and take the service down with it.
@Suite struct LogSinkFailureTests {
    @Test func writingToAPipeWhoseReaderIsGoneDropsTheLine() {
        signal(SIGPIPE, SIG_IGN)  // as every service does
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        close(fds[0])
        let sink = LogSink(handle: FileHandle(fileDescriptor: fds[1], closeOnDealloc: true))
        Logger(service: "test", sink: sink).error("after the reader left", ["n": 1])
        sink.write(Data("a line\n".utf8))
        #expect(Bool(true), "still running")
    }
}

/// Lines below `warning` are written in batches by the sink's own thread; warnings and errors at
/// once. Either way the file holds every line, whole, in the order it was logged.
@Suite struct LogSinkBatchTests {
    /// A sink writing to a new file (removed when the test ends), and a way to read the file back.
    func fileSink() throws -> (LogSink, read: () throws -> [String]) {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("redeem-log-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: url) }  // the sink keeps it open
        #expect(FileManager.default.createFile(atPath: url.path, contents: nil))
        let sink = LogSink(handle: try FileHandle(forWritingTo: url))
        let reader = try FileHandle(forReadingFrom: url)
        return (
            sink,
            {
                try reader.seek(toOffset: 0)
                return String(decoding: try reader.readToEnd() ?? Data(), as: UTF8.self).split(separator: "\n").map(
                    String.init)
            }
        )
    }

    @Test func linesFromManyThreadsArriveWholeAndInTheOrderEachThreadLoggedThem() async throws {
        let (sink, read) = try fileSink()
        let logger = Logger(service: "s", sink: sink)
        let threads = 4, each = 3_000
        await withTaskGroup(of: Void.self) { group in
            for t in 0..<threads {
                group.addTask {
                    for i in 0..<each {
                        // A warning now and then: written at once, after the lines queued before it.
                        if i % 500 == 499 {
                            logger.warning("w", ["t": t, "i": i])
                        } else {
                            logger.info("i", ["t": t, "i": i])
                        }
                    }
                }
            }
        }
        sink.flush()
        let lines = try read()
        #expect(lines.count == threads * each)
        var next = [Int](repeating: 0, count: threads)
        for line in lines {
            let object = try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
            let t = try #require(object["t"] as? Int), i = try #require(object["i"] as? Int)
            #expect(i == next[t], "thread \(t)'s lines in order")
            next[t] = i + 1
        }
        #expect(next == [Int](repeating: each, count: threads))
    }

    @Test func aWarningIsWrittenAtOnceAfterTheLinesBeforeIt() throws {
        let (sink, read) = try fileSink()
        let logger = Logger(service: "s", sink: sink)
        // The writer thread is busy or paused for a while: lines queue behind it.
        for i in 0..<50 { logger.info("queued", ["i": i]) }
        logger.error("now")
        let lines = try read()  // no flush
        #expect(lines.count == 51)
        #expect(lines.last?.contains("\"msg\":\"now\"") == true)
        _ = sink
    }

    @Test func infoLinesReachTheFileWithoutAFlush() async throws {
        let (sink, read) = try fileSink()
        Logger(service: "s", sink: sink).info("soon")
        let deadline = ContinuousClock.now + .seconds(5)
        var lines: [String] = []
        while ContinuousClock.now < deadline {
            lines = try read()
            if !lines.isEmpty { break }
            try await Task.sleep(for: .milliseconds(2))
        }
        #expect(lines.count == 1)
        _ = sink
    }

    @Test func aSinkThatGoesAwayWritesWhatIsPending() throws {
        var (sink, read): (LogSink?, () throws -> [String]) = try fileSink()
        for i in 0..<20 { Logger(service: "s", sink: sink!).info("pending", ["i": i]) }
        sink = nil
        #expect(try read().count == 20)
    }
}
