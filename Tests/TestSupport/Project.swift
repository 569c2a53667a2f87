import Foundation

/// Paths and small process helpers shared by the tests.
public enum Project {
    /// The package root (where Package.swift is).
    public static let root: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        fatalError("Package.swift not found above \(#filePath)")
    }()

    /// Where the test run's executables are (`swift build` debug output).
    public static var binDirectory: URL {
        if let dir = ProcessInfo.processInfo.environment["REDEEM_BIN_DIR"] { return URL(fileURLWithPath: dir) }
        return root.appendingPathComponent(".build/debug")
    }

    /// A fresh temporary directory that the `postgres` user can reach (for initdb).
    public static func temporaryDirectory(_ prefix: String) throws -> URL {
        let base = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("redeem-test-\(prefix)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: base.path)
        return base
    }

    /// Runs a command to completion and answers its standard output (throws on a non-zero exit).
    @discardableResult
    public static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws -> String {
        try Subprocess.run(executable, arguments, environment: environment)
    }

    /// A TCP port of 127.0.0.1 that was free a moment ago, chosen below the kernel's ephemeral range
    /// (as `scripts/free-port` does): a port from that range can be taken by any outgoing connection
    /// before the test binds it.
    public static func freePort() -> Int {
        let range = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))?
            .split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } ?? 32768
        for _ in 0..<500 {
            let port = range > 10001 ? Int.random(in: 10000..<range) : 0
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_addr.s_addr = inet_addr("127.0.0.1")
            addr.sin_port = UInt16(port).bigEndian
            var len = socklen_t(MemoryLayout<sockaddr_in>.size)
            guard withUnsafePointer(to: &addr, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }) == 0 else { continue }
            _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
            return Int(UInt16(bigEndian: addr.sin_port))
        }
        fatalError("no free port found")
    }
}

public struct TestFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ d: String) { description = d }
}
