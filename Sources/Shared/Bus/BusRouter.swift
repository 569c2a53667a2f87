import Core
import Foundation
import Telemetry

/// What a request handler knows about the message it is answering.
public struct BusContext: Sendable {
    public let type: String
    public let requestId: String?
    public let deadline: Date?
    /// The envelope as it arrived (binary, or JSON from an earlier version or an outbox row), or as
    /// its sender keeps it when it came in both forms (`Pusher.pushRaw(_:binary:)`): a handler that
    /// keeps a request verbatim stores these bytes instead of encoding the request again.
    public let message: Data
}

/// Maps request types to handlers and turns raw envelopes into raw replies (the reply envelope,
/// then the frames of the `WireJSON` values it carries). It never throws and
/// never traps on input: malformed frames, unknown types and versions, and handler errors all
/// become error replies (and a log line). An envelope is parsed once: its header picks the body's
/// type while the same bytes are decoded. Envelopes come binary (`BusBinary`) or as JSON (earlier
/// versions, outbox rows); each is answered in the format it came in.
public struct BusRouter: Sendable {
    /// Runs a request; encodes its reply only when `replying` (a pushed message has nobody to answer),
    /// in binary when the request was.
    typealias Handler = @Sendable (any Sendable, EnvelopeHeader, BusContext, _ replying: Bool, _ binary: Bool) async
        -> [Data]

    private struct Route: Sendable {
        let decodeBody: @Sendable (KeyedDecodingContainer<Incoming.Keys>) throws -> any Sendable
        /// The body of a binary envelope read by hand, or nil when it does not read that way.
        let binaryBody: @Sendable (BusBinaryEnvelope) -> (any Sendable)?
        let handle: Handler
    }

    private var routes: [String: Route] = [:] {
        didSet {
            decoder = BusRouter.decoder(for: routes)
            binaryUserInfo = UserInfo([Incoming.routesKey: routes])
        }
    }
    /// The bus decoder of JSON envelopes, carrying the routes so an envelope's body is decoded as its type.
    private var decoder = BusRouter.decoder(for: [:])
    /// The same for binary envelopes.
    private var binaryUserInfo = UserInfo([:])

    /// A decoder's `userInfo`. `@unchecked Sendable`: it is never changed after `init`, and holds
    /// only the routes, which are `Sendable`.
    private final class UserInfo: @unchecked Sendable {
        let values: [CodingUserInfoKey: Any]
        init(_ values: [CodingUserInfoKey: Any]) { self.values = values }
    }
    private let logger: Logger
    /// The error a request of this type is answered with for now, without being handled, or nil
    /// to handle it (a service answers `unavailable` until its schema is migrated). Pushed messages, which
    /// nobody waits on, are always handled.
    public var refusing: (@Sendable (_ type: String) -> ServiceError?)?
    /// Forbidden messages are logged once a minute per sender and type.
    private let forbidden = RefusalLog()

    public init(logger: Logger) { self.logger = logger }

    private static func decoder(for routes: [String: Route]) -> JSONDecoder {
        let d = JSONDecoder.makeBus()
        d.userInfo[Incoming.routesKey] = routes
        return d
    }

    public var types: [String] { routes.keys.sorted() }

    /// Registers the handler of one request type.
    public mutating func on<R: BusRequest>(_ type: R.Type, _ handler: @escaping @Sendable (R, BusContext) async throws -> R.Response) {
        let logger = self.logger
        routes[R.type] = Route(
            decodeBody: { try $0.decode(R.self, forKey: .body) },
            binaryBody: { $0.body(as: R.self) },
            handle: { body, header, context, replying, binary in
                let reply: ReplyEnvelope<R.Response>
                do {
                    guard let request = body as? R else { throw ServiceError.internal }
                    reply = ReplyEnvelope(v: 1, id: header.id, body: try await handler(request, context), error: nil)
                } catch let error as ServiceError {
                    reply = ReplyEnvelope(v: 1, id: header.id, body: nil, error: error.passedOn)
                } catch {
                    logger.error("bus handler failed", ["bus.type": header.type, "error": String(describing: error)])
                    reply = ReplyEnvelope(v: 1, id: header.id, body: nil, error: .carrying(error))
                }
                return replying
                    ? BusRouter.encode(reply, id: header.id, frames: header.frames == true, binary: binary) : []
            })
    }

