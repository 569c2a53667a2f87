import Foundation
import Synchronization

/// Request-scoped context carried through tasks and across the bus.
public enum LogContext {
    /// The request id of the HTTP request (or bus message) being handled, if any.
    @TaskLocal public static var requestId: String?
}

/// JSON-lines logger on stderr (SPEC §6): `time`, `level`, `service`, `msg`, `request.id` and
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

    /// Whether lines of `level` are written (to skip building costly fields when they are not).
    public func enabled(_ level: Level) -> Bool { level >= minimum }

    public func debug(_ msg: String, _ fields: [String: any Sendable] = [:]) { log(.debug, msg, fields) }
    public func info(_ msg: String, _ fields: [String: any Sendable] = [:]) { log(.info, msg, fields) }
    public func warning(_ msg: String, _ fields: [String: any Sendable] = [:]) { log(.warning, msg, fields) }
    public func error(_ msg: String, _ fields: [String: any Sendable] = [:]) { log(.error, msg, fields) }

    public func log(_ level: Level, _ msg: String, _ fields: [String: any Sendable] = [:]) {
        guard level >= minimum else { return }
        var object: [String: Any] = [
            "time": Timestamp.iso8601(Date()),
            "level": level.name,
            "service": service,
            "msg": msg,
        ]
        if let rid = LogContext.requestId { object["request.id"] = rid }
        for (k, v) in fields { object[k] = Logger.jsonValue(v) }
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return }
        sink.write(data + Data([0x0A]))
    }

    private static func jsonValue(_ v: any Sendable) -> Any {
        switch v {
        case let s as String: return s
        case let b as Bool: return b
        case let i as Int: return i
        case let i as Int64: return i
        case let i as Int32: return Int(i)
        case let d as Double: return d.isFinite ? d : String(describing: d)
        case let d as Date: return Timestamp.iso8601(d)
        default: return String(describing: v)
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
        lock.withLock { _ in handle.write(line) }
    }

    /// Captured lines (only for a capturing sink).
    public var lines: [String] {
        captured.withLock { $0.map { String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .newlines) } }
    }
}
