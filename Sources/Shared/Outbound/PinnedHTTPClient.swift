import Foundation
import Synchronization
internal import CCurl

/// POSTs to an address fixed in advance, for destinations that must not be trusted (webhooks).
///
/// - The connection goes to `Request.address`, whatever the URL's host resolves to by then:
///   `CURLOPT_CONNECT_TO` with an empty host and port, which match any, so neither a second DNS
///   answer (rebinding) nor a URL that libcurl parses differently from Foundation reaches another
///   address. The host name still goes in `Host` and is what TLS verifies.
/// - Only the scheme that was checked is allowed, redirects are never followed, and proxies named
///   in the environment are ignored.
/// - At most `Limits.readBytes` of the answer (headers and body) are read, then the transfer stops;
///   the first `Limits.keepBytes` of the body are kept. Every exchange ends within `Limits.timeout`.
///
/// libcurl's calls block, so transfers run on the client's own thread through libcurl's multi
/// interface (one thread however many are under way), never on Swift's cooperative pool; a caller
/// awaits its answer. `close()` (or the last reference going) ends the thread and fails whatever
/// is still under way.
public final class PinnedHTTPClient: Sendable {
    public struct Request: Sendable {
        public var url: String
        /// The one scheme libcurl may use: `https` or `http`.
        public var scheme: String
        /// Numeric IPv4 or IPv6 address to connect to, and its port.
        public var address: String
        public var port: Int
        /// `Name: value` lines.
        public var headers: [String]
        public var body: [UInt8]

        public init(url: String, scheme: String, address: String, port: Int, headers: [String], body: [UInt8]) {
            self.url = url
            self.scheme = scheme
            self.address = address
            self.port = port
            self.headers = headers
            self.body = body
        }
    }

    public struct Answer: Sendable, Equatable {
        public var status: Int
        /// The first `keepBytes` of the body.
        public var bodyPrefix: [UInt8]
        /// Bytes of headers and body taken (at most `readBytes`).
        public var bytesRead: Int
        /// The answer was longer than `readBytes` and the rest was not read.
        public var cut: Bool

        public init(status: Int, bodyPrefix: [UInt8], bytesRead: Int, cut: Bool) {
            self.status = status
            self.bodyPrefix = bodyPrefix
            self.bytesRead = bytesRead
            self.cut = cut
        }
    }

    /// No answer: libcurl's error code (`CURLcode`) and its message.
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public var code: Int
        public var message: String
        public var description: String { "\(message) (curl \(code))" }

        public init(code: Int, message: String) {
            self.code = code
            self.message = message
        }
    }

    public struct Limits: Sendable {
        public var readBytes = 64 * 1024
        public var keepBytes = 1024
        public var timeout: Duration = .seconds(10)

        public init(readBytes: Int = 64 * 1024, keepBytes: Int = 1024, timeout: Duration = .seconds(10)) {
            self.readBytes = readBytes
            self.keepBytes = keepBytes
            self.timeout = timeout
        }
    }

    private let loop: TransferLoop

    public init(limits: Limits = Limits()) throws {
        let ready = ccurl_global_init()
        guard ready == CURLE_OK else { throw Failure(code: Int(ready.rawValue), message: String(cString: curl_easy_strerror(ready))) }
        loop = TransferLoop(multi: try CurlMulti(), limits: limits)
        let loop = self.loop
        let thread = Thread { loop.run() }
        thread.name = "pinned-http"
        thread.start()
    }

    deinit { loop.close() }

    /// Ends the transfer thread; exchanges under way or asked for later fail.
    public func close() { loop.close() }

    public func post(_ request: Request) async throws(Failure) -> Answer {
        let result: Result<Answer, Failure> = await withCheckedContinuation { loop.submit(request, $0) }
        return try result.get()
    }
}

/// The queue of requests between callers and the transfer thread, and that thread's work.
private final class TransferLoop: Sendable {
    typealias Reply = CheckedContinuation<Result<PinnedHTTPClient.Answer, PinnedHTTPClient.Failure>, Never>
    private struct Inbox {
        var waiting: [(PinnedHTTPClient.Request, Reply)] = []
        var closed = false
    }

    private let multi: CurlMulti
    private let limits: PinnedHTTPClient.Limits
    private let inbox = Mutex(Inbox())

    init(multi: CurlMulti, limits: PinnedHTTPClient.Limits) {
        self.multi = multi
        self.limits = limits
    }

    static let closedFailure = PinnedHTTPClient.Failure(code: -1, message: "the HTTP client was closed")

