import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Writes raw bytes to a port and reads until the server closes (for what URLSession won't send).
public enum RawHTTP {
    public static func exchange(port: Int, _ request: Data) throws -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var tv = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard rc == 0 else { throw TestFailure("connect failed") }
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var out = Data()
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fd, &buf, buf.count, 0)
            if n <= 0 { break }
            out.append(contentsOf: buf[0..<n])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// One TCP connection to a loopback server, from a chosen loopback address (Linux routes all of
/// 127/8 to `lo`, so `127.0.0.2` is a second client on the same machine).
public final class RawConnection: @unchecked Sendable {
    public let fd: Int32

    public init(port: Int, from source: String = "127.0.0.1") throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, rc == 0 else {
            close(fd)
            throw TestFailure("connect from \(source) failed")
        }
    }

    deinit { close(fd) }

    /// Sends `text`; false once the server has closed the connection.
    @discardableResult
    public func send(_ text: String) -> Bool {
        Array(text.utf8).withUnsafeBytes { Foundation.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == text.utf8.count
    }

    /// Sends all of `data` (blocking while the server reads); false once the server has closed
    /// the connection.
    @discardableResult
    public func send(_ data: Data) -> Bool {
        data.withUnsafeBytes { buffer in
            var sent = 0
            while sent < buffer.count {
                let n = Foundation.send(fd, buffer.baseAddress! + sent, buffer.count - sent, Int32(MSG_NOSIGNAL))
                if n <= 0 { return false }
                sent += n
            }
            return true
        }
    }

    /// Reads for up to `seconds`, until the server closes the connection; what came, and whether
    /// it closed.
    public func read(for seconds: Double) -> (text: String, closed: Bool) {
        var out = Data()
        var buf = [UInt8](repeating: 0, count: 65536)
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, Int32(max(1, deadline.timeIntervalSinceNow * 1000))) > 0 else { continue }
            let n = recv(fd, &buf, buf.count, 0)
            if n <= 0 { return (String(decoding: out, as: UTF8.self), true) }
            out.append(contentsOf: buf[0..<n])
        }
        return (String(decoding: out, as: UTF8.self), false)
    }
}
