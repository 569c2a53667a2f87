internal import CZeroMQ
import Core
import Foundation
import Glibc
import Synchronization

/// A ZeroMQ failure, keeping the errno.
public struct ZMQError: Error, CustomStringConvertible, Sendable {
    public let errno: Int32
    public let operation: String
    public var description: String { "zmq \(operation): \(String(cString: zmq_strerror(errno))) (errno \(errno))" }

    static func last(_ op: String) -> ZMQError { ZMQError(errno: zmq_errno(), operation: op) }
    var isAgain: Bool { errno == EAGAIN }
    var isTerminated: Bool { errno == ETERM }
}

/// The ZeroMQ context (a process's is its `BusNode`'s). libzmq documents the context as
/// thread-safe, hence `@unchecked Sendable`; sockets made from it are not, and live on one thread
/// each (`SocketWorker`).
final class ZMQContext: @unchecked Sendable {
    let raw: UnsafeMutableRawPointer

    init() {
        raw = zmq_ctx_new()!
    }

    deinit { zmq_ctx_term(raw) }
}

/// Socket kinds used by the bus.
enum ZMQSocketKind: Sendable {
    case dealer, router, push, pull, pub, sub
    var raw: Int32 {
        switch self {
        case .dealer: ZMQ_DEALER
        case .router: ZMQ_ROUTER
        case .push: ZMQ_PUSH
        case .pull: ZMQ_PULL
        case .pub: ZMQ_PUB
        case .sub: ZMQ_SUB
        }
    }
}

/// One ZeroMQ socket. Not thread-safe: created, used and closed on one thread (its `SocketWorker`).
final class ZMQSocket {
    let raw: UnsafeMutableRawPointer
    private let context: ZMQContext  // the socket keeps its context alive

    init(context: ZMQContext, kind: ZMQSocketKind) throws {
        guard let s = zmq_socket(context.raw, kind.raw) else { throw ZMQError.last("socket") }
        raw = s
        self.context = context
        try setInt(ZMQ_LINGER, 0)
        try setInt(ZMQ_SNDHWM, 100_000)
        try setInt(ZMQ_RCVHWM, 100_000)
    }

    deinit { zmq_close(raw) }

    func setInt(_ option: Int32, _ value: Int32) throws {
        var v = value
        guard zmq_setsockopt(raw, option, &v, MemoryLayout<Int32>.size) == 0 else { throw ZMQError.last("setsockopt \(option)") }
    }

    func setInt64(_ option: Int32, _ value: Int64) throws {
        var v = value
        guard zmq_setsockopt(raw, option, &v, MemoryLayout<Int64>.size) == 0 else { throw ZMQError.last("setsockopt \(option)") }
    }

    func setBytes(_ option: Int32, _ value: [UInt8]) throws {
        let rc = value.withUnsafeBytes { zmq_setsockopt(raw, option, $0.baseAddress, $0.count) }
        guard rc == 0 else { throw ZMQError.last("setsockopt \(option)") }
    }

    /// A peer that sends a larger message is disconnected (and may connect again).
    func setMaxMessageSize(_ bytes: Int) throws { try setInt64(ZMQ_MAXMSGSIZE, Int64(bytes)) }

    /// IPv6 as well as IPv4: a name may resolve to AAAA records, and a pod may have only IPv6.
    func allowIPv6() throws { try setInt(ZMQ_IPV6, 1) }

    /// CURVE server with this secret key (Z85): binds made afterwards ask every client to prove
    /// its key, and the context's ZAP handler decides which keys are admitted. With a ZAP domain
    /// and `ZMQ_ZAP_ENFORCE_DOMAIN`, a handshake that finds no ZAP handler fails instead of
    /// admitting any key (libzmq's default): a server outliving its handler admits nobody.
    func makeCurveServer(secretKey: String) throws {
        try setInt(ZMQ_CURVE_SERVER, 1)
        try setBytes(ZMQ_CURVE_SECRETKEY, Array(secretKey.utf8))
        try setBytes(ZMQ_ZAP_DOMAIN, Array(ZMQSocket.zapDomain.utf8))
        do { try setInt(ZMQSocket.zapEnforceDomain, 1) } catch let error as ZMQError where error.errno == EINVAL {
            // A libzmq built without its draft options: the ZAP handler still decides every
            // handshake while it runs, and BusNode stops it only after the last server closed.
        }
    }

    /// The ZAP domain of the bus's CURVE servers (the handler admits by key, whatever the domain).
    static let zapDomain = "redeem"
    /// `ZMQ_ZAP_ENFORCE_DOMAIN`, a draft option libzmq 4.3 has (zmq.h declares it only under
    /// `ZMQ_BUILD_DRAFT_API`).
    static let zapEnforceDomain: Int32 = 93

    /// CURVE client with its own key pair and the server's public key (Z85): connections made
    /// afterwards handshake only with a server holding that key's secret.
    func makeCurveClient(publicKey: String, secretKey: String, serverKey: String) throws {
        try setBytes(ZMQ_CURVE_SERVERKEY, Array(serverKey.utf8))
        try setBytes(ZMQ_CURVE_PUBLICKEY, Array(publicKey.utf8))
        try setBytes(ZMQ_CURVE_SECRETKEY, Array(secretKey.utf8))
    }

