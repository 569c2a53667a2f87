import Core
import Foundation
import Telemetry

/// Publishes events on a PUB socket: frames `[topic, JSON envelope]`. Events are hints:
/// a subscriber that is not connected misses them, and the database stays the truth.
///
/// Events stay JSON while request-reply is binary (`BusBinary`): nothing answers a published event,
/// so a publisher cannot learn that a subscriber of an earlier version (which reads only JSON)
/// would drop a binary one, and a dropped `session.revoked` leaves a revoked token accepted.
/// Subscribers read both formats, so a later version can publish binary once every reader does.
public final class EventPublisher: Sendable {
    private let worker: SocketWorker

    public init(bus: BusNode, bind endpoints: [String]) throws {
        worker = try SocketWorker(name: "bus-pub", onMessage: { _, _ in }, open: { try SingleSocket(bus.bound(.pub, endpoints)) })
    }

    public var endpoint: String { worker.endpoint }

    public func publish<E: BusEvent>(_ event: E) {
        let envelope = Envelope(id: UUID.random().lowercasedString, type: E.topic, body: event)
        guard let data = try? JSONEncoder.bus.encode(envelope) else { return }
        worker.enqueue([Data(E.topic.utf8), data])
    }

    public func stop() { worker.stop() }
}

/// Receives events from every instance of a publishing service (every address its endpoints
/// name). Handlers run on the socket's thread, so they must be quick (hand work to a task when it
/// is not).
public final class EventSubscriber: Sendable {
    private let worker: SocketWorker

    /// `handlers` maps a topic to a function of the raw envelope; decode with `EventSubscriber.decode`.
    public init(bus: BusNode, service: String, connect endpoints: [String], logger: Logger,
                handlers: [String: @Sendable (Data) -> Void]) throws {
        worker = try SocketWorker(
            name: "bus-sub",
            onMessage: { frames, _ in
                guard frames.count == 2, let topic = String(data: frames[0], encoding: .utf8), let handler = handlers[topic] else {
                    logger.warning("dropped unexpected event frames", ["frames": frames.count])
                    return
                }
                handler(frames[1])
            },
            open: {
                let socket = try bus.connecting(.sub, to: service)
                for topic in handlers.keys { try socket.subscribe(topic) }
                return try SingleSocket(socket, peers: bus.peers(endpoints))
            })
    }

    /// Decodes an event envelope's body, binary or JSON; nil (and a log line) for a malformed one.
    public static func decode<E: BusEvent>(_ type: E.Type, _ data: Data, logger: Logger) -> Envelope<E>? {
        do { return try BusCoding.decode(Envelope<E>.self, from: data) } catch {
            logger.warning("malformed event", ["event.topic": E.topic])
            return nil
        }
    }

    public func stop() { worker.stop() }
}

/// The sending end of a PUSH/PULL pipeline (grant commands), load-balanced across every
/// instance of the pulling service (every address its endpoints name). `push` is fire-and-forget:
/// delivery is made reliable by the sender re-sending until the receiver acknowledges, which also
/// covers messages queued for an instance that went away. Pushed envelopes stay JSON, as events do
/// (nothing answers them); the receiving `Puller` reads both formats. An envelope kept as JSON (an
/// outbox row) may travel with its binary form in a frame before it (`pushRaw(_:binary:)`): the
/// receiver decodes that, a fraction of decoding the JSON, and keeps the JSON as it came.
public final class Pusher: Sendable {
    private let worker: SocketWorker

    public init(bus: BusNode, service: String, connect endpoints: [String], logger: Logger) throws {
        worker = try SocketWorker(name: "bus-push",
                                  onSendFailure: { _, error in
                                      logger.debug("push not sent; will be re-sent", ["errno": Int(error.errno)])
                                  },
                                  onMessage: { _, _ in },
                                  open: {
                                      let socket = try bus.connecting(.push, to: service)
                                      try socket.setImmediate()
                                      return try SingleSocket(socket, peers: bus.peers(endpoints))
                                  })
    }

    public func push<B: BusRequest>(_ body: B) {
        let envelope = Envelope(id: UUID.random().lowercasedString, type: B.type, body: body)
        guard let data = try? JSONEncoder.bus.encode(envelope) else { return }
        worker.enqueue([data])
    }

    /// Pushes an envelope that is already encoded (e.g. stored in an outbox), with the same
    /// envelope in binary (`BusBinary`) in the frame before it when given. A receiver of a release
    /// before that frame reads the last frame only.
    public func pushRaw(_ envelope: Data, binary: Data? = nil) {
        worker.enqueue(binary.map { [$0, envelope] } ?? [envelope])
    }

    public func stop() { worker.stop() }
}

/// The receiving end of a PUSH/PULL pipeline: the router's handler runs for each message, and its
/// reply is discarded (acknowledgements travel as separate requests).
public final class Puller: Sendable {
    private let worker: SocketWorker

    public init(bus: BusNode, bind endpoints: [String], router: BusRouter) throws {
        worker = try SocketWorker(
            name: "bus-pull",
            onMessage: { frames, sender in Puller.handle(frames, from: sender, with: router) },
            open: { try SingleSocket(bus.bound(.pull, endpoints)) })
    }

    /// A message is the envelope, or its binary form and then the envelope as its sender keeps it
    /// (`Pusher.pushRaw(_:binary:)`).
    static func handle(_ frames: [Data], from sender: String?, with router: BusRouter) {
        guard let kept = frames.last else { return }
        guard frames.count == 2, BusBinary.isBinary(frames[0]) else {
            Task { _ = await router.handle(kept, replying: false, sender: sender) }
            return
        }
        Task { _ = await router.handle(frames[0], kept: kept, replying: false, sender: sender) }
    }

    public var endpoint: String { worker.endpoint }

    public func stop() { worker.stop() }
}
