internal import CMicroHTTPD
import Core
import Foundation
import Synchronization
import Telemetry

/// An HTTP/1.1 server on GNU libmicrohttpd (which does all HTTP parsing).
///
/// Handlers are `async`: when a request's body is complete the connection is *suspended*, the
/// handler runs as a task, and the connection is resumed with the response. No thread is held
/// while a handler waits (a bus reply, a long poll), so a few threads serve many slow requests.
/// Each thread is an `HTTPLoop`: it runs a daemon of its own on the one listening socket, and
/// the handlers of its requests run on it, so a request crosses no thread unless it waits.
public final class HTTPServer: Sendable {
    public typealias Handler = @Sendable (HTTPRequest) async -> HTTPResponse

    public struct Options: Sendable {
        public var host = "127.0.0.1"
        public var port = 8080
        public var threads = 2
        public var maxBodyBytes = 1 << 20
        public var connectionLimit = 2000
        public var connectionTimeoutSeconds = 30
        /// Each connection's memory for its request line, headers and read buffer (bodies are
        /// copied out as they arrive). libmicrohttpd zeroes it between requests, so its default
        /// 32 kB cost 3 % of the gateway's CPU. 16 kB holds about 12 kB of headers; beyond that
        /// libmicrohttpd answers 431.
        public var connectionMemoryBytes = 16 * 1024
        /// At most this many connections at once from one client address (0: no limit); trusted
        /// proxies are not limited (`ConnectionGuard`).
        public var connectionsPerAddress = 0
        /// A connection that has not sent a request's headers this many seconds after it opened
        /// or was last answered is shut (0: only libmicrohttpd's idle timeout).
        public var headerTimeoutSeconds = 0.0
        /// A connection that has not sent a whole request, headers and body, this many seconds
        /// after it opened or was last answered is shut (0: no such deadline).
        public var requestTimeoutSeconds = 0.0
        /// Proxies whose `trustedProxyHeader` names the client (`ClientAddress`).
        public var trustedProxies: [IPNetwork] = []
        /// The one header (lowercased) a trusted proxy names the client in.
        public var trustedProxyHeader = ClientAddress.defaultHeader
        public init() {}
    }

    let handler: Handler
    let logger: Logger
    let metrics: MetricsRegistry?
    let options: Options
    /// Whether to write one access-log line per request.
    let accessLog: Bool
    /// The loops while the server runs, and the socket they share.
    private let running = Mutex<(loops: [HTTPLoop], socket: Int32)?>(nil)
    /// Guard resuming connections against stopping the daemon, with no lock every request takes
    /// (a lock held across `MHD_resume_connection`, which writes to the daemon's wake-up
    /// descriptor, was contended on every answer): a resume counts itself in `resuming`, then
    /// checks `stopped`; `stop` sets `stopped`, then waits for `resuming` to reach 0. Both are
    /// sequentially consistent, so either the resume sees `stopped` or `stop` sees the resume.
    let stopped = Atomic<Bool>(false)
    let resuming = Atomic<Int>(0)
    /// Connections suspended while their handler runs, until they are answered; once `closed`
    /// (stopping), no connection is suspended any more.
    let suspended = Mutex<(connections: [ConnectionHandle: RequestState], closed: Bool)>(([:], false))
    let inFlight = Atomic<Int>(0)
    private let boundPort = Atomic<Int>(0)
    let connections: ConnectionGuard
    private let sweeper = Mutex<Task<Void, Never>?>(nil)

    public init(options: Options, logger: Logger, metrics: MetricsRegistry? = nil, accessLog: Bool = true, handler: @escaping Handler) {
        self.options = options
        self.logger = logger
        self.metrics = metrics
        self.accessLog = accessLog
        self.handler = handler
        self.connections = ConnectionGuard(.init(perAddress: options.connectionsPerAddress,
                                                 headerTimeout: options.headerTimeoutSeconds > 0 ? .milliseconds(Int(options.headerTimeoutSeconds * 1000)) : nil,
                                                 requestTimeout: options.requestTimeoutSeconds > 0 ? .milliseconds(Int(options.requestTimeoutSeconds * 1000)) : nil,
                                                 trusted: options.trustedProxies))
    }

