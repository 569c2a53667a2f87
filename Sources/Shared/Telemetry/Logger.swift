import Core
import Foundation
import Glibc
import Synchronization

/// JSON-lines logger on stderr: `time`, `level`, `service`, `msg`, `request.id`, `trace.id` and
/// dot-named fields. Never pass secrets, tokens, passwords or full keys as fields.
public struct Logger: Sendable {
    public enum Level: Int, Sendable, Comparable, CaseIterable {
        case debug, info, warning, error
        public var name: String { ["debug", "info", "warn", "error"][rawValue] }
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
        public init?(name: String) {
            guard let l = Level.allCases.first(where: { $0.name == name || ($0 == .warning && name == "warning") })
            else { return nil }
            self = l
        }
    }

    public let service: String
    public let minimum: Level
    private let sink: LogSink

    public init(service: String, minimum: Level = .info, sink: LogSink = .standardError) {
        self.service = service
        self.minimum = minimum
        self.sink = sink
    }

    // Fields are built only when the line is written: below the minimum level a call costs a
    // comparison, wherever it is made (the access log runs once per request).
    public func debug(_ msg: String, _ fields: @autoclosure () -> [String: any Sendable] = [:]) {
        log(.debug, msg, fields())
    }
    public func info(_ msg: String, _ fields: @autoclosure () -> [String: any Sendable] = [:]) {
        log(.info, msg, fields())
    }
    public func warning(_ msg: String, _ fields: @autoclosure () -> [String: any Sendable] = [:]) {
        log(.warning, msg, fields())
    }
    public func error(_ msg: String, _ fields: @autoclosure () -> [String: any Sendable] = [:]) {
        log(.error, msg, fields())
    }

    public func log(_ level: Level, _ msg: String, _ fields: @autoclosure () -> [String: any Sendable] = [:]) {
        guard level >= minimum else { return }
        write(
            level, msg, requestId: LogContext.requestId, traceId: LogContext.trace?.traceId, DictionaryFields(fields()))
    }

    /// A line whose fields are a type of their own: its keys join the common ones in one object.
    /// The access log (once per request) writes one this way, with no dictionary built or cast.
    public func log<Fields: LogFields>(_ level: Level, _ msg: String, typed fields: @autoclosure () -> Fields) {
        guard level >= minimum else { return }
        write(level, msg, requestId: LogContext.requestId, traceId: LogContext.trace?.traceId, fields())
    }

    /// The same, with the request and trace given rather than read from the task's context (the
    /// HTTP server writes its access log after the request's task has ended).
    public func log<Fields: LogFields>(
        _ level: Level, _ msg: String, requestId: String?, traceId: String?, typed fields: @autoclosure () -> Fields
    ) {
        guard level >= minimum else { return }
        write(level, msg, requestId: requestId, traceId: traceId, fields())
    }

    /// Formats the line in one pass into a buffer of bytes (`LogLine`): about 1 µs for an access
    /// log line, where `JSONEncoder` took 15 µs (docs/performance.md).
    private func write<Fields: LogFields>(
        _ level: Level, _ msg: String, requestId: String?, traceId: String?, _ fields: Fields
    ) {
        var line = LogLine()
        line.add(.time, .time(Date()))
        line.add(.level, .string(level.name))
        line.add(.service, .string(service))
        line.add(.msg, .string(msg))
        if let requestId { line.add(.requestId, .string(requestId)) }
        if let traceId { line.add(.traceId, .string(traceId)) }
        fields.write(to: &line)
        sink.write(&line, urgent: level >= .warning)
    }
}

/// A log line's key with what sorting and writing it need worked out once, so a key the code
/// names (a `static let`) costs nothing per line. A class: a line holds and sorts references.
public final class LogKey: Sendable {
    public let name: String
    /// Its first eight bytes as a number (`JSONText.keyPrefix`), which decides most comparisons
    /// of the sort.
    let prefix: UInt64
    /// `"name":`, as JSON writes it.
    let json: [UInt8]

    public init(_ name: String) {
        self.name = name
        prefix = JSONText.keyPrefix(name)
        var json = [UInt8]()
        JSONText.string(name, escapeSlashes: false, into: &json)
        json.append(UInt8(ascii: ":"))
        self.json = json
    }

    static let time = LogKey("time")
    static let level = LogKey("level")
    static let service = LogKey("service")
    static let msg = LogKey("msg")
    static let requestId = LogKey("request.id")
    static let traceId = LogKey("trace.id")
}

/// Fields a log line can carry without a dictionary: each adds its own keys (`LogLine.add`).
public protocol LogFields {
    func write(to line: inout LogLine)
}

/// The fields of a dictionary (`Logger.info("msg", ["key": value])`).
struct DictionaryFields: LogFields {
    let fields: [String: any Sendable]
    init(_ fields: [String: any Sendable]) { self.fields = fields }
    func write(to line: inout LogLine) {
        for (key, value) in fields { line.add(key, LogValue(value)) }
    }
}

/// One JSON object on one line, keys sorted (lines read the same whatever order fields were
/// given in), written byte by byte: a log line's values are strings, integers, numbers and
/// booleans, and JSON's string escapes are all it needs of a JSON writer.
public struct LogLine {
    private var entries: [(key: LogKey, value: LogValue)] = []