    func submit(_ request: PinnedHTTPClient.Request, _ reply: Reply) {
        let taken = inbox.withLock { box in
            guard !box.closed else { return false }
            box.waiting.append((request, reply))
            multi.wakeup()
            return true
        }
        if !taken { reply.resume(returning: .failure(Self.closedFailure)) }
    }

    func close() {
        inbox.withLock { box in
            guard !box.closed else { return }
            box.closed = true
            multi.wakeup()
        }
    }

    /// The transfer thread: starts what was asked for, lets libcurl move every transfer on, and
    /// answers those done; waits in `curl_multi_poll` for sockets, libcurl's timers or a wakeup.
    func run() {
        var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]
        while true {
            let (taken, closed) = inbox.withLock { box in
                defer { box.waiting.removeAll() }
                return (box.waiting, box.closed)
            }
            for (request, reply) in taken {
                guard !closed else { reply.resume(returning: .failure(Self.closedFailure)); continue }
                do {
                    let transfer = try CurlTransfer(request, limits: limits, reply: reply)
                    try multi.add(transfer.easy)
                    active[transfer.easy] = transfer
                } catch {
                    reply.resume(returning: .failure(error))
                }
            }
            if closed { break }
            multi.perform()
            while let (easy, code) = multi.nextDone() {
                guard let transfer = active.removeValue(forKey: easy) else { continue }
                multi.remove(easy)
                transfer.finish(code)
            }
            multi.poll(milliseconds: 1000)
        }
        for transfer in active.values {
            multi.remove(transfer.easy)
            transfer.reply.resume(returning: .failure(Self.closedFailure))
        }
    }
}

/// Owns a libcurl multi handle.
///
/// `@unchecked Sendable`: only the transfer thread calls it, except `wakeup`, which libcurl allows
/// from any thread, and which callers make under the inbox's lock before the loop is closed (the
/// handle is freed only after the transfer thread has left its loop and let go of it).
private final class CurlMulti: @unchecked Sendable {
    let handle: UnsafeMutableRawPointer

    init() throws(PinnedHTTPClient.Failure) {
        guard let h = curl_multi_init() else { throw PinnedHTTPClient.Failure(code: -1, message: "curl_multi_init failed") }
        handle = h
    }

    deinit { curl_multi_cleanup(handle) }

    func add(_ easy: UnsafeMutableRawPointer) throws(PinnedHTTPClient.Failure) {
        let rc = curl_multi_add_handle(handle, easy)
        guard rc == CURLM_OK else { throw PinnedHTTPClient.Failure(code: Int(rc.rawValue), message: String(cString: curl_multi_strerror(rc))) }
    }

    func remove(_ easy: UnsafeMutableRawPointer) { curl_multi_remove_handle(handle, easy) }

    func perform() {
        var running: Int32 = 0
        curl_multi_perform(handle, &running)
    }

    /// A finished transfer's easy handle and result, if any is left to read.
    func nextDone() -> (UnsafeMutableRawPointer, CURLcode)? {
        var left: Int32 = 0
        while let message = curl_multi_info_read(handle, &left) {
            if message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle {
                return (easy, message.pointee.data.result)
            }
        }
        return nil
    }

    func poll(milliseconds: Int32) { curl_multi_poll(handle, nil, 0, milliseconds, nil) }

    func wakeup() { curl_multi_wakeup(handle) }
}

/// One exchange: owns its easy handle and the lists and buffer libcurl reads while it runs, and
/// collects the answer. Lives on the transfer thread only.
private final class CurlTransfer {
    let easy: UnsafeMutableRawPointer
    let reply: TransferLoop.Reply
    private let limits: PinnedHTTPClient.Limits
    private var headers: UnsafeMutablePointer<curl_slist>?
    private var connectTo: UnsafeMutablePointer<curl_slist>?
    private let errorText = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
    private var bodyPrefix: [UInt8] = []
    private var bytesRead = 0
    private var cutInBody = false
    private var cutInHeaders = false