    /// The loops while the server runs.
    var loops: [HTTPLoop] { running.withLock { $0?.loops ?? [] } }

    /// The port actually listened on (useful with port 0).
    public var port: Int { boundPort.load(ordering: .relaxed) }

    /// The server could not listen: a start failure (exit 1), not a setting that could not be read.
    public struct StartFailure: Error, CustomStringConvertible {
        public let description: String
    }

    public func start() throws {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(options.port).bigEndian)
        guard inet_pton(AF_INET, options.host, &addr.sin_addr) == 1 else {
            throw StartFailure(description: "\(options.host) is not an IPv4 address")
        }
        let socket = try Self.listen(on: addr, host: options.host)
        var bound = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        // Each loop's daemon runs on its loop's thread (no thread of libmicrohttpd's); the
        // connection limit is shared out among them, as libmicrohttpd's own pool shares it.
        let flags = MHD_USE_EPOLL.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue
        let cls = Unmanaged.passUnretained(self).toOpaque()
        let count = max(1, options.threads)
        var loops: [HTTPLoop] = []
        for i in 0..<count {
            let limit = options.connectionLimit / count + (i < options.connectionLimit % count ? 1 : 0)
            let daemon = cmicrohttpd_start_on(
                flags, socket, UInt32(max(1, limit)), UInt32(options.connectionTimeoutSeconds),
                options.connectionMemoryBytes, httpAccessHandler, cls, httpRequestCompleted, cls,
                connections.active ? httpAcceptPolicy : nil, cls, connections.active ? httpConnectionNotice : nil, cls)
            guard let daemon else {
                Self.end(loops, socket: socket)
                throw StartFailure(description: "cannot serve on \(options.host):\(options.port)")
            }
            do {
                loops.append(try HTTPLoop(daemon: daemon))
            } catch {
                _ = MHD_quiesce_daemon(daemon)  // or stopping it would close the socket the others share
                MHD_stop_daemon(daemon)
                Self.end(loops, socket: socket)
                throw StartFailure(description: "cannot serve on \(options.host):\(options.port): no descriptors")
            }
        }
        for (i, loop) in loops.enumerated() { loop.start(name: "http-\(i)") }
        running.withLock { $0 = (loops, socket) }
        boundPort.store(Int(UInt16(bigEndian: bound.sin_port)), ordering: .relaxed)
        if connections.timed {
            sweeper.withLock { [connections, metrics] in
                $0 = Task {
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .seconds(1))
                        let shut = connections.sweep()
                        if shut > 0 {
                            metrics?.increment("redeem_http_header_timeouts_total", help: "Connections shut for not sending a request's headers or body in time.",
                                               by: Double(shut))
                        }
                    }
                }
            }
        }
    }

    /// The listening socket the loops share (as libmicrohttpd would make it: `SO_REUSEADDR`, non-blocking).
    private static func listen(on address: sockaddr_in, host: String) throws -> Int32 {
        let port = Int(UInt16(bigEndian: address.sin_port))
        let kind = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        let fd = Glibc.socket(AF_INET, kind, 0)
        guard fd >= 0 else { throw StartFailure(description: "cannot listen on \(host):\(port): no socket") }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = address
        let bound = withUnsafePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, Glibc.listen(fd, SOMAXCONN) == 0 else {
            Glibc.close(fd)
            throw StartFailure(description: "cannot listen on \(host):\(port) (in use?)")
        }
        return fd
    }

    /// Stops accepting connections, lets requests in progress finish for up to `drainSeconds`,
    /// then stops the daemons and their loops.
    public func stop(drainSeconds: Double = 3) async {
        guard let (loops, socket) = running.withLock({ $0 }) else { return }
        sweeper.withLock { $0?.cancel() }
        for loop in loops {
            let daemon = DaemonHandle(raw: loop.daemon)
            await loop.perform { _ = MHD_quiesce_daemon(daemon.raw) }
        }
        _ = await waitUntil(.now + .milliseconds(Int(drainSeconds * 1000)), every: .milliseconds(20)) { inFlight.load(ordering: .acquiring) == 0 }
        // libmicrohttpd aborts the process if it is stopped with a connection suspended: requests
        // whose handler is still running are answered 503 and given a moment to be sent, and from
        // now on a request on a connection kept open is answered 503 without being suspended.
        let waiting = suspended.withLock { s in
            s.closed = true
            return s.connections
        }
        for (connection, state) in waiting where state.answer(finish(state, .error(.stopping))) {
            resume(connection)
        }
        // Stopping the daemon closes every connection, sent or not: wait until each request has
        // completed (libmicrohttpd reports that once the whole response is written). A connection
        // leaves `suspended` when its answer is queued, before a byte of it is sent, so waiting for
        // that alone cut answers off ("Empty reply from server").
        _ = await waitUntil(.now + .seconds(10), every: .milliseconds(10)) { inFlight.load(ordering: .acquiring) == 0 }
        stopped.store(true, ordering: .sequentiallyConsistent)
        _ = await waitUntil(.now + .seconds(10), every: .milliseconds(1)) {
            resuming.load(ordering: .sequentiallyConsistent) == 0
        }
        running.withLock { $0 = nil }
        Self.end(loops, socket: socket)
    }

    /// Ends the loops' threads, then stops their daemons (on this thread: no loop runs them any
    /// more) and closes the socket they shared, which quiescing handed back.
    private static func end(_ loops: [HTTPLoop], socket: Int32) {
        for loop in loops { loop.close() }
        for loop in loops {
            _ = MHD_quiesce_daemon(loop.daemon)
            MHD_stop_daemon(loop.daemon)
        }
        Glibc.close(socket)
    }

    deinit {
        if let (loops, socket) = running.withLock({ $0 }) { Self.end(loops, socket: socket) }
    }

    /// Resumes a suspended connection unless the daemon is stopping (then it is gone).
    func resume(_ connection: ConnectionHandle) {
        resuming.wrappingAdd(1, ordering: .sequentiallyConsistent)
        if !stopped.load(ordering: .sequentiallyConsistent) {
            MHD_resume_connection(connection.raw)
            // Off the loops (stop's 503s, a job that outlived its loop): wake them, as the
            // daemon's own wake-up may be spent inside `MHD_run` (`HTTPLoop.nudge`).
            if HTTPLoop.current == nil, let loops = running.withLock({ $0?.loops }) {
                for loop in loops { loop.nudge() }
            }
        }
        resuming.wrappingSubtract(1, ordering: .sequentiallyConsistent)
    }
}

