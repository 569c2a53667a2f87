import Core
import Foundation
import Glibc
import Synchronization
import Telemetry

/// A bus endpoint as configured. `tcp://name:port` names a host whose every address is a peer
/// (compose's `--scale`, a Kubernetes headless Service); an address, `*`, `ipc://` and
/// `inproc://` are used as they are.
struct BusEndpoint: Hashable, Sendable {
    let text: String
    /// The host name to look up, when the endpoint names one.
    let host: String?
    let port: String

    init(_ text: String) {
        self.text = text
        guard text.hasPrefix("tcp://"), !text.contains(";"), let colon = text.lastIndex(of: ":"),
              colon > text.index(text.startIndex, offsetBy: 6) else {
            host = nil
            port = ""
            return
        }
        let name = String(text[text.index(text.startIndex, offsetBy: 6)..<colon])
        port = String(text[text.index(after: colon)...])
        host = name == "*" || name.hasPrefix("[") || Self.isAddress(name) ? nil : name
    }

    /// The endpoints to connect to, given what this endpoint's host name resolved to (nil: no
    /// answer yet, so nothing to connect to).
    func peers(_ addresses: [String]?) -> [String] {
        guard host != nil else { return [text] }
        return (addresses ?? []).map { $0.contains(":") ? "tcp://[\($0)]:\(port)" : "tcp://\($0):\(port)" }
    }

    /// The endpoints wanted now: every configured one, each name replaced by its addresses.
    static func peers(_ configured: [BusEndpoint], answers: [String: [String]]) -> Set<String> {
        Set(configured.flatMap { endpoint in endpoint.peers(endpoint.host.flatMap { answers[$0] }) })
    }

    static func isAddress(_ text: String) -> Bool {
        var v4 = in_addr(), v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }
}

/// Looks up the host names of a process's bus endpoints, on a thread of its own (a lookup can
/// block for seconds): at once when a socket first names one, then every `interval`. Sockets
/// read the answers (`PeerAddresses`) and connect to each address; `generation` moves when one
/// changes. A lookup that fails keeps the last answer: a DNS outage leaves the peers as they were.
final class Discovery: Sendable {
    private struct State {
        var answers: [String: [String]] = [:]
        var watched: [String] = []
        var failing: Set<String> = []
    }

    private let state = Mutex(State())
    private let changes = Atomic<Int>(0)
    private let started = Atomic<Bool>(false)
    private let stopping = Atomic<Bool>(false)
    private let wake = DispatchSemaphore(value: 0)
    let resolver: any HostResolver
    let interval: Duration
    private let logger: Logger

    init(resolver: any HostResolver, interval: Duration, logger: Logger) {
        self.resolver = resolver
        self.interval = interval
        self.logger = logger
    }

    /// Moves every time an answer changes.
    var generation: Int { changes.load(ordering: .acquiring) }

    /// The addresses each watched name had at its last answer (a name not answered yet is absent).
    var answers: [String: [String]] { state.withLock { $0.answers } }

    /// Starts looking up `hosts` (now, then every `interval`).
    func watch(_ hosts: [String]) {
        guard !hosts.isEmpty else { return }
        state.withLock { s in
            for host in hosts where !s.watched.contains(host) { s.watched.append(host) }
        }
        if !started.exchange(true, ordering: .acquiringAndReleasing) {
            let thread = Thread { [self] in run() }
            thread.name = "bus-discovery"
            thread.start()
        } else {
            wake.signal()
        }
    }

    /// Ends the loop after the lookup in progress (not waited for: it may hang on DNS).
    func stop() {
        stopping.store(true, ordering: .releasing)
        wake.signal()
    }

    private func run() {
        while !stopping.load(ordering: .acquiring) {
            for host in state.withLock({ $0.watched }) where !stopping.load(ordering: .acquiring) {
                lookUp(host)
            }
            _ = wake.wait(timeout: .now() + .milliseconds(Int(interval.seconds * 1000)))
        }
    }

    private func lookUp(_ host: String) {
        do {
            let found = try resolver.addresses(of: host).sorted()
            let (changed, recovered) = state.withLock { s -> (Bool, Bool) in
                let recovered = s.failing.remove(host) != nil
                guard s.answers[host] != found else { return (false, recovered) }
                s.answers[host] = found
                return (true, recovered)
            }
            if recovered { logger.info("bus host found again", ["bus.host": host]) }
            if changed {
                logger.info("bus peers", ["bus.host": host, "bus.addresses": found.joined(separator: ",")])
                changes.add(1, ordering: .releasing)
            }
        } catch {
            if state.withLock({ $0.failing.insert(host).inserted }) {
                logger.warning("bus host lookup failed; keeping its last addresses", ["bus.host": host, "error": String(describing: error)])
            }
        }
    }
}

/// The endpoints one connecting socket should be connected to: its configured endpoints, each
/// host name replaced by every address `Discovery` last found for it. Used on the socket's thread.
final class PeerAddresses {
    private let configured: [BusEndpoint]
    private let discovery: Discovery
    private let logger: Logger
    private var seen = -1
    private(set) var current: Set<String> = []

    init(_ endpoints: [String], discovery: Discovery, logger: Logger) {
        configured = endpoints.map(BusEndpoint.init)
        self.discovery = discovery
        self.logger = logger
        discovery.watch(configured.compactMap(\.host))
    }

    /// What to connect to and what to leave since the last call, sorted; nil when nothing changed.
    func changes() -> (added: [String], removed: [String])? {
        let generation = discovery.generation
        guard generation != seen else { return nil }
        seen = generation
        let wanted = BusEndpoint.peers(configured, answers: discovery.answers)
        let added = wanted.subtracting(current).sorted(), removed = current.subtracting(wanted).sorted()
        current = wanted
        return added.isEmpty && removed.isEmpty ? nil : (added, removed)
    }

    /// Runs a connect or disconnect of a discovered peer; a failure is logged, not thrown.
    func report(_ operation: String, _ endpoint: String, _ body: () throws -> Void) {
        do { try body() } catch {
            logger.warning("bus \(operation) failed", ["bus.endpoint": endpoint, "error": String(describing: error)])
        }
    }
}
