import Foundation

/// The one envelope every bus message travels in: versioned and typed; binary (`BusBinary`) or JSON.
///
/// ```json
/// {"v":1,"id":"…","type":"coupons.redeem","requestId":"…","traceparent":"00-…-…-01","deadlineMs":1764483573123,"body":{…}}
/// ```
/// `id` correlates a reply with its request; `requestId` is the HTTP request id carried for logs;
/// `traceparent` (W3C Trace Context) is the span the message was sent from, so the handler's spans
/// join the sender's trace;
/// `deadlineMs` (Unix ms) lets a server skip work nobody waits for any more; `frames` says the
/// caller reads `WireJSON` values as frames after the reply's envelope (a caller without it, an
/// earlier version, gets them inline).
public struct Envelope<Body: Codable & Sendable>: Codable, Sendable {
    public static var currentVersion: Int { 1 }

    public var v: Int
    public var id: String
    public var type: String
    public var requestId: String?
    public var traceparent: String?
    public var deadlineMs: Int64?
    public var frames: Bool?
    public var body: Body

    public init(
        id: String, type: String, requestId: String? = LogContext.requestId,
        traceparent: String? = LogContext.trace?.traceparent, deadlineMs: Int64? = nil, frames: Bool? = nil, body: Body
    ) {
        self.v = Self.currentVersion
        self.id = id
        self.type = type
        self.requestId = requestId
        self.traceparent = traceparent
        self.deadlineMs = deadlineMs
        self.frames = frames
        self.body = body
    }
}

/// The envelope without its body: what routes a message (`type`, `v`) and answers it (`id`).
public struct EnvelopeHeader: Codable, Sendable {
    public var v: Int
    public var id: String
    public var type: String
    public var requestId: String?
    public var traceparent: String?
    public var deadlineMs: Int64?
    public var frames: Bool?

    public init(
        v: Int, id: String, type: String, requestId: String?, traceparent: String? = nil, deadlineMs: Int64?,
        frames: Bool?
    ) {
        self.v = v
        self.id = id
        self.type = type
        self.requestId = requestId
        self.traceparent = traceparent
        self.deadlineMs = deadlineMs
        self.frames = frames
    }
}

/// A reply to a request: exactly one of `body` and `error`.
public struct ReplyEnvelope<Body: Codable & Sendable>: Codable, Sendable {
    public var v: Int
    public var id: String
    public var body: Body?
    public var error: ServiceError?

    public init(v: Int, id: String, body: Body?, error: ServiceError?) {
        self.v = v
        self.id = id
        self.body = body
        self.error = error
    }
}

/// A request type on the bus, with the type of its answer. `type` is the wire name, e.g.
/// `accounts.ping`; it is stable, and a change of shape gets a new name or a new envelope version.
public protocol BusRequest: Codable, Sendable {
    associatedtype Response: Codable & Sendable
    static var type: String { get }
}

/// An event published on PUB/SUB. The topic is the wire name (`redemption.completed`).
public protocol BusEvent: Codable, Sendable {
    static var topic: String { get }
}

/// An error with a stable machine code, as services answer it and the gateway maps it to HTTP
/// (the API's error shape, docs/api.md). `field` names the offending input where there is one.
public struct ServiceError: Error, Codable, Sendable, Equatable, CustomStringConvertible {
    public var code: ErrorCode
    public var message: String
    public var field: String?
    /// Seconds until trying again makes sense (`rateLimited`, `unavailable`): the gateway's `Retry-After`.
    public var retryAfter: Int?

    public init(_ code: ErrorCode, _ message: String, field: String? = nil, retryAfter: Int? = nil) {
        self.code = code
        self.message = message
        self.field = field
        self.retryAfter = retryAfter
    }

    public var description: String { "\(code.rawValue): \(message)\(field.map { " (\($0))" } ?? "")" }

    // Codes used across the bus itself.
    public static func malformed(_ why: String) -> ServiceError { ServiceError(.malformedMessage, why) }
    public static func unknownType(_ type: String) -> ServiceError { ServiceError(.unknownMessageType, "no handler for message type \(type)") }
    public static func unsupportedVersion(_ v: Int) -> ServiceError { ServiceError(.unsupportedVersion, "message version \(v) is not supported") }
    public static let timeout = ServiceError(.timeout, "the service did not answer in time")
    public static let unavailable = ServiceError(.unavailable, "the service is not reachable")
    public static let stopping = ServiceError(.unavailable, "the service is stopping; try again")
    public static let starting = ServiceError(.unavailable, "the service is starting; try again", retryAfter: 1)
    public static let `internal` = ServiceError(.internal, "something went wrong on our side")
    public static let databaseUnavailable = ServiceError(.unavailable, "the database is not reachable; try again shortly")

    /// An instance's refusal to handle a request at all (`starting`, `stopping`): answered before
    /// any handler ran, so another instance may be asked instead.
    public var refusesUnhandled: Bool {
        code == .unavailable && (message == Self.starting.message || message == Self.stopping.message)
    }

    /// What a handler's error travels as: such a refusal that reached a handler from a service it
    /// called is a plain `unavailable` once it has run, so its own caller does not take it for a
    /// refusal to handle the request, and send it again to another instance.
    public var passedOn: ServiceError {
        guard refusesUnhandled else { return self }
        return ServiceError(.unavailable, "a service it needs is starting or stopping; try again", retryAfter: 1)
    }

    /// What a handler's error travels as: itself if it is a `ServiceError`; `unavailable` when the
    /// database could not be reached (down, restarting, connection lost: worth a retry, and the
    /// gateway answers 503); anything else `internal`.
    public static func carrying(_ error: any Error) -> ServiceError {
        if let e = error as? ServiceError { return e }
        if let e = error as? any ServiceErrorConvertible, let converted = e.serviceError { return converted }
        return .internal
    }
}

/// An error of a lower layer that knows what clients are told about it (the database's connection
/// loss is `databaseUnavailable`), so `carrying` need not know every layer's error types.
public protocol ServiceErrorConvertible: Error {
    /// What it travels as, or nil for `internal`.
    var serviceError: ServiceError? { get }
}

/// An empty body.
public struct Empty: Codable, Sendable, Equatable {
    public init() {}
}