/// A daemon pointer, carried to its loop's thread.
struct DaemonHandle: @unchecked Sendable { let raw: OpaquePointer }
/// A connection pointer, used only to resume the connection (which MHD allows from any thread).
struct ConnectionHandle: @unchecked Sendable, Hashable { let raw: OpaquePointer }

/// Per-request state, from the first call of the access handler until MHD reports completion.
/// The body fields are touched only by the MHD thread that owns the connection; `response` is
/// written by the handler task and read after the resume, hence the lock.
final class RequestState: @unchecked Sendable {
    var body = Data()
    var tooLarge = false
    var dispatched = false
    let started = ContinuousClock.now
    let response = Mutex<HTTPResponse?>(nil)
    var request: HTTPRequest?

    /// Sets the response unless one is set already; whoever sets it resumes the connection (once).
    func answer(_ r: @autoclosure () -> HTTPResponse) -> Bool {
        response.withLock { current in
            guard current == nil else { return false }
            current = r()
            return true
        }
    }
}

private func httpAccessHandler(
    cls: UnsafeMutableRawPointer?, connection: OpaquePointer?, url: UnsafePointer<CChar>?, method: UnsafePointer<CChar>?,
    version: UnsafePointer<CChar>?, uploadData: UnsafePointer<CChar>?, uploadDataSize: UnsafeMutablePointer<Int>?,
    conCls: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
) -> MHD_Result {
    guard let cls, let connection, let conCls, let uploadDataSize else { return .NO }
    let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()

    guard let statePtr = conCls.pointee else {
        // First call: headers only.
        if server.connections.active { server.connections.headersArrived(UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(connection)))) }
        let state = RequestState()
        conCls.pointee = Unmanaged.passRetained(state).toOpaque()
        server.inFlight.wrappingAdd(1, ordering: .acquiringAndReleasing)
        if let length = header(connection, "Content-Length").flatMap({ Int($0) }), length > server.options.maxBodyBytes {
            state.tooLarge = true
            // Answered once the body has been read and dropped: answering now closes the
            // connection while a client that did not wait for "100 Continue" is still sending, and
            // it sees a broken pipe instead of the 413. Only a body declared far beyond the limit
            // is refused at once, unread.
            guard length > server.options.maxBodyBytes * 16 else { return .YES }
            state.request = makeRequest(connection, url: url, method: method, body: Data(), options: server.options)
            return queue(server.finish(state, .error(.tooLarge)), on: connection)
        }
        return .YES
    }
    let state = Unmanaged<RequestState>.fromOpaque(statePtr).takeUnretainedValue()

    if uploadDataSize.pointee > 0 {
        let count = uploadDataSize.pointee
        if !state.tooLarge {
            if state.body.count + count > server.options.maxBodyBytes {
                state.tooLarge = true
                state.body = Data()
            } else if let uploadData {
                state.body.append(UnsafeRawPointer(uploadData).assumingMemoryBound(to: UInt8.self), count: count)
            }
        }
        uploadDataSize.pointee = 0  // consumed (or discarded once over the limit)
        return .YES
    }

    // Body complete. Either the handler has answered (we were resumed) or it must be started.
    if let response = state.response.withLock({ $0 }) {
        server.suspended.withLock { _ = $0.connections.removeValue(forKey: ConnectionHandle(raw: connection)) }
        return queue(response, on: connection)
    }
    guard !state.dispatched else { return .YES }
    state.dispatched = true
    if server.connections.active { server.connections.requestReceived(UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(connection)))) }
    let request = makeRequest(connection, url: url, method: method, body: state.body, options: server.options)
    state.request = request
    state.body = Data()
    if state.tooLarge {
        return queue(server.finish(state, .error(.tooLarge)), on: connection)
    }
    let handle = ConnectionHandle(raw: connection)
    let suspending = server.suspended.withLock { s -> Bool in
        guard !s.closed else { return false }
        s.connections[handle] = state
        return true
    }
    guard suspending else { return queue(server.finish(state, .error(.stopping)), on: connection) }
    MHD_suspend_connection(connection)
    // On the loop that read the request: it is answered there, with no thread crossed.
    let handling: HandlerTasks.Handling = {
        // The request's span continues the caller's trace (its `traceparent`), or starts one.
        let parent = request.header("traceparent").flatMap(TraceContext.init(traceparent:))
        let (response, trace) = await LogContext.$requestId.withValue(request.requestId) {
            await Tracer.shared.span(
                "HTTP \(request.method)", kind: .server, parent: parent,
                named: { "\(request.method) \($0.0.route ?? "unmatched")" }
            ) { (await server.handler(request), LogContext.trace) }
        }
        if state.answer(server.finish(state, response, trace: trace)) { server.resume(handle) }
    }
    if let loop = HTTPLoop.current { loop.handle(handling) } else { Task { await handling() } }
    return .YES
}

