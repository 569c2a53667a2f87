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
///   being opened or of its previous answer. libmicrohttpd's own timeout only notices silence, so
///   a client trickling a byte every few seconds would hold its connection for ever. A sweep once a
///   second shuts overdue sockets down (`shutdown`, never `close`: libmicrohttpd owns the socket, and
///   closes it when it sees the end), under the lock libmicrohttpd's close notice takes first, so
///   a socket is never shut after libmicrohttpd let go of it.
final class ConnectionGuard: Sendable {
    struct Rules: Sendable {
        var perAddress: Int
        var headerTimeout: Duration?
        var trusted: [IPNetwork]
    }

    struct Open {
        var address: String
        var fd: Int32
        /// When the headers of its next request are due, or nil while a request is being handled.
        var headersDue: ContinuousClock.Instant?
    }

    let rules: Rules
    private let state = Mutex<(open: [UInt: Open], perAddress: [String: Int])>(([:], [:]))

    init(_ rules: Rules) { self.rules = rules }

    var active: Bool { rules.perAddress > 0 || rules.headerTimeout != nil }

    func limited(_ address: String) -> Bool {
        rules.perAddress > 0 && !ClientAddress.isTrusted(address, rules.trusted)
    }

    /// Whether a new connection from `address` may be accepted.
    func mayAccept(_ address: String) -> Bool {
        guard limited(address) else { return true }
        return state.withLock { ($0.perAddress[address] ?? 0) < rules.perAddress }
    }

    func opened(_ connection: UInt, address: String, fd: Int32, now: ContinuousClock.Instant = .now) {
        let due = rules.headerTimeout.map { now + $0 }
        let counted = limited(address)
        state.withLock { s in
            s.open[connection] = Open(address: address, fd: fd, headersDue: due)
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

    /// A request's headers arrived: no deadline while it is handled.
    func headersArrived(_ connection: UInt) {
        guard rules.headerTimeout != nil else { return }
        state.withLock { $0.open[connection]?.headersDue = nil }
    }

    /// A request was answered: the next one's headers are due within the timeout.
    func answered(_ connection: UInt, now: ContinuousClock.Instant = .now) {
        guard let timeout = rules.headerTimeout else { return }
        state.withLock { $0.open[connection]?.headersDue = now + timeout }
    }

    /// Shuts down the sockets whose headers are overdue; answers how many.
    @discardableResult
    func sweep(now: ContinuousClock.Instant = .now, shut: (Int32) -> Void = { _ = shutdown($0, Int32(SHUT_RDWR)) }) -> Int {
        state.withLock { s in
            var n = 0
            for (connection, open) in s.open {
                guard let due = open.headersDue, due <= now else { continue }
                shut(open.fd)
                s.open[connection]?.headersDue = nil  // once
                n += 1
            }
            return n
        }
    }

    /// Connections open from `address` (for tests and metrics).
    func count(_ address: String) -> Int { state.withLock { $0.perAddress[address] ?? 0 } }
}
