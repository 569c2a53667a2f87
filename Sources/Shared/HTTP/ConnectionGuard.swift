import Core
import Foundation
import Synchronization

/// The server's guard against clients that hold connections (docs/security.md, "The edge"):
///
/// - **Per address:** at most `limit` connections at once from one client address (0: no limit).
///   A trusted proxy carries many clients on its connections, so it is not limited; it is trusted
///   to limit them itself. Counted when libmicrohttpd has made the connection and checked when it
///   accepts one, so threads accepting at the same moment can pass the limit by a connection each.
/// - **Header timeout:** a connection must deliver a request's headers within `headerTimeout` of
///   being opened or of its previous answer.
/// - **Request deadline:** and the whole request, headers and body, within `requestTimeout` of the
///   same moment. libmicrohttpd's own timeout only notices silence, so a client trickling a byte
///   every few seconds would hold its connection, and the body read so far, for ever.
///
/// A sweep once a second shuts overdue sockets down (`shutdown`, never `close`: libmicrohttpd owns
/// the socket, and closes it when it sees the end), under the lock libmicrohttpd's close notice
/// takes first, so a socket is never shut after libmicrohttpd let go of it. No deadline runs while
/// a request is handled and answered.
final class ConnectionGuard: Sendable {
    struct Rules: Sendable {
        var perAddress: Int
        var headerTimeout: Duration?
        var requestTimeout: Duration? = nil
        var trusted: [IPNetwork]
    }

    struct Open {
        var address: String
        var fd: Int32
        /// When the current request's time started (the connection opened, or its previous
        /// request was answered); nil while a request is being handled.
        var since: ContinuousClock.Instant?
        var headersIn = false
    }

    let rules: Rules
    private let state = Mutex<(open: [UInt: Open], perAddress: [String: Int])>(([:], [:]))

    init(_ rules: Rules) { self.rules = rules }

    var active: Bool { rules.perAddress > 0 || timed }
    /// Whether a sweep has deadlines to keep.
    var timed: Bool { rules.headerTimeout != nil || rules.requestTimeout != nil }

    func limited(_ address: String) -> Bool {
        rules.perAddress > 0 && !ClientAddress.isTrusted(address, rules.trusted)
    }

    /// Whether a new connection from `address` may be accepted.
    func mayAccept(_ address: String) -> Bool {
        guard limited(address) else { return true }
        return state.withLock { ($0.perAddress[address] ?? 0) < rules.perAddress }
    }

    func opened(_ connection: UInt, address: String, fd: Int32, now: ContinuousClock.Instant = .now) {
        let counted = limited(address)
        state.withLock { s in
            s.open[connection] = Open(address: address, fd: fd, since: now)
            if counted { s.perAddress[address, default: 0] += 1 }
        }
    }

    func closed(_ connection: UInt) {
        state.withLock { s in
            guard let open = s.open.removeValue(forKey: connection) else { return }
            guard limited(open.address), let n = s.perAddress[open.address] else { return }
            s.perAddress[open.address] = n > 1 ? n - 1 : nil
        }
    }

    /// A request's headers arrived: its body is due by the request deadline.
    func headersArrived(_ connection: UInt) {
        guard timed else { return }
        state.withLock { $0.open.change(connection) { $0?.headersIn = true } }
    }

    /// A request's body is complete: no deadline while it is handled and answered.
    func requestReceived(_ connection: UInt) {
        guard timed else { return }
        state.withLock { $0.open.change(connection) { $0?.since = nil } }
    }

    /// A request was answered: the next one's time starts.
    func answered(_ connection: UInt, now: ContinuousClock.Instant = .now) {
        guard timed else { return }
        state.withLock {
            $0.open.change(connection) { open in
                open?.since = now
                open?.headersIn = false
            }
        }
    }

    /// When `open` must have sent what it is sending, or nil.
    func due(_ open: Open) -> ContinuousClock.Instant? {
        guard let since = open.since else { return nil }
        return [open.headersIn ? nil : rules.headerTimeout, rules.requestTimeout].compactMap { $0 }.min().map { since + $0 }
    }

    /// Shuts down the sockets whose headers or request are overdue; answers how many.
    @discardableResult
    func sweep(now: ContinuousClock.Instant = .now, shut: (Int32) -> Void = { _ = shutdown($0, Int32(SHUT_RDWR)) }) -> Int {
        state.withLock { s in
            var n = 0
            for (connection, open) in s.open {
                guard let due = due(open), due <= now else { continue }
                shut(open.fd)
                s.open[connection]?.since = nil  // once
                n += 1
            }
            return n
        }
    }

    /// Connections open from `address` (for tests and metrics).
    func count(_ address: String) -> Int { state.withLock { $0.perAddress[address] ?? 0 } }
}