    /// Queue messages only to completed connections (DEALER/PUSH): with no peer, sending fails at once.
    func setImmediate() throws { try setInt(ZMQ_IMMEDIATE, 1) }

    /// SUB: receive messages whose first frame starts with `prefix` ("" for all).
    func subscribe(_ prefix: String) throws { try setBytes(ZMQ_SUBSCRIBE, Array(prefix.utf8)) }

    func bind(_ endpoint: String) throws {
        guard zmq_bind(raw, endpoint) == 0 else { throw ZMQError.last("bind \(endpoint)") }
    }

    func connect(_ endpoint: String) throws {
        guard zmq_connect(raw, endpoint) == 0 else { throw ZMQError.last("connect \(endpoint)") }
    }

    /// Drops the connection made by `connect(endpoint)`, with whatever is queued on it.
    func disconnect(_ endpoint: String) throws {
        guard zmq_disconnect(raw, endpoint) == 0 else { throw ZMQError.last("disconnect \(endpoint)") }
    }

    /// The endpoint actually bound (resolves `tcp://127.0.0.1:*` to a real port).
    func lastEndpoint() -> String {
        var buf = [CChar](repeating: 0, count: 256)
        var len = buf.count
        zmq_getsockopt(raw, ZMQ_LAST_ENDPOINT, &buf, &len)
        return buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// Sends a multipart message without blocking. Throws `EAGAIN` when it cannot be queued now.
    func send(_ frames: [Data]) throws {
        for (i, frame) in frames.enumerated() {
            let flags = ZMQ_DONTWAIT | (i < frames.count - 1 ? ZMQ_SNDMORE : 0)
            let rc = frame.withUnsafeBytes { zmq_send(raw, $0.baseAddress, $0.count, flags) }
            guard rc >= 0 else { throw ZMQError.last("send") }
        }
    }

    /// Receives one multipart message without blocking (nil when none is waiting), with the user id the ZAP handler gave its
    /// connection (under CURVE, the name the sender's key is listed under; nil without one).
    func receiveWithSender() throws -> (frames: [Data], sender: String?)? {
        var frames: [Data] = []
        var sender: String?
        let msg = UnsafeMutablePointer<zmq_msg_t>.allocate(capacity: 1)
        defer { msg.deallocate() }
        while true {
            zmq_msg_init(msg)
            let rc = zmq_msg_recv(msg, raw, frames.isEmpty ? ZMQ_DONTWAIT : 0)
            if rc < 0 {
                let err = ZMQError.last("recv")
                zmq_msg_close(msg)
                if err.isAgain && frames.isEmpty { return nil }
                throw err
            }
            // A ROUTER's first frame (the routing id) is made locally and has no properties;
            // the frames that came over the wire carry the connection's.
            if sender == nil, let user = zmq_msg_gets(msg, "User-Id") {
                let name = String(cString: user)
                sender = name.isEmpty ? nil : name
            }
            frames.append(Data(bytes: zmq_msg_data(msg), count: zmq_msg_size(msg)))
            let more = zmq_msg_more(msg) == 1
            zmq_msg_close(msg)
            if !more { return (frames, sender) }
        }
    }
}

/// A kernel eventfd that wakes a poll loop from another thread.
final class Wakeup: Sendable {
    let fd: Int32

    init() {
        fd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        precondition(fd >= 0, "eventfd failed")
    }

    deinit { close(fd) }

    func signal() {
        var one: UInt64 = 1
        _ = write(fd, &one, 8)
    }

    func drain() {
        var value: UInt64 = 0
        _ = read(fd, &value, 8)
    }
}

/// Messages waiting to be sent by a `SocketWorker`, with the eventfd that wakes it. Created before
/// the worker so that closures given to the worker can already send through it.
final class SocketOutbox: Sendable {
    private let queue = Mutex<[[Data]]>([])
    let wakeup = Wakeup()

    init() {}

    func enqueue(_ frames: [Data]) {
        queue.withLock { $0.append(frames) }
        wakeup.signal()
    }

    func takeAll() -> [[Data]] {
        queue.withLock { q in defer { q.removeAll(keepingCapacity: true) }; return q }
    }
}

/// The sockets a `SocketWorker` drives: made on its thread and used only there.
protocol SocketSet: AnyObject {
    /// The sockets polled for messages; read again after an `upkeep` that answers true.
    var sockets: [ZMQSocket] { get }
    /// Hands a message to a socket without blocking. Throws `EAGAIN` when none can take it now.
    func send(_ frames: [Data]) throws
    /// Regular upkeep (connecting to addresses that appeared, leaving those that went). Answers
    /// whether `sockets` changed.
    func upkeep(now: ContinuousClock.Instant) -> Bool
}

/// One socket: bound, or connected to every address its endpoints name (`PeerAddresses`).
final class SingleSocket: SocketSet {
    let socket: ZMQSocket
    private let peers: PeerAddresses?