    init() { entries.reserveCapacity(12) }

    /// Adds `key` (a later value of the same key replaces an earlier one).
    public mutating func add(_ key: String, _ value: LogValue) {
        add(LogKey(key), value)
    }

    /// The same, with the key's sort prefix and text worked out already.
    public mutating func add(_ key: LogKey, _ value: LogValue) {
        if let i = entries.firstIndex(where: { $0.key.prefix == key.prefix && $0.key.name == key.name }) {
            entries[i].value = value
        } else {
            entries.append((key, value))
        }
    }

    /// Puts the keys in their order (before `render`, which the sink runs under its lock).
    mutating func sortKeys() {
        entries.sort { a, b in
            a.key.prefix != b.key.prefix
                ? a.key.prefix < b.key.prefix : a.key.name.utf8.lexicographicallyPrecedes(b.key.name.utf8)
        }
    }

    /// Appends the line's bytes, newline included, to `out`; the keys are sorted already.
    func render(into out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        for (i, entry) in entries.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: entry.key.json)
            switch entry.value {
            case .string(let s): Self.string(s, into: &out)
            case .int(let n): Self.integer(n, into: &out)
            case .double(let d) where d.isFinite: Self.number(d, into: &out)
            case .double(let d): Self.string(String(describing: d), into: &out)
            case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
            case .time(let date):
                out.append(UInt8(ascii: "\""))
                Timestamp.iso8601(date, into: &out)
                out.append(UInt8(ascii: "\""))
            case .hundredths(let n): Self.hundredths(n, into: &out)
            }
        }
        out.append(contentsOf: [UInt8(ascii: "}"), 0x0A])
    }

    /// The line's bytes, newline included.
    mutating func finish() -> [UInt8] {
        sortKeys()
        var out = [UInt8]()
        out.reserveCapacity(512)  // an access log line is about 330 bytes
        render(into: &out)
        return out
    }

    /// An integer's digits, as `String(n)` writes them.
    static func integer(_ n: Int64, into out: inout [UInt8]) {
        if n < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = n.magnitude
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = 20
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start...]))
        }
    }

    /// A finite number as JSON writes it: integral values without a fraction (`2`, not `2.0`), as
    /// `JSONEncoder` did; the rest in Swift's shortest form that reads back the same.
    static func number(_ d: Double, into out: inout [UInt8]) {
        if d == d.rounded(), abs(d) < 1e15 { return integer(Int64(d), into: &out) }
        out.append(contentsOf: d.description.utf8)
    }

    /// `n` hundredths (a duration in ms to two places) as `number` writes `Double(n) / 100`:
    /// integral without a fraction, else the shortest decimal, which below 2⁵³ / 100 is the
    /// two places without a trailing zero.
    static func hundredths(_ n: Int64, into out: inout [UInt8]) {
        guard n.magnitude < 1 << 53 / 100 else { return number(Double(n) / 100, into: &out) }
        let fraction = Int64(n.magnitude % 100)
        guard fraction != 0 else { return integer(n / 100, into: &out) }
        if n < 0 { out.append(UInt8(ascii: "-")) }
        integer(Int64(n.magnitude / 100), into: &out)
        out.append(UInt8(ascii: "."))
        out.append(UInt8(ascii: "0") + UInt8(fraction / 10))
        if fraction % 10 != 0 { out.append(UInt8(ascii: "0") + UInt8(fraction % 10)) }
    }

    /// A JSON string, escaped as Foundation's encoder escapes it (`JSONText.string`): `"` and `\`,
    /// control characters as `\n`, `\t`… or `\u00xx`; the rest, UTF-8 included, as is.
    static func string(_ s: String, into out: inout [UInt8]) {
        JSONText.string(s, escapeSlashes: false, into: &out)
    }
}

/// A field value as a log line holds it. `time` is written as `Timestamp.iso8601` writes the date,
/// `hundredths` as the number `n / 100` (a duration in ms to two places), each with no `String`
/// or `Double` made on the way.
public enum LogValue: Sendable {
    case string(String), int(Int64), double(Double), bool(Bool), time(Date), hundredths(Int64)

    init(_ v: any Sendable) {
        switch v {
        case let s as String: self = .string(s)
        case let b as Bool: self = .bool(b)
        case let i as Int: self = .int(Int64(i))
        case let i as Int64: self = .int(i)
        case let i as Int32: self = .int(Int64(i))
        case let d as Double: self = d.isFinite ? .double(d) : .string(String(describing: d))
        case let d as Date: self = .string(Timestamp.iso8601(d))
        default: self = .string(String(describing: v))
        }
    }
}

