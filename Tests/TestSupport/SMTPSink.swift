import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A small SMTP server on loopback that keeps every message it accepts, for tests that read the
/// code a mail carries. It speaks what a client sending one message needs (RFC 5321: `EHLO`/`HELO`,
/// `MAIL`, `RCPT`, `DATA` with dot-stuffing, `RSET`, `NOOP`, `QUIT`), offers no STARTTLS and no
/// AUTH. `stop()` closes the port and every connection (the server is down); `start()` opens the
/// same port again.
public final class SMTPSink: @unchecked Sendable {
    public struct Message: Sendable {
        public var from: String
        public var recipients: [String]
        /// The message as sent (headers and body), CRLF line ends, dots unstuffed.
        public var data: String
    }

    public private(set) var port: Int = 0
    private let lock = NSLock()
    private var listener: Int32 = -1
    private var connections: Set<Int32> = []
    private var received: [Message] = []

    public init() throws { try start() }

    deinit { stop() }

    /// Every message accepted so far.
    public var messages: [Message] { lock.withLock { received } }

    /// The messages to `recipient` (compared without case).
    public func messages(to recipient: String) -> [Message] {
        messages.filter { $0.recipients.contains { $0.lowercased() == recipient.lowercased() } }
    }

    /// Listens on 127.0.0.1: on a free port the first time, on the same port after `stop()`.
    public func start() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(fd, 16) == 0 else {
            close(fd)
            throw TestFailure("the SMTP sink could not listen on port \(port): errno \(errno)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        port = Int(UInt16(bigEndian: addr.sin_port))
        lock.withLock { listener = fd }
        Thread.detachNewThread { [self] in acceptLoop(fd) }
    }

    /// Closes the port and every open connection: clients are refused until `start()`.
    public func stop() {
        let (fd, open) = lock.withLock { () -> (Int32, Set<Int32>) in
            defer { listener = -1; connections = [] }
            return (listener, connections)
        }
        if fd >= 0 {
            shutdown(fd, Int32(SHUT_RDWR))
            close(fd)
        }
        for c in open { shutdown(c, Int32(SHUT_RDWR)) }
    }

    private func acceptLoop(_ fd: Int32) {
        while true {
            let c = accept(fd, nil, nil)
            guard c >= 0 else { return }
            let kept = lock.withLock { () -> Bool in
                guard listener == fd else { return false }
                connections.insert(c)
                return true
            }
            guard kept else { close(c); return }
            Thread.detachNewThread { [self] in
                serve(c)
                lock.withLock { _ = connections.remove(c) }
                close(c)
            }
        }
    }

    /// One client's session.
    private func serve(_ fd: Int32) {
        var reader = LineReader(fd: fd)
        func reply(_ text: String) -> Bool {
            let bytes = Array((text + "\r\n").utf8)
            return bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
        }
        guard reply("220 sink.test ESMTP ready") else { return }
        var from: String?
        var recipients: [String] = []
        while let line = reader.next() {
            let verb = line.prefix(4).uppercased()
            switch verb {
            case "EHLO": guard reply("250-sink.test\r\n250-8BITMIME\r\n250 SIZE 1048576") else { return }
            case "HELO": guard reply("250 sink.test") else { return }
            case "MAIL":
                from = Self.address(in: line)
                recipients = []
                guard reply("250 OK") else { return }
            case "RCPT":
                guard from != nil, let to = Self.address(in: line) else { guard reply("503 MAIL first") else { return }; continue }
                recipients.append(to)
                guard reply("250 OK") else { return }
            case "DATA":
                guard let sender = from, !recipients.isEmpty else { guard reply("503 RCPT first") else { return }; continue }
                guard reply("354 end with <CRLF>.<CRLF>") else { return }
                var lines: [String] = []
                while true {
                    guard let l = reader.next() else { return }  // cut off mid-message: nothing is kept
                    if l == "." { break }
                    lines.append(l.hasPrefix("..") ? String(l.dropFirst()) : l)
                }
                lock.withLock { received.append(Message(from: sender, recipients: recipients, data: lines.joined(separator: "\r\n"))) }
                from = nil
                recipients = []
                guard reply("250 OK queued") else { return }
            case "RSET":
                from = nil
                recipients = []
                guard reply("250 OK") else { return }
            case "NOOP": guard reply("250 OK") else { return }
            case "QUIT":
                _ = reply("221 bye")
                return
            default: guard reply("502 not implemented") else { return }
            }
        }
    }

    /// The address inside `<…>` of a `MAIL FROM:` or `RCPT TO:` line.
    static func address(in line: String) -> String? {
        guard let open = line.firstIndex(of: "<"), let close = line[open...].firstIndex(of: ">") else { return nil }
        return String(line[line.index(after: open)..<close])
    }
}

/// CRLF-terminated lines from a socket.
private struct LineReader {
    let fd: Int32
    var buffer: [UInt8] = []

    init(fd: Int32) { self.fd = fd }

    mutating func next() -> String? {
        while true {
            if let i = buffer.indices.dropLast().first(where: { buffer[$0] == 13 && buffer[$0 + 1] == 10 }) {
                let line = String(decoding: buffer[..<i], as: UTF8.self)
                buffer.removeFirst(i + 2)
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = recv(fd, &chunk, chunk.count, 0)
            guard n > 0 else { return nil }
            buffer += chunk[..<n]
        }
    }
}
