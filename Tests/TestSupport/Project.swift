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

    /// The timeout, in seconds, of a client's calls to a fake on loopback where time is not what a
    /// test is about. The Swift Testing suites run all at once on two cores, where a test of 0.1 s
    /// alone takes 7-9 s of wall time (docs/testing.md), so a few seconds is not enough there.
    public static let callTimeout: Double = 30

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

    /// A TCP port of 127.0.0.1 that was free a moment ago and that no other caller on this machine has
    /// been handed lately (`scripts/free-port`, which every stack and test shares).
    public static func freePort() throws -> Int {
        try freePorts(1)[0]
    }

    /// `count` distinct such ports.
    public static func freePorts(_ count: Int) throws -> [Int] {
        let out = try run(root.appendingPathComponent("scripts/free-port").path, [String(count)])
        let ports = out.split(separator: "\n").compactMap { Int($0) }
        guard ports.count == count else { throw TestFailure("free-port answered \(out)") }
        return ports
    }
}

public struct TestFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ d: String) { description = d }
}
