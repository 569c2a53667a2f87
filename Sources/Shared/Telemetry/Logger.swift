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
            guard let l = Level.allCases.first(where: { $0.name == name || ($0 == .warning && name == "warning") }) else { return nil }
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
    public func debug(_ msg: String, _ fields: @autoclosure () -> [String: any Sendable] = [:]) { log(.debug, msg, fields()) }
    public func info(_ msg: String, _ fields: @autoclosure () -> [String: any Sendable] = [:]) { log(.info, msg, fields()) }
    public func warning(_ msg: String, _ fields: @autoclosure () -> [String: any Sendable] = [:]) { log(.warning, msg, fields()) }
    public func error(_ msg: String, _ fields: @autoclosure () -> [String: any Sendable] = [:]) { log(.error, msg, fields()) }

    public func log(_ level: Level, _ msg: String, _ fields: @autoclosure () -> [String: any Sendable] = [:]) {
        log(level, msg, typed: fields().mapValues(LogValue.init))
    }

    /// A line whose fields are a type of their own, or a dictionary of values: the type's keys
    /// join the common ones in one object. A type (the access log, once per request) costs about
    /// half the encoding time of a dictionary, and no casting of each value.
    public func log<Fields: Encodable>(_ level: Level, _ msg: String, typed fields: @autoclosure () -> Fields) {
        guard level >= minimum else { return }
        let line = TypedLine(
            time: Timestamp.iso8601(Date()), level: level.name, service: service, msg: msg,
            requestId: LogContext.requestId, traceId: LogContext.trace?.traceId, fields: fields())
        guard var data = try? Logger.encoder.encode(line) else { return }
        data.append(0x0A)
        sink.write(data)
    }

    /// The common keys of a line, with the fields' own keys in the same object.
    private struct TypedLine<Fields: Encodable>: Encodable {
        let time: String, level: String, service: String, msg: String
        let requestId: String?
        let traceId: String?
        let fields: Fields

        enum CodingKeys: String, CodingKey {
            case time, level, service, msg
            case requestId = "request.id", traceId = "trace.id"
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(time, forKey: .time)
            try c.encode(level, forKey: .level)
            try c.encode(service, forKey: .service)
            try c.encode(msg, forKey: .msg)
            try c.encodeIfPresent(requestId, forKey: .requestId)
            try c.encodeIfPresent(traceId, forKey: .traceId)
            try fields.encode(to: encoder)
        }
    }

    /// Codable, not `JSONSerialization`: a line cost about 100 µs that way, as much CPU as the
    /// request it logged.
    private static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return e
    }()
}

/// A field value as a log line holds it.
enum LogValue: Encodable {
    case string(String), int(Int64), double(Double), bool(Bool)

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

    func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .string(let s): try c.encode(s)
        case .int(let i): try c.encode(i)
        case .double(let d): try c.encode(d)
        case .bool(let b): try c.encode(b)
        }
    }
}

/// Where log lines go. Writes are serialised so lines from different threads never interleave.
public final class LogSink: Sendable {
    private let lock = Mutex<Void>(())
    private let handle: FileHandle
    private let capturing: Bool
    private let captured = Mutex<[Data]>([])

    public static let standardError = LogSink(handle: .standardError)

    public init(handle: FileHandle) {
        self.handle = handle
        self.capturing = false
    }

    /// A sink that keeps lines in memory, for tests.
    public init(capturing: Void) {
        self.handle = .nullDevice
        self.capturing = true
    }

    public func write(_ line: Data) {
        if capturing {
            captured.withLock { $0.append(line) }
            return
        }
        lock.withLock { _ in
            // write(2), not FileHandle.write, which traps on an error (a closed pipe, a full
            // disk): a line that cannot be written is dropped and the service goes on.
            let fd = handle.fileDescriptor
            line.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
                var offset = 0
                while offset < raw.count {
                    let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                    if n > 0 { offset += n } else if n < 0 && errno == EINTR { continue } else { return }
                }
            }
        }
    }

    /// Captured lines (only for a capturing sink).
    public var lines: [String] {
        captured.withLock { $0.map { String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .newlines) } }
    }
}
