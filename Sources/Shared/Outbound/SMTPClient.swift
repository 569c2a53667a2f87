import Foundation
internal import CCurl

/// Sends one message to one recipient through an SMTP server, with libcurl's SMTP support:
/// `smtps://` is TLS from the start; `smtp://` must switch to TLS with STARTTLS before anything
/// is sent, credentials or not; only a server given with `requireTLS: false` (accounts' loopback
/// `smtp+insecure://` relay) stays plain. The server's certificate is verified.
///
/// libcurl's easy interface blocks, so each send runs on a thread of its own off Swift's
/// cooperative pool; mail is rare (a verification or a reset), one at a time per sender.
public struct SMTPClient: Sendable {
    /// Where mail goes: the `smtp://` or `smtps://` URL libcurl is given (credentials in it when
    /// the server wants them: a secret, never logged), the envelope sender, and whether the
    /// session must be TLS (from the start, or by STARTTLS before anything is sent).
    public struct Server: Sendable {
        public var url: String
        public var from: String
        public var requireTLS: Bool

        public init(url: String, from: String, requireTLS: Bool) {
            self.url = url
            self.from = from
            self.requireTLS = requireTLS
        }
    }

    public let server: Server
    public var timeout: Duration

    public init(server: Server, timeout: Duration = .seconds(30)) {
        self.server = server
        self.timeout = timeout
    }

    /// No mail sent: libcurl's code (`CURLcode`), its message, and the server's last answer code.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var code: Int
        public var message: String
        public var smtpStatus: Int
        public var description: String { "\(message) (curl \(code)\(smtpStatus > 0 ? ", SMTP \(smtpStatus)" : ""))" }
    }

    /// Sends `message` (a whole RFC 5322 message, CRLF line ends) to `recipient`.
    public func send(to recipient: String, message: [UInt8]) async throws(Failure) {
        let config = self.server, timeout = self.timeout
        let result: Result<Void, Failure> = await withCheckedContinuation { done in
            Thread.detachNewThread {
                done.resume(returning: Result { () throws(Failure) in try SMTPTransfer(config: config, timeout: timeout).perform(to: recipient, message: message) })
            }
        }
        try result.get()
    }
}

/// One SMTP exchange: owns its easy handle, the recipient list and the message libcurl reads.
private final class SMTPTransfer {
    private let easy: UnsafeMutableRawPointer
    private let config: SMTPClient.Server
    private let timeout: Duration
    private var recipients: UnsafeMutablePointer<curl_slist>?
    private let errorText = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
    private var message: [UInt8] = []
    private var offset = 0

    /// libcurl's global set-up, once per process (before the first easy handle).
    private static let global: CURLcode = ccurl_global_init()

    init(config: SMTPClient.Server, timeout: Duration) throws(SMTPClient.Failure) {
        errorText.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        let ready = Self.global
        guard ready == CURLE_OK, let easy = curl_easy_init() else {
            errorText.deallocate()
            throw SMTPClient.Failure(code: Int(ready.rawValue), message: "libcurl could not start", smtpStatus: 0)
        }
        self.easy = easy
        self.config = config
        self.timeout = timeout
    }

    deinit {
        curl_easy_cleanup(easy)
        curl_slist_free_all(recipients)
        errorText.deallocate()
    }

    private func check(_ rc: CURLcode) throws(SMTPClient.Failure) {
        guard rc == CURLE_OK else { throw SMTPClient.Failure(code: Int(rc.rawValue), message: String(cString: curl_easy_strerror(rc)), smtpStatus: 0) }
    }

    func perform(to recipient: String, message: [UInt8]) throws(SMTPClient.Failure) {
        self.message = message
        recipients = curl_slist_append(nil, "<\(recipient)>")
        let millis = Int(timeout.components.seconds * 1000)
        let me = Unmanaged.passUnretained(self).toOpaque()
        try check(ccurl_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorText))
        try check(ccurl_setopt_string(easy, CURLOPT_URL, config.url))
        try check(ccurl_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "smtp,smtps"))
        try check(ccurl_setopt_string(easy, CURLOPT_PROXY, ""))
        try check(ccurl_setopt_long(easy, CURLOPT_NOSIGNAL, 1))
        try check(ccurl_setopt_long(easy, CURLOPT_TIMEOUT_MS, millis))
        try check(ccurl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, min(millis, 10_000)))
        let tls = config.requireTLS ? CURLUSESSL_ALL : CURLUSESSL_NONE
        try check(ccurl_setopt_long(easy, CURLOPT_USE_SSL, Int(tls.rawValue)))
        try check(ccurl_setopt_string(easy, CURLOPT_MAIL_FROM, "<\(config.from)>"))
        try check(ccurl_setopt_list(easy, CURLOPT_MAIL_RCPT, recipients))
        try check(ccurl_setopt_long(easy, CURLOPT_UPLOAD, 1))
        try check(ccurl_setopt_reader(easy, CURLOPT_READFUNCTION, giveMessage))
        try check(ccurl_setopt_pointer(easy, CURLOPT_READDATA, me))
        let rc = curl_easy_perform(easy)
        guard rc == CURLE_OK else {
            var status = 0
            _ = ccurl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
            let detail = errorText.pointee == 0 ? String(cString: curl_easy_strerror(rc)) : String(cString: errorText)
            throw SMTPClient.Failure(code: Int(rc.rawValue), message: detail, smtpStatus: status)
        }
    }

    /// Copies the next piece of the message into libcurl's buffer; 0 at the end.
    fileprivate func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        let n = min(buffer.count, message.count - offset)
        guard n > 0 else { return 0 }
        message.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + n)])) }
        offset += n
        return n
    }
}

/// libcurl's read callback: the transfer comes back from the pointer given as `CURLOPT_READDATA`.
private let giveMessage: curl_read_callback = { buffer, size, count, context in
    let transfer = Unmanaged<SMTPTransfer>.fromOpaque(context!).takeUnretainedValue()
    return transfer.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: size * count))
}