/// Where log lines go, in the order they were logged: lines from different threads never
/// interleave.
///
/// Lines below `warning` are gathered in memory and written by a thread of the sink's own: one
/// `write(2)` for what arrived in the meantime, then a pause of `batchPause` (at most 200 writes
/// and wake-ups a second, however many requests). The request path pays a lock and a copy, not
/// a system call and the lock around it (docs/performance.md, "The access log off the request
/// path"). A warning or an error is written at once, after every line before it, so the last words
/// of a service that crashes reach the log; so is any line once `pendingLimit` bytes wait (a reader
/// that does not keep up slows the writers, as before, rather than memory growing). `flush()`
/// writes what is pending; a service calls it as it ends, and `exit` does for the standard error.
public final class LogSink: Sendable {
    private let queue: LineQueue?
    private let captured = Mutex<[Data]>([])

    public static let standardError: LogSink = {
        let sink = LogSink(handle: .standardError)
        atexit { LogSink.standardError.flush() }
        return sink
    }()

    /// The pause after each batch written: lines wait at most this long, plus the write.
    public static let batchPause = Duration.milliseconds(5)
    /// Pending bytes past which a line is written at once.
    static let pendingLimit = 1 << 20

    public init(handle: FileHandle) {
        queue = LineQueue(handle: handle)
    }

    /// A sink that keeps lines in memory, for tests.
    public init(capturing: Void) {
        queue = nil
    }

    deinit { queue?.close() }

    /// Writes `line` (its bytes, newline included) at once, after every line before it.
    public func write(_ line: Data) {
        write(Array(line), urgent: true)
    }

    /// Writes `line` into what is pending (no buffer of its own), for the writer thread, or at
    /// once when `urgent`.
    public func write(_ line: inout LogLine, urgent: Bool) {
        guard let queue else {
            let out = line.finish()
            captured.withLock { $0.append(Data(out)) }
            return
        }
        line.sortKeys()
        queue.append(urgent: urgent) { line.render(into: &$0) }
    }

    /// Queues `line` for the writer thread, or writes it at once when `urgent`.
    public func write(_ line: [UInt8], urgent: Bool) {
        guard let queue else {
            captured.withLock { $0.append(Data(line)) }
            return
        }
        queue.append(urgent: urgent) { $0.append(contentsOf: line) }
    }

    /// Writes every line logged so far.
    public func flush() {
        queue?.drain()
    }

    /// Captured lines (only for a capturing sink).
    public var lines: [String] {
        captured.withLock { $0.map { String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .newlines) } }
    }
}

/// The lines a sink has not written yet, and the thread that writes them.
private final class LineQueue: @unchecked Sendable {
    private let handle: FileHandle
    /// Guards `pending`, `writerWaiting`, `writerStarted` and `closed`.
    private let condition = NSCondition()
    private var pending: [UInt8] = []
    private var writerWaiting = false
    private var writerStarted = false
    private var closed = false
    /// Held while a batch is taken and written, so batches reach the file in the order they were
    /// taken; it holds the buffer a batch is written from.
    private let writing = Mutex<[UInt8]>([])

    init(handle: FileHandle) {
        self.handle = handle
    }

    /// Appends a line to what is pending: `write` puts its bytes at the end of `pending`.
    func append(urgent: Bool, _ write: (inout [UInt8]) -> Void) {
        condition.lock()
        write(&pending)
        let now = urgent || pending.count >= LogSink.pendingLimit
        if !now {
            if !writerStarted {
                writerStarted = true
                startWriter()
            } else if writerWaiting {
                condition.signal()
            }
        }
        condition.unlock()
        if now { drain() }
    }

    /// Takes every pending line and writes it.
    func drain() {
        writing.withLock { batch in
            condition.lock()
            swap(&pending, &batch)
            condition.unlock()
            guard !batch.isEmpty else { return }
            write(batch)
            // A large buffer is kept while lines come fast (no allocation and page faults for
            // every batch), and given back with the first small batch after them: an idle
            // service's memory stays small. A batch is at most about `pendingLimit`.
            if batch.count < 64 * 1024 && batch.capacity > 64 * 1024 {
                batch = []
            } else {
                batch.removeAll(keepingCapacity: true)
            }
        }
    }

    /// Ends the writer thread once it has written what is pending.
    func close() {
        condition.lock()
        closed = true
        condition.signal()
        condition.unlock()
        drain()
    }

    private func startWriter() {
        let thread = Thread { [self] in
            // Signals go to the threads that wait for them (Lifecycle), never to this one.
            var all = sigset_t()
            sigfillset(&all)
            pthread_sigmask(SIG_BLOCK, &all, nil)
            runWriter()
        }
        thread.name = "log writer"
        thread.stackSize = 256 * 1024
        thread.start()
    }

    private func runWriter() {
        let pause = useconds_t((LogSink.batchPause / .microseconds(1)).rounded())
        while true {
            condition.lock()
            while pending.isEmpty && !closed {
                writerWaiting = true
                condition.wait()
                writerWaiting = false
            }
            let done = closed
            condition.unlock()
            drain()
            if done { return }
            usleep(pause)
        }
    }

    /// write(2), not FileHandle.write, which traps on an error (a closed pipe, a full disk): what
    /// cannot be written is dropped and the service goes on.
    private func write(_ bytes: [UInt8]) {
        let fd = handle.fileDescriptor
        bytes.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n > 0 { offset += n } else if n < 0 && errno == EINTR { continue } else { return }
            }
        }
    }
}