private func httpRequestCompleted(
    cls: UnsafeMutableRawPointer?, connection: OpaquePointer?, conCls: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
    code: MHD_RequestTerminationCode
) {
    guard let cls, let conCls, let statePtr = conCls.pointee else { return }
    let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
    if server.connections.active, let connection { server.connections.answered(UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(connection)))) }
    Unmanaged<RequestState>.fromOpaque(statePtr).release()
    conCls.pointee = nil
    server.inFlight.wrappingSubtract(1, ordering: .acquiringAndReleasing)
}

extension HTTPServer {
    static let knownMethods: Set<String> = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
    /// A route holding it is a one-time address, logged as its route.
    static let tokenSegment = Array("{token}".utf8)

    /// Adds the request id header and writes the access log and request metrics.
    func finish(_ state: RequestState, _ response: HTTPResponse, trace: TraceContext? = nil) -> HTTPResponse {
        var response = response
        let request = state.request
        if let rid = request?.requestId { response.headers.append(("X-Request-Id", rid)) }
        let elapsed = (ContinuousClock.now - state.started).seconds
        let route = response.route ?? "unmatched"
        // Any method a client invents would otherwise become a label value (and a new series).
        let method = request.map { Self.knownMethods.contains($0.method) ? $0.method : "other" } ?? "?"
        if let metrics {
            metrics.increment("redeem_http_requests_total", help: "HTTP requests by route, method and status.",
                              labels: ["route": route, "method": method, "status": String(response.status)])
            metrics.observe("redeem_http_request_duration_seconds", help: "HTTP request latency by route.",
                            labels: ["route": route, "method": method], elapsed)
        }
        if accessLog {
            // The raw path is logged without its query string: queries may carry codes or tokens.
            // A path that is itself a secret (a one-time address: `{token}` in its route) is logged
            // as its route.
            let path = route.containsBytes(Self.tokenSegment) ? route : request?.path ?? ""
            let fields = HTTPAccessFields(
                method: method, route: route, path: path, status: response.status,
                hundredthsOfMs: Int64((elapsed * 100_000).rounded()))
            logger.log(.info, "http request", requestId: request?.requestId, traceId: trace?.traceId, typed: fields)
        }
        return response
    }
}

