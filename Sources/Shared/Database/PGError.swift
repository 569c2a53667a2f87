import Core

/// A PostgreSQL failure. `sqlState` is the five-character SQLSTATE when the server sent one
/// (e.g. `23505` unique violation), so callers can branch on the code rather than the text.
public struct PGError: Error, CustomStringConvertible, Sendable {
    public enum Kind: Sendable { case connection, query, decoding, poolClosed, timeout }

    public let kind: Kind
    public let sqlState: String?
    public let message: String
    /// For a constraint violation, the constraint's name.
    public let constraint: String?

    public init(kind: Kind, sqlState: String? = nil, message: String, constraint: String? = nil) {
        self.kind = kind
        self.sqlState = sqlState
        self.message = message
        self.constraint = constraint
    }

    public var description: String {
        "PGError(\(kind)\(sqlState.map { ", sqlstate \($0)" } ?? ""): \(message)"
    }

    public var isUniqueViolation: Bool { sqlState == "23505" }
    public var isSerializationFailure: Bool { sqlState == "40001" || sqlState == "40P01" }
    /// The connection itself is unusable (server restarted, network gone): retrying on a new one may work.
    public var isConnectionLoss: Bool { kind == .connection || sqlState?.hasPrefix("08") == true || sqlState == "57P01" }
}

extension PGError: ServiceErrorConvertible {
    /// A database that cannot be reached (down, restarting, connection lost) is `unavailable`:
    /// worth a retry, and the gateway answers 503. Any other failure is `internal`.
    public var serviceError: ServiceError? { isConnectionLoss || kind == .poolClosed ? .databaseUnavailable : nil }
}
