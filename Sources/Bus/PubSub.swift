import Core
import Foundation
import Telemetry

/// Publishes events (SPEC §3) on a PUB socket: frames `[topic, JSON envelope]`. Events are hints:
/// a subscriber that is not connected misses them, and the database stays the truth.
public final class EventPublisher: Sendable {
    private let worker: SocketWorker

    public init(context: ZMQContext, bind endpoints: [String]) throws {
        worker = try SocketWorker(name: "bus-pub", context: context, kind: .pub,
                                  setup: { socket in for e in endpoints { try socket.bind(e) } },
                                  onMessage: { _ in })
    }

    public var endpoint: String { worker.endpoint }

    public func publish<E: BusEvent>(_ event: E) {
        let envelope = Envelope(id: UUID.random().lowercasedString, type: E.topic, body: event)
        guard let data = try? JSONEncoder.bus.encode(envelope) else { return }
        worker.enqueue([Data(E.topic.utf8), data])
    }

    public func stop() { worker.stop() }
}

/// Receives events from every configured publisher. Handlers run on the socket's thread, so they
/// must be quick (hand work to a task when it is not).
public final class EventSubscriber: Sendable {
    private let worker: SocketWorker

    /// `handlers` maps a topic to a function of the raw envelope; decode with `EventSubscriber.decode`.
    public init(context: ZMQContext, connect endpoints: [String], logger: Logger,
                handlers: [String: @Sendable (Data) -> Void]) throws {
        worker = try SocketWorker(
            name: "bus-sub", context: context, kind: .sub,
            setup: { socket in
                for topic in handlers.keys { try socket.subscribe(topic) }
                for e in endpoints { try socket.connect(e) }
            },
            onMessage: { frames in
                guard frames.count == 2, let topic = String(data: frames[0], encoding: .utf8), let handler = handlers[topic] else {
                    logger.warning("dropped unexpected event frames", ["frames": frames.count])
                    return
                }
                handler(frames[1])
            })
    }

    /// Decodes an event envelope's body; nil (and a log line) for a malformed one.
    public static func decode<E: BusEvent>(_ type: E.Type, _ data: Data, logger: Logger) -> Envelope<E>? {
        do { return try JSONDecoder.bus.decode(Envelope<E>.self, from: data) } catch {
            logger.warning("malformed event", ["event.topic": E.topic])
            return nil
        }
    }

    public func stop() { worker.stop() }
}

/// The sending end of a PUSH/PULL pipeline (grant commands, SPEC §3). `push` is fire-and-forget:
/// delivery is made reliable by the sender re-sending until the receiver acknowledges.
public final class Pusher: Sendable {
    private let worker: SocketWorker

    public init(context: ZMQContext, connect endpoints: [String], logger: Logger) throws {
        worker = try SocketWorker(name: "bus-push", context: context, kind: .push,
                                  setup: { socket in
                                      try socket.setImmediate()
                                      for e in endpoints { try socket.connect(e) }
                                  },
                                  onSendFailure: { _, error in
                                      logger.debug("push not sent; will be re-sent", ["errno": Int(error.errno)])
                                  },
                                  onMessage: { _ in })
    }

    public func push<B: BusRequest>(_ body: B) {
        let envelope = Envelope(id: UUID.random().lowercasedString, type: B.type, body: body)
        guard let data = try? JSONEncoder.bus.encode(envelope) else { return }
        worker.enqueue([data])
    }

    /// Pushes an envelope that is already encoded (e.g. stored in an outbox).
    public func pushRaw(_ envelope: Data) { worker.enqueue([envelope]) }

    public func stop() { worker.stop() }
}

/// The receiving end of a PUSH/PULL pipeline: the router's handler runs for each message, and its
/// reply is discarded (acknowledgements travel as separate requests).
public final class Puller: Sendable {
    private let worker: SocketWorker

    public init(context: ZMQContext, bind endpoints: [String], router: BusRouter) throws {
        worker = try SocketWorker(name: "bus-pull", context: context, kind: .pull,
                                  setup: { socket in for e in endpoints { try socket.bind(e) } },
                                  onMessage: { frames in
                                      guard let payload = frames.last else { return }
                                      Task { _ = await router.handle(payload, replying: false) }
                                  })
    }

    public var endpoint: String { worker.endpoint }

    public func stop() { worker.stop() }
}