    init(_ r: PinnedHTTPClient.Request, limits: PinnedHTTPClient.Limits, reply: TransferLoop.Reply) throws(PinnedHTTPClient.Failure) {
        errorText.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        guard let easy = curl_easy_init() else {
            errorText.deallocate()
            throw PinnedHTTPClient.Failure(code: -1, message: "curl_easy_init failed")
        }
        self.easy = easy
        self.reply = reply
        self.limits = limits
        let host = r.address.contains(":") ? "[\(r.address)]" : r.address
        connectTo = curl_slist_append(nil, "::\(host):\(r.port)")
        for line in r.headers + ["Expect:"] { headers = curl_slist_append(headers, line) }
        let me = Unmanaged.passUnretained(self).toOpaque()
        let millis = Int(limits.timeout.components.seconds * 1000 + limits.timeout.components.attoseconds / 1_000_000_000_000_000)
        try check(ccurl_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorText))
        try check(ccurl_setopt_string(easy, CURLOPT_URL, r.url))
        try check(ccurl_setopt_string(easy, CURLOPT_PROTOCOLS_STR, r.scheme))
        try check(ccurl_setopt_list(easy, CURLOPT_CONNECT_TO, connectTo))
        try check(ccurl_setopt_string(easy, CURLOPT_PROXY, ""))
        try check(ccurl_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 0))
        try check(ccurl_setopt_long(easy, CURLOPT_NOSIGNAL, 1))
        try check(ccurl_setopt_long(easy, CURLOPT_FORBID_REUSE, 1))
        try check(ccurl_setopt_long(easy, CURLOPT_TIMEOUT_MS, millis))
        try check(ccurl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, millis))
        try check(ccurl_setopt_list(easy, CURLOPT_HTTPHEADER, headers))
        try check(ccurl_setopt_long(easy, CURLOPT_POST, 1))
        try check(ccurl_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(r.body.count)))
        // Copied by libcurl during the call: POSTFIELDSIZE bytes (an empty body still needs a pointer).
        try check((r.body.isEmpty ? [0] : r.body).withUnsafeBytes {
            ccurl_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: $0.baseAddress))
        })
        try check(ccurl_setopt_receiver(easy, CURLOPT_WRITEFUNCTION, takeBody))
        try check(ccurl_setopt_pointer(easy, CURLOPT_WRITEDATA, me))
        try check(ccurl_setopt_receiver(easy, CURLOPT_HEADERFUNCTION, takeHeader))
        try check(ccurl_setopt_pointer(easy, CURLOPT_HEADERDATA, me))
    }

    deinit {
        curl_easy_cleanup(easy)
        curl_slist_free_all(headers)
        curl_slist_free_all(connectTo)
        errorText.deallocate()
    }

    private func check(_ rc: CURLcode) throws(PinnedHTTPClient.Failure) {
        guard rc == CURLE_OK else { throw PinnedHTTPClient.Failure(code: Int(rc.rawValue), message: String(cString: curl_easy_strerror(rc))) }
    }

    /// Counts a piece of the answer against the read limit; false once past it (libcurl then stops
    /// the transfer).
    private func count(_ n: Int) -> Bool {
        guard bytesRead + n <= limits.readBytes else { return false }
        bytesRead += n
        return true
    }

    fileprivate func body(_ piece: UnsafeRawBufferPointer) -> Int {
        guard count(piece.count) else { cutInBody = true; return 0 }
        if bodyPrefix.count < limits.keepBytes { bodyPrefix += piece.prefix(limits.keepBytes - bodyPrefix.count) }
        return piece.count
    }

    fileprivate func header(_ piece: UnsafeRawBufferPointer) -> Int {
        guard count(piece.count) else { cutInHeaders = true; return 0 }
        return piece.count
    }

    /// Answers the caller: the status once the headers were read (also when the body was cut),
    /// else libcurl's error.
    func finish(_ code: CURLcode) {
        var status = 0
        _ = ccurl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        if status > 0, code == CURLE_OK || (code == CURLE_WRITE_ERROR && cutInBody) {
            reply.resume(returning: .success(.init(status: status, bodyPrefix: bodyPrefix, bytesRead: bytesRead, cut: cutInBody)))
        } else if cutInHeaders {
            reply.resume(returning: .failure(.init(code: Int(code.rawValue), message: "the answer's headers are longer than \(limits.readBytes) bytes")))
        } else {
            let detail = errorText.pointee == 0 ? String(cString: curl_easy_strerror(code)) : String(cString: errorText)
            reply.resume(returning: .failure(.init(code: Int(code.rawValue), message: detail)))
        }
    }
}

/// libcurl's write and header callbacks: the transfer comes back from the pointer it was given as
/// `CURLOPT_WRITEDATA` / `CURLOPT_HEADERDATA`. A return other than the size given stops the transfer.
private let takeBody: curl_write_callback = { data, size, count, context in
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue()
    return transfer.body(UnsafeRawBufferPointer(start: data, count: size * count))
}

private let takeHeader: curl_write_callback = { data, size, count, context in
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue()
    return transfer.header(UnsafeRawBufferPointer(start: data, count: size * count))
}
