import Foundation
import Glibc

/// The sockets of a `BusClient`: one DEALER per instance of the service (each address its
/// endpoints name), on the client's thread. A request goes to the next instance in turn whose
/// connection is up (`ZMQ_IMMEDIATE`), and the client is told which one has it. An instance whose
/// address went away takes no new request, and its socket closes once no request sent to it still
/// waits for an answer (each has a deadline; `leaveWithin` bounds the wait anyway), so its
/// answers are not lost with the connection.
final class PeerSockets: SocketSet {
    private struct Peer {
        let endpoint: String
        let socket: ZMQSocket
        /// Set once its address went away: closed when nothing waits on it, or by then.
        var leaving: ContinuousClock.Instant?
    }

    private var peers: [Peer] = []
    private var next = 0
    private let addresses: PeerAddresses
    private let open: (String) throws -> ZMQSocket
    private let sent: ([Data], String) -> Void
    private let awaited: (String) -> Bool
    private let avoids: ([Data], String) -> Bool
    private let leaveWithin: Duration

    /// `open` makes a DEALER connected to one endpoint; `sent` learns where each request went;
    /// `awaited` says whether a request sent to an endpoint still waits for its answer; `avoids`
    /// whether a request should go to another instance than an endpoint if one can take it (the
    /// endpoint refused it: starting or stopping).
    init(addresses: PeerAddresses, leaveWithin: Duration, open: @escaping (String) throws -> ZMQSocket,
         sent: @escaping ([Data], String) -> Void, awaited: @escaping (String) -> Bool,
         avoids: @escaping ([Data], String) -> Bool = { _, _ in false }) throws {
        self.addresses = addresses
        self.leaveWithin = leaveWithin
        self.open = open
        self.sent = sent
        self.awaited = awaited
        self.avoids = avoids
        // Endpoints that name no host are there from the start: failing to open one is a start-up error.
        for endpoint in addresses.changes()?.added ?? [] {
            peers.append(Peer(endpoint: endpoint, socket: try open(endpoint)))
        }
    }

    var sockets: [ZMQSocket] { peers.map(\.socket) }

    /// Whether `endpoint` has a socket, and whether it is leaving (for tests).
    func state(of endpoint: String) -> (open: Bool, leaving: Bool) {
        let peer = peers.first { $0.endpoint == endpoint }
        return (peer != nil, peer?.leaving != nil)
    }

    /// Sends to the next instance in turn that can take it: first among those the request does not
    /// avoid, then, if none of them could, among the others.
    func send(_ frames: [Data]) throws {
        for avoided in [false, true] {
            for _ in peers.indices {
                next = (next + 1) % peers.count
                guard peers[next].leaving == nil, avoids(frames, peers[next].endpoint) == avoided else { continue }
                do {
                    try peers[next].socket.send(frames)
                    sent(frames, peers[next].endpoint)
                    return
                } catch let error as ZMQError where error.isAgain {
                    continue  // not connected (yet), or its queue is full: the next instance
                }
            }
        }
        throw ZMQError(errno: EAGAIN, operation: "send")
    }

    func upkeep(now: ContinuousClock.Instant) -> Bool {
        var changed = false
        if let change = addresses.changes() {
            for endpoint in change.removed {
                if let i = peers.firstIndex(where: { $0.endpoint == endpoint }) { peers[i].leaving = now + leaveWithin }
            }
            for endpoint in change.added {
                if let i = peers.firstIndex(where: { $0.endpoint == endpoint }) {
                    peers[i].leaving = nil  // back before its socket closed
                    continue
                }
                addresses.report("connect", endpoint) {
                    peers.append(Peer(endpoint: endpoint, socket: try open(endpoint)))
                    changed = true
                }
            }
        }
        let before = peers.count
        peers.removeAll { peer in
            guard let by = peer.leaving else { return false }
            return now >= by || !awaited(peer.endpoint)
        }
        return changed || peers.count != before
    }
}