/// The fields of an access-log line (public for `bench/log-line`, which times the line).
public struct HTTPAccessFields: LogFields {
    let method: String, route: String, path: String, status: Int
    /// The request's duration in hundredths of a millisecond: `http.duration_ms` to two places.
    let hundredthsOfMs: Int64
    public init(method: String, route: String, path: String, status: Int, hundredthsOfMs: Int64) {
        (self.method, self.route, self.path) = (method, route, path)
        (self.status, self.hundredthsOfMs) = (status, hundredthsOfMs)
    }
    public func write(to line: inout LogLine) {
        line.add(Self.method, .string(method))
        line.add(Self.route, .string(route))
        line.add(Self.path, .string(path))
        line.add(Self.status, .int(Int64(status)))
        line.add(Self.duration, .hundredths(hundredthsOfMs))
    }
    static let method = LogKey("http.method")
    static let route = LogKey("http.route")
    static let path = LogKey("http.path")
    static let status = LogKey("http.status")
    static let duration = LogKey("http.duration_ms")
}

private func queue(_ response: HTTPResponse, on connection: OpaquePointer) -> MHD_Result {
    let resp: OpaquePointer?
    if let producer = response.producer {
        // Chunked: MHD pulls from the stream; the stream is released by the free callback.
        let stream = HTTPBodyStream()
        resp = MHD_create_response_from_callback(UInt64.max, 32 * 1024, { cls, _, buf, max in
            guard let cls, let buf else { return -2 }
            return Unmanaged<HTTPBodyStream>.fromOpaque(cls).takeUnretainedValue().read(into: buf, max: max)
        }, Unmanaged.passRetained(stream).toOpaque(), { cls in
            guard let cls else { return }
            let stream = Unmanaged<HTTPBodyStream>.fromOpaque(cls).takeRetainedValue()
            stream.cancel()
        })
        if resp != nil {
            Task {
                await producer(stream)
                stream.finish()
            }
        }
    } else {
        resp = response.body.withUnsafeBytes { buf -> OpaquePointer? in
            MHD_create_response_from_buffer(buf.count, UnsafeMutableRawPointer(mutating: buf.baseAddress), .RESPMEM_MUST_COPY)
        }
    }
    guard let resp else { return .NO }
    defer { MHD_destroy_response(resp) }
    // `withCString` lends a small string's bytes from the stack; passing the strings as
    // arguments would copy each into a new array first (two mallocs a header).
    for (name, value) in response.headers {
        _ = name.withCString { name in value.withCString { MHD_add_response_header(resp, name, $0) } }
    }
    return MHD_queue_response(connection, UInt32(response.status), resp)
}

