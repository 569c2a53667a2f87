import Foundation

/// What a request handler knows about the message it is answering.
public struct BusContext: Sendable {
    public let type: String
    public let requestId: String?
    public let deadline: Date?
}

/// Maps request types to handlers and turns raw envelopes into raw replies. It never throws and
/// never traps on input: malformed frames, unknown types and versions, and handler errors all
/// become error replies (and a log line).
public struct BusRouter: Sendable {
    typealias Handler = @Sendable (Data, EnvelopeHeader, BusContext) async -> Data

    private var handlers: [String: Handler] = [:]
    private let logger: Logger

    public init(logger: Logger) { self.logger = logger }

    public var types: [String] { handlers.keys.sorted() }

    /// Registers the handler of one request type.
    public mutating func on<R: BusRequest>(_ type: R.Type, _ handler: @escaping @Sendable (R, BusContext) async throws -> R.Response) {
        let logger = self.logger
        handlers[R.type] = { data, header, context in
            let reply: ReplyEnvelope<R.Response>
            do {
                let request = try JSONDecoder.wire().decode(Envelope<R>.self, from: data)
                reply = ReplyEnvelope(v: 1, id: header.id, body: try await handler(request.body, context), error: nil)
            } catch let error as ServiceError {
                reply = ReplyEnvelope(v: 1, id: header.id, body: nil, error: error)
            } catch let error as DecodingError {
                logger.warning("malformed bus message", ["bus.type": header.type, "error": BusRouter.describe(error)])
                reply = ReplyEnvelope(v: 1, id: header.id, body: nil, error: .malformed("body of \(header.type) is malformed: \(BusRouter.describe(error))"))
            } catch {
                logger.error("bus handler failed", ["bus.type": header.type, "error": String(describing: error)])
                reply = ReplyEnvelope(v: 1, id: header.id, body: nil, error: .internal)
            }
            return BusRouter.encode(reply, id: header.id)
        }
    }

    /// Answers one raw request envelope with one raw reply envelope.
    public func handle(_ data: Data) async -> Data {
        guard let header = try? JSONDecoder.wire().decode(EnvelopeHeader.self, from: data) else {
            logger.warning("malformed bus frame", ["bytes": data.count])
            return BusRouter.encode(ReplyEnvelope<Empty>(v: 1, id: "", body: nil, error: .malformed("not a bus envelope")), id: "")
        }
        guard header.v == Envelope<Empty>.currentVersion else {
            logger.warning("unsupported bus message version", ["bus.type": header.type, "bus.version": header.v])
            return BusRouter.encode(ReplyEnvelope<Empty>(v: 1, id: header.id, body: nil, error: .unsupportedVersion(header.v)), id: header.id)
        }
        guard let handler = handlers[header.type] else {
            logger.warning("unknown bus message type", ["bus.type": header.type])
            return BusRouter.encode(ReplyEnvelope<Empty>(v: 1, id: header.id, body: nil, error: .unknownType(header.type)), id: header.id)
        }
        let deadline = header.deadlineMs.map { Date(timeIntervalSince1970: Double($0) / 1000) }
        if let deadline, deadline < Date() {
            return BusRouter.encode(ReplyEnvelope<Empty>(v: 1, id: header.id, body: nil, error: .timeout), id: header.id)
        }
        let context = BusContext(type: header.type, requestId: header.requestId, deadline: deadline)
        return await LogContext.$requestId.withValue(header.requestId) {
            await handler(data, header, context)
        }
    }

    static func encode<B>(_ reply: ReplyEnvelope<B>, id: String) -> Data {
        if let data = try? JSONEncoder.wire().encode(reply) { return data }
        // Encoding our own types cannot fail in practice; answer something well-formed anyway.
        return (try? JSONEncoder.wire().encode(ReplyEnvelope<Empty>(v: 1, id: id, body: nil, error: .internal))) ?? Data()
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
