import Core
import Foundation
import Synchronization
import Telemetry

/// The answering side of request-reply: a ROUTER socket bound on the service's
/// endpoint. Every request is handled in a task of its own while it runs (one kept from an
/// earlier request, `HandlerTasks`), so many are in flight at once and a slow handler never
/// blocks the socket; replies go back through the socket's worker thread.
public final class BusServer: Sendable {
    private let worker: SocketWorker
    private let admission: Admission
    private let handlers: HandlerTasks
    /// The most tasks kept waiting for a request: about the requests a busy service has in flight.
    static let idleHandlerLimit = 64

    /// Requests being handled, and whether new ones are still taken.
    private final class Admission: Sendable {
        let state = Mutex<(handling: Int, closed: Bool)>((0, false))

        /// Counts a request in, unless the server is stopping.
        func admit() -> Bool {
            state.withLock { s in
                guard !s.closed else { return false }
                s.handling += 1
                return true
            }
        }

        func done() { state.withLock { $0.handling -= 1 } }
        var handling: Int { state.withLock { $0.handling } }
    }

    public init(bus: BusNode, bind endpoints: [String], router: BusRouter, logger: Logger) throws {
        let replies = SocketOutbox()
        let admission = Admission()
        self.admission = admission
        let handlers = HandlerTasks(limit: Self.idleHandlerLimit)
        self.handlers = handlers
        worker = try SocketWorker(
            name: "bus-server",
            outbox: replies,
            onMessage: { frames, sender in
                // ROUTER frames from a DEALER: [identity, "", correlation id, envelope]; the reply
                // echoes the first three, then its envelope and any frames it carries. Anything
                // else is dropped.
                guard frames.count == 4, frames[1].isEmpty else {
                    logger.warning("dropped malformed bus frames", ["frames": frames.count])
                    return
                }
                let route = Array(frames[0..<3])
                let payload = frames[3]
                guard admission.admit() else {
                    // Stopping: answered at once, so the caller need not wait for its timeout.
                    replies.enqueue(route + router.refuse(payload, with: .stopping))
                    return
                }
                handlers.run {
                    let reply = await router.handle(payload, sender: sender)
                    replies.enqueue(route + reply)
                    admission.done()
                }
            },
            open: { try SingleSocket(bus.bound(.router, endpoints)) }
        )
    }

    /// The bound endpoint (with the real port when bound to `*`).
    public var endpoint: String { worker.endpoint }

    /// Closes the socket at once; requests being handled get no answer (their callers time out).
    public func stop() {
        worker.stop()
        handlers.close()
    }

    deinit { handlers.close() }

    /// An orderly stop: new requests are answered `unavailable`, those being handled are answered
    /// (for up to `seconds`), then the socket closes. Answers whether every one was answered.
    @discardableResult
    public func drain(seconds: Double) async -> Bool {
        admission.state.withLock { $0.closed = true }
        let answered = await waitUntil(.now + .milliseconds(Int(seconds * 1000)), every: .milliseconds(10)) { admission.handling == 0 }
        // The last replies were handed to the socket's thread; give it and ZeroMQ's I/O thread a
        // moment to put them on the wire (the socket closes without lingering).
        try? await Task.sleep(for: .milliseconds(50))
        stop()
        return answered
    }
}
