import Core
import Foundation
import Synchronization
import Telemetry

/// The process's ZAP handler (RFC 27). A CURVE server asks it about every client that completes
/// a handshake, and it admits only the public keys in the keyring. Without one, libzmq's CURVE
/// encrypts but admits any client key, so `BusNode` starts it before its first server socket
/// binds and stops it only after the last one closed.
final class ZAPHandler: Sendable {
    /// Where libzmq's servers send their requests, on the same context.
    static let endpoint = "inproc://zeromq.zap.01"

    private let worker: SocketWorker

    init(node: BusNode, keyring: BusKeyring, logger: Logger) throws {
        let replies = SocketOutbox()
        let refusals = RefusalLog()
        worker = try SocketWorker(
            name: "bus-zap", outbox: replies,
            onMessage: { frames, _ in
                // ROUTER: [routing id, "", request frames…]; the reply goes back the same way.
                guard frames.count >= 3, frames[1].isEmpty else { return }
                let request = Array(frames[2...])
                let (reply, client) = ZAPHandler.answer(request, keyring: keyring)
                if reply.count > 2, reply[2] != Data("200".utf8), refusals.shouldLog(client.key, now: .now) {
                    logger.warning("bus client refused", ["bus.peer": client.address, "bus.mechanism": client.mechanism, "bus.client_key": client.key])
                }
                replies.enqueue(Array(frames[0..<2]) + reply)
            },
            open: { try SingleSocket(node.bound(.router, [ZAPHandler.endpoint], secured: false)) })
    }

    func stop() { worker.stop() }

    /// Who asked, for the log.
    struct Client { var address = "", mechanism = "", key = "" }

    /// The reply to one ZAP request (`"1.0"`, request id, domain, address, identity, mechanism,
    /// then its credentials: for CURVE, the client's 32-byte key): 200 with the key's name as user id for a CURVE client whose key is in the
    /// keyring, 400 for any other, 500 for a request this handler cannot read.
    static func answer(_ request: [Data], keyring: BusKeyring) -> ([Data], Client) {
        func text(_ i: Int) -> String { i < request.count ? String(decoding: request[i], as: UTF8.self) : "" }
        let requestId = request.count > 1 ? request[1] : Data()
        func reply(_ status: String, _ reason: String, user: String = "") -> [Data] {
            [Data("1.0".utf8), requestId, Data(status.utf8), Data(reason.utf8), Data(user.utf8), Data()]
        }
        guard request.count >= 6, text(0) == "1.0" else { return (reply("500", "malformed ZAP request"), Client()) }
        var client = Client(address: text(3), mechanism: text(5))
        guard client.mechanism == "CURVE", request.count == 7, let key = CurveKeyPair.z85(request[6]) else {
            return (reply("400", "CURVE with a known key only"), client)
        }
        client.key = key
        guard let name = keyring.name(of: key) else { return (reply("400", "unknown client key"), client) }
        return (reply("200", "OK", user: name), client)
    }
}

/// Refusals are logged once a minute per client key: a refused client connects again every
/// 100 ms, and each attempt must not be a line. (Any repeated warning, by key: failed span exports too.)
public final class RefusalLog: Sendable {
    private let lastLogged = Mutex<[String: ContinuousClock.Instant]>([:])

    public init() {}

    public func shouldLog(_ key: String, now: ContinuousClock.Instant) -> Bool {
        lastLogged.withLock { seen in
            if let last = seen[key], now - last < .seconds(60) { return false }
            if seen.count > 1000 { seen.removeAll() }
            seen[key] = now
            return true
        }
    }
}
