import Foundation

/// Request-scoped context carried through tasks and across the bus.
public enum LogContext {
    /// The request id of the HTTP request (or bus message) being handled, if any.
    @TaskLocal public static var requestId: String?
}
