import Foundation

/// The answering side of request-reply (SPEC §3): a ROUTER socket bound on the service's
/// endpoint. Every request is handled in its own task, so many are in flight at once and a slow
/// handler never blocks the socket; replies go back through the socket's worker thread.
public final class BusServer: Sendable {
    private let worker: SocketWorker

    public init(context: ZMQContext, bind endpoints: [String], router: BusRouter, logger: Logger) throws {
        let replies = SocketOutbox()
        worker = try SocketWorker(
            name: "bus-server",
            context: context,
            kind: .router,
            outbox: replies,
            setup: { socket in
                for e in endpoints { try socket.bind(e) }
            },
            onMessage: { frames in
                // ROUTER frames from a DEALER: [identity, "", correlation id, envelope]; the reply
                // echoes the first three, then its envelope and any frames it carries. Anything
                // else is dropped.
                guard frames.count == 4, frames[1].isEmpty else {
                    logger.warning("dropped malformed bus frames", ["frames": frames.count])
                    return
                }
                let route = Array(frames[0..<3])
                let payload = frames[3]
                Task {
                    let reply = await router.handle(payload)
                    replies.enqueue(route + reply)
                }
            }
        )
    }

    /// The bound endpoint (with the real port when bound to `*`).
    public var endpoint: String { worker.endpoint }

    public func stop() { worker.stop() }
}

