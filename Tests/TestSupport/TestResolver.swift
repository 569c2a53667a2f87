import Bus
import Foundation
import Synchronization

/// A DNS the tests control, in process: each name answers the addresses it was last given (a
/// name never given does not exist), and `failing` makes every lookup fail, as when the DNS
/// server is away. Stands in for compose's or Kubernetes' DNS without touching `/etc/hosts`.
public final class TestResolver: HostResolver {
    private let names = Mutex<[String: [String]]>([:])
    private let failing = Atomic<Bool>(false)
    private let lookups = Atomic<Int>(0)

    public init(_ names: [String: [String]] = [:]) { self.names.withLock { $0 = names } }

    public func set(_ host: String, _ addresses: [String]) { names.withLock { $0[host] = addresses } }

    public func fail(_ on: Bool) { failing.store(on, ordering: .releasing) }

    /// How many lookups were asked for so far.
    public var lookupCount: Int { lookups.load(ordering: .acquiring) }

    public func addresses(of host: String) throws -> [String] {
        lookups.add(1, ordering: .relaxed)
        if failing.load(ordering: .acquiring) { throw LookupError(host: host, code: -3, reason: "test DNS is away") }
        return names.withLock { $0[host] ?? [] }
    }
}

/// A hosts file the tests write, for services in other processes (`REDEEM_BUS_HOSTS_FILE`).
public struct TestHostsFile: Sendable {
    public let path: String

    public init(path: String) { self.path = path }

    /// Replaces the file: every name with its addresses, one line per address.
    public func write(_ names: [String: [String]]) throws {
        let lines = names.sorted { $0.key < $1.key }.flatMap { name, addresses in addresses.map { "\($0) \(name)\n" } }
        try lines.joined().write(toFile: path + ".new", atomically: false, encoding: .utf8)
        guard rename(path + ".new", path) == 0 else { throw TestFailure("cannot replace \(path)") }
    }
}