    /// Connects at once to the endpoints that name no host: an error there is a start-up error.
    init(_ socket: ZMQSocket, peers: PeerAddresses? = nil) throws {
        self.socket = socket
        self.peers = peers
        if let first = peers?.changes() {
            for endpoint in first.added { try socket.connect(endpoint) }
        }
    }

    var sockets: [ZMQSocket] { [socket] }

    func send(_ frames: [Data]) throws { try socket.send(frames) }

    func upkeep(now: ContinuousClock.Instant) -> Bool {
        guard let peers, let change = peers.changes() else { return false }
        // Messages queued for a peer that went are dropped with its connection: PUSH senders
        // re-send until acknowledged, and events are hints.
        for endpoint in change.removed { peers.report("disconnect", endpoint) { try socket.disconnect(endpoint) } }
        for endpoint in change.added { peers.report("connect", endpoint) { try socket.connect(endpoint) } }
        return false
    }
}

/// Owns sockets on their own thread. Other threads hand it frames to send (`enqueue`); it calls
/// `onMessage` on its thread for every message received (with its sender's key name, under CURVE) and `onTick` at least every `tickInterval`.
/// This is the only place a bus socket is touched, which is what makes the socket safe to use.
final class SocketWorker: Sendable {
    typealias Open = @Sendable () throws -> any SocketSet

    private let outbox: SocketOutbox
    private let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    private let ready = DispatchSemaphore(value: 0)
    private let startError = Mutex<(any Error)?>(nil)
    private let boundEndpoint = Mutex<String>("")
    let name: String

    /// Starts the thread, opens the sockets there (`open`), and waits until they are ready.
    init(
        name: String,
        outbox: SocketOutbox = SocketOutbox(),
        tickInterval: Duration = .milliseconds(100),
        onSendFailure: @escaping @Sendable ([Data], ZMQError) -> Void = { _, _ in },
        onTick: @escaping @Sendable () -> Void = {},
        onMessage: @escaping @Sendable (_ frames: [Data], _ sender: String?) -> Void,
        open: @escaping Open
    ) throws {
        self.name = name
        self.outbox = outbox
        let thread = Thread { [self] in
            run(open: open, tickInterval: tickInterval, onSendFailure: onSendFailure, onTick: onTick, onMessage: onMessage)
        }
        thread.name = name
        thread.start()
        ready.wait()
        if let error = startError.withLock({ $0 }) {
            finished.wait()
            throw error
        }
    }

    /// The endpoint the first socket bound last (useful with port 0 / `*`).
    var endpoint: String { boundEndpoint.withLock { $0 } }

    /// Queues a message for sending from the worker's thread.
    func enqueue(_ frames: [Data]) { outbox.enqueue(frames) }

    /// Stops the loop, closes the sockets and waits for the thread to end.
    func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        outbox.wakeup.signal()
        finished.wait()
    }

    private func run(open: Open, tickInterval: Duration,
                     onSendFailure: ([Data], ZMQError) -> Void, onTick: () -> Void, onMessage: ([Data], String?) -> Void) {
        defer { finished.signal() }
        let set: any SocketSet
        do {
            set = try open()
            boundEndpoint.withLock { $0 = set.sockets.first?.lastEndpoint() ?? "" }
        } catch {
            startError.withLock { $0 = error }
            ready.signal()
            return
        }
        ready.signal()
        let timeoutMs = Int(tickInterval.components.seconds * 1000 + tickInterval.components.attoseconds / 1_000_000_000_000_000)
        // The sockets, then the eventfd that wakes the loop; rebuilt when the sockets change.
        var sockets = set.sockets
        func pollItems() -> [zmq_pollitem_t] {
            sockets.map { zmq_pollitem_t(socket: $0.raw, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0) }
                + [zmq_pollitem_t(socket: nil, fd: outbox.wakeup.fd, events: Int16(ZMQ_POLLIN), revents: 0)]
        }
        var items = pollItems()
        var lastTick = ContinuousClock.now
        while !stopping.load(ordering: .acquiring) {
            let rc = zmq_poll(&items, Int32(items.count), timeoutMs)
            if rc < 0 {
                let err = ZMQError.last("poll")
                if err.isTerminated { break }
                continue
            }
            if items[sockets.count].revents != 0 { outbox.wakeup.drain() }
            let pending = outbox.takeAll()
            for frames in pending {
                do { try set.send(frames) } catch let e as ZMQError {
                    if e.isTerminated { return }
                    onSendFailure(frames, e)
                } catch {}
            }
            for (i, socket) in sockets.enumerated() where items[i].revents != 0 {
                // Drain everything waiting; zmq_poll reports readiness, not a count.
                while let (frames, sender) = try? socket.receiveWithSender() { onMessage(frames, sender) }
            }
            let now = ContinuousClock.now
            if now - lastTick >= tickInterval {
                lastTick = now
                if set.upkeep(now: now) {
                    sockets = set.sockets
                    items = pollItems()
                }
                onTick()
            }
        }
        // Tell senders whose messages never left.
        let left = outbox.takeAll()
        for frames in left { onSendFailure(frames, ZMQError(errno: ETERM, operation: "send")) }
    }
}
