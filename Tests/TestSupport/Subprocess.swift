import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A child process started with posix_spawn and reaped with waitpid. (Foundation's `Process`
/// was seen to miss a child's exit here and wait forever.)
public final class Subprocess: @unchecked Sendable {
    public let pid: pid_t
    private var status: Int32?

    /// Starts `executable`; stdout and stderr go to the given files (or /dev/null).
    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                stdout: String? = nil, stderr: String? = nil) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout ?? "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderr ?? "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        // Children start with no blocked signals, whatever this thread had.
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attr, &empty)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK))
        let env = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let argv = [executable] + arguments
        var pid: pid_t = 0
        let rc = withCStrings(argv) { a in withCStrings(env) { e in posix_spawn(&pid, executable, &actions, &attr, a, e) } }
        guard rc == 0 else { throw TestFailure("posix_spawn \(executable) failed: \(rc)") }
        self.pid = pid
    }

    /// Waits for the exit; answers the exit status (128 + n when killed by signal n).
    @discardableResult
    public func wait() -> Int32 {
        if let status { return status }
        var raw: Int32 = 0
        while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
        let s = (raw & 0x7f) == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)
        status = s
        return s
    }

    /// Waits up to `seconds`; nil if still running.
    public func wait(seconds: Double) -> Int32? {
        if let status { return status }
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            var raw: Int32 = 0
            let r = waitpid(pid, &raw, WNOHANG)
            if r == pid {
                let s = (raw & 0x7f) == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)
                status = s
                return s
            }
            usleep(20_000)
        }
        return nil
    }

    public func signal(_ sig: Int32) { kill(pid, sig) }

    /// Runs to completion and answers stdout (throws on a non-zero exit).
    public static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws -> String {
        let out = NSTemporaryDirectory() + "redeem-run-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: out) }
        let p = try Subprocess(executable, arguments, environment: environment, stdout: out)
        let status = p.wait()
        guard status == 0 else { throw TestFailure("\(executable) \(arguments.joined(separator: " ")) exited \(status)") }
        return (try? String(contentsOfFile: out, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
    }
}

private func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
    var ptrs: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) } + [nil]
    defer { ptrs.forEach { free($0) } }
    return ptrs.withUnsafeMutableBufferPointer { body($0.baseAddress!) }
}