private func header(_ connection: OpaquePointer, _ name: String) -> String? {
    MHD_lookup_connection_value(connection, .HEADER_KIND, name).map { String(cString: $0) }
}

/// Collects key/value pairs of one kind (headers or query arguments) from MHD.
private struct PairCollector {
    var pairs: [String: String]
    let lowercaseKeys: Bool
}

private func collect(_ connection: OpaquePointer, _ kind: MHD_ValueKind, lowercaseKeys: Bool) -> [String: String] {
    // Counted first (no iterator), so the dictionary is made once at its size, and not at all
    // for a request with no query.
    let count = Int(MHD_get_connection_values(connection, kind, nil, nil))
    guard count > 0 else { return [:] }
    var collector = PairCollector(pairs: Dictionary(minimumCapacity: count), lowercaseKeys: lowercaseKeys)
    withUnsafeMutablePointer(to: &collector) { collector in
        _ = MHD_get_connection_values(connection, kind, { cls, _, key, value in
            guard let cls, let key else { return .YES }
            let c = cls.assumingMemoryBound(to: PairCollector.self)
            let k = String(cString: key)
            c.pointee.pairs[c.pointee.lowercaseKeys ? k.lowercased() : k] = value.map { String(cString: $0) } ?? ""
            return .YES
        }, collector)
    }
    return collector.pairs
}

/// The client's IP address as text, read into a buffer on the stack ("" when unknown).
private func ipText(_ write: (UnsafeMutablePointer<CChar>, Int) -> Void) -> String {
    withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buffer in
        write(buffer.baseAddress!, buffer.count)
        return String(cString: buffer.baseAddress!)
    }
}

/// libmicrohttpd asks before it makes a connection (only when `ConnectionGuard` has rules).
private func httpAcceptPolicy(cls: UnsafeMutableRawPointer?, addr: UnsafePointer<sockaddr>?, len: socklen_t) -> MHD_Result {
    guard let cls else { return .YES }
    let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
    let address = ipText { cmicrohttpd_sockaddr_ip(addr, $0, $1) }
    guard server.connections.mayAccept(address) else {
        server.metrics?.increment("redeem_http_connections_refused_total", help: "Connections refused over the per-address limit.")
        return .NO
    }
    return .YES
}

/// libmicrohttpd's notice that a connection started or closed (only when `ConnectionGuard` has rules).
private func httpConnectionNotice(cls: UnsafeMutableRawPointer?, connection: OpaquePointer?, socketContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
                                  code: MHD_ConnectionNotificationCode) {
    guard let cls, let connection else { return }
    let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
    let key = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(connection)))
    if code == MHD_ConnectionNotificationCode(rawValue: 0) {  // MHD_CONNECTION_NOTIFY_STARTED
        let address = ipText { cmicrohttpd_client_ip(connection, $0, $1) }
        server.connections.opened(key, address: address, fd: cmicrohttpd_connection_fd(connection))
    } else {
        server.connections.closed(key)
    }
}

private func makeRequest(_ connection: OpaquePointer, url: UnsafePointer<CChar>?, method: UnsafePointer<CChar>?, body: Data,
                         options: HTTPServer.Options) -> HTTPRequest {
    let headers = collect(connection, .HEADER_KIND, lowercaseKeys: true)
    let query = collect(connection, .GET_ARGUMENT_KIND, lowercaseKeys: false)
    let requestId = headers["x-request-id"].flatMap(validRequestId) ?? UUID.random().lowercasedString
    let peer = ipText { cmicrohttpd_client_ip(connection, $0, $1) }
    return HTTPRequest(
        method: method.map { String(cString: $0) } ?? "GET",
        path: url.map { String(cString: $0) } ?? "/",
        query: query,
        headers: headers,
        body: body,
        requestId: requestId,
        clientAddress: ClientAddress.resolve(peer: peer, headers: headers,
                                             trusted: options.trustedProxies, header: options.trustedProxyHeader)
    )
}

/// A client-supplied request id is kept only if it is short and plain (it ends up in logs).
private func validRequestId(_ s: String) -> String? {
    guard (1...64).contains(s.count), s.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else { return nil }
    return s
}
