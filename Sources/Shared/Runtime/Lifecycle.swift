import Core
import Foundation
import Glibc

/// Turns SIGTERM/SIGINT into an orderly shutdown (`ServiceMain` runs it).
///
/// `blockTerminationSignals()` must run first thing in `main`, before any thread exists, so every
/// thread inherits the mask and the signals are only ever taken by `sigwait` on one dedicated
/// thread: no Swift code runs in a signal handler.
public enum Lifecycle {
    private static func terminationSet() -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGINT)
        return set
    }

    public static func blockTerminationSignals() {
        var set = terminationSet()
        pthread_sigmask(SIG_BLOCK, &set, nil)
        signal(SIGPIPE, SIG_IGN)
    }

    /// Blocks the calling thread until SIGTERM or SIGINT arrives; answers the signal number.
    ///
    /// Call it on the main thread, and never use top-level `await` in `main.swift`: on Linux the
    /// async main hands the main thread to libdispatch, which parks it in `sigsuspend` with an
    /// empty mask, so SIGTERM would kill the process instead of reaching `sigwait`.
    public static func waitForTermination() -> Int32 {
        var set = terminationSet()
        var sig: Int32 = 0
        sigwait(&set, &sig)
        return sig
    }

    /// Runs `work` but stops waiting for it after `seconds`; answers whether it finished in time.
    /// The work is not awaited past the deadline, so a stuck drain cannot keep the process alive.
    @discardableResult
    public static func withDeadline(seconds: Double, _ work: @escaping @Sendable () async -> Void) async -> Bool {
        let done = Doorbell()
        Task {
            await work()
            done.ring()
        }
        return await done.wait(timeout: .seconds(seconds))
    }
}
