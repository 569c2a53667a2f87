import Core
import Foundation
import Synchronization
import Telemetry

/// One process's place on the bus: the ZeroMQ context its sockets share, how they are secured
/// (`BusOptions`), and the lookups of the host names in their endpoints (`Discovery`). Every bus
/// socket is made here, so none can skip its security: under CURVE, a server socket is a CURVE
/// server and the node's ZAP handler (one per context, as libzmq wants) is bound before it; a
/// client socket holds the key of the service it connects to.
public final class BusNode: Sendable {
    let context = ZMQContext()
    public let options: BusOptions
    let discovery: Discovery
    private let logger: Logger
    private let zap = Mutex<ZAPHandler?>(nil)

    public init(_ options: BusOptions, logger: Logger) {
        self.options = options
        self.logger = logger
        discovery = Discovery(resolver: options.resolver, interval: options.resolveInterval, logger: logger)
    }

    /// Logs the warning plain mode deserves (once per process: the runtime calls it at start).
    public func warnIfPlain() {
        guard case .plain = options.security else { return }
        logger.warning("bus security is off (REDEEM_BUS_SECURITY=plain): anything that reaches a bus port can send any request")
    }

    /// Stops the ZAP handler and the lookups. Call it after every socket of the node is closed:
    /// a CURVE server left without its ZAP handler would admit any client.
    public func stop() {
        zap.withLock { z in
            z?.stop()
            z = nil
        }
        discovery.stop()
    }

    /// A socket that binds `endpoints` (ROUTER, PULL, PUB). Under CURVE it is a CURVE server, and
    /// the ZAP handler is running before it binds. `secured: false` only for the ZAP handler itself.
    func bound(_ kind: ZMQSocketKind, _ endpoints: [String], secured: Bool = true) throws -> ZMQSocket {
        let socket = try ZMQSocket(context: context, kind: kind)
        try socket.setMaxMessageSize(options.maxMessageSize)
        try socket.allowIPv6()  // `tcp://*:…` then takes IPv6 as well (libzmq falls back to IPv4 where there is none)
        if secured, case .curve(let keys, let keyring) = options.security {
            try zap.withLock { z in
                if z == nil { z = try ZAPHandler(node: self, keyring: keyring, logger: logger) }
            }
            try socket.makeCurveServer(secretKey: keys.secretKey)
        }
        for endpoint in endpoints { try socket.bind(endpoint) }
        return socket
    }

    /// A socket that connects to `service` (DEALER, PUSH, SUB), not connected yet: under CURVE
    /// a CURVE client holding the service's key, so it talks only to that service's servers.
    func connecting(_ kind: ZMQSocketKind, to service: String) throws -> ZMQSocket {
        let socket = try ZMQSocket(context: context, kind: kind)
        try socket.setMaxMessageSize(options.maxMessageSize)
        try socket.allowIPv6()
        if case .curve(let keys, let keyring) = options.security {
            guard let serverKey = keyring.key(of: service) else {
                throw ConfigError(variable: "REDEEM_BUS_PUBLIC_KEYS", problem: "has no key named \(service), which this process connects to")
            }
            try socket.makeCurveClient(publicKey: keys.publicKey, secretKey: keys.secretKey, serverKey: serverKey)
        }
        return socket
    }

    /// The endpoints a connecting socket follows (each host name looked up, again and again).
    func peers(_ endpoints: [String]) -> PeerAddresses {
        PeerAddresses(endpoints, discovery: discovery, logger: logger)
    }
}