    /// An envelope decoded in one pass: the header, then the body as its route's type, or why not.
    private struct Incoming: Decodable {
        enum Keys: String, CodingKey { case v, id, type, requestId, traceparent, deadlineMs, frames, body }
        static let routesKey = CodingUserInfoKey(rawValue: "redeem.bus.routes")!

        let header: EnvelopeHeader
        let body: Result<any Sendable, DecodingError>?

        /// A binary envelope whose header and body read by hand (`BusBinaryEnvelope`), or nil to
        /// read it through `Codable`, which tells what is wrong with it.
        init?(binary data: Data, routes: [String: Route]) {
            guard let envelope = BusBinaryEnvelope(data), envelope.header.v == Envelope<Empty>.currentVersion,
                  let route = routes[envelope.header.type], let body = route.binaryBody(envelope)
            else { return nil }
            (header, self.body) = (envelope.header, .success(body))
        }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: Keys.self)
            header = EnvelopeHeader(v: try c.decode(Int.self, forKey: .v), id: try c.decode(String.self, forKey: .id),
                                    type: try c.decode(String.self, forKey: .type),
                                    requestId: try c.decodeIfPresent(String.self, forKey: .requestId),
                                    traceparent: try c.decodeIfPresent(
                                        String.self, forKey: .traceparent),
                                    deadlineMs: try c.decodeIfPresent(Int64.self, forKey: .deadlineMs),
                                    frames: try c.decodeIfPresent(Bool.self, forKey: .frames))
            guard header.v == Envelope<Empty>.currentVersion,
                  let route = (decoder.userInfo[Self.routesKey] as? [String: Route])?[header.type] else {
                body = nil
                return
            }
            do { body = .success(try route.decodeBody(c)) } catch let e as DecodingError { body = .failure(e) }
        }
    }

    /// Answers one raw request envelope with the frames of its reply (when `replying`; a pushed
    /// message is only handled, and its reply left unencoded). `sender` is the name the sender's
    /// CURVE key is listed under (nil on a plain bus): a message it may not send
    /// (`BusPermissions`) is answered `forbidden`, and logged, without being handled. `kept`, when
    /// given, is the same envelope as its sender keeps it (JSON, with `data` its binary form): the
    /// handler's `BusContext.message`.
    public func handle(_ data: Data, kept: Data? = nil, replying: Bool = true, sender: String? = nil) async -> [Data] {
        let incoming: Incoming
        let binary = BusBinary.isBinary(data)
        do {
            if binary, let read = Incoming(binary: data, routes: routes) {
                incoming = read
            } else {
                incoming = binary
                    ? try BusBinary.decode(Incoming.self, from: data, userInfo: binaryUserInfo.values)
                    : try decoder.decode(Incoming.self, from: data)
            }
        } catch {
            logger.warning("malformed bus frame", ["bytes": data.count])
            return BusRouter.refusal(.malformed("not a bus envelope"), id: "", binary: binary)
        }
        let header = incoming.header
        guard header.v == Envelope<Empty>.currentVersion else {
            logger.warning("unsupported bus message version", ["bus.type": header.type, "bus.version": header.v])
            return BusRouter.refusal(.unsupportedVersion(header.v), id: header.id, binary: binary)
        }
        if let sender, !BusPermissions.allows(sender, toSend: header.type) {
            if forbidden.shouldLog("\(sender) \(header.type)", now: .now) {
                logger.warning("forbidden bus message", ["bus.type": header.type, "bus.sender": sender, "error.code": ErrorCode.forbidden.rawValue])
            }
            return BusRouter.refusal(
                ServiceError(.forbidden, "\(sender) may not send \(header.type)"), id: header.id, binary: binary)
        }
        guard let route = routes[header.type], let decoded = incoming.body else {
            logger.warning("unknown bus message type", ["bus.type": header.type])
            return BusRouter.refusal(.unknownType(header.type), id: header.id, binary: binary)
        }
        let body: any Sendable
        switch decoded {
        case .success(let b): body = b
        case .failure(let error):
            logger.warning("malformed bus message", ["bus.type": header.type, "error": BusRouter.describe(error)])
            let why = "body of \(header.type) is malformed: \(BusRouter.describe(error))"
            return BusRouter.refusal(.malformed(why), id: header.id, binary: binary)
        }
        if replying, let refusal = refusing?(header.type) {
            return BusRouter.refusal(refusal, id: header.id, binary: binary)
        }
        let deadline = header.deadlineMs.map { Date(timeIntervalSince1970: Double($0) / 1000) }
        if let deadline, deadline < Date() {
            return BusRouter.refusal(.timeout, id: header.id, binary: binary)
        }
        let context = BusContext(
            type: header.type, requestId: header.requestId, deadline: deadline, message: kept ?? data)
        // The handler's span joins the sender's trace (a message without one starts a trace).
        let parent = header.traceparent.flatMap(TraceContext.init(traceparent:))
        return await LogContext.$requestId.withValue(header.requestId) {
            await Tracer.shared.span(header.type, kind: replying ? .server : .consumer, parent: parent) {
                await route.handle(body, header, context, replying, binary)
            }
        }
    }

    /// The reply to a request that is not handled: `error`, for the envelope's id.
    public func refuse(_ data: Data, with error: ServiceError) -> [Data] {
        struct Header: Decodable { let id: String }
        let binary = BusBinary.isBinary(data)
        let header = binary
            ? try? BusBinary.decode(Header.self, from: data) : try? decoder.decode(Header.self, from: data)
        return BusRouter.refusal(error, id: header?.id ?? "", binary: binary)
    }

    /// The frames of a reply: `WireJSON` values in frames of their own when the caller reads
    /// them (`frames`), else inline. Binary when the request was, else JSON (an earlier version's
    /// caller reads only that).
    static func encode<B>(_ reply: ReplyEnvelope<B>, id: String, frames: Bool = false, binary: Bool = false) -> [Data] {
        if binary, frames, let data = try? BusCoding.encodeFrames(reply) { return data }
        if binary, !frames, let data = try? BusBinary.encode(reply) { return [data] }
        if frames, let data = try? JSONEncoder.busFrames(reply) { return data }
        if !frames, let data = try? JSONEncoder.bus.encode(reply) { return [data] }
        // Encoding our own types cannot fail in practice; answer something well-formed anyway.
        return [(try? JSONEncoder.bus.encode(ReplyEnvelope<Empty>(v: 1, id: id, body: nil, error: .internal))) ?? Data()]
    }

    /// The reply to a request refused with `error`, in the request's format.
    static func refusal(_ error: ServiceError, id: String, binary: Bool) -> [Data] {
        encode(ReplyEnvelope<Empty>(v: 1, id: id, body: nil, error: error), id: id, binary: binary)
    }

    static func describe(_ error: DecodingError) -> String {
        switch error {
        case .keyNotFound(let key, let ctx): return "missing \((ctx.codingPath + [key]).map(\.stringValue).joined(separator: "."))"
        case .typeMismatch(_, let ctx), .valueNotFound(_, let ctx), .dataCorrupted(let ctx):
            let path = ctx.codingPath.map(\.stringValue).joined(separator: ".")
            return path.isEmpty ? ctx.debugDescription : "bad value at \(path)"
        @unknown default: return "undecodable"
        }
    }
}
