import Foundation
import Glibc

/// Where the addresses of a host name in a bus endpoint come from: `SystemResolver` in
/// production, a resolver the tests control in tests.
public protocol HostResolver: Sendable {
    /// Every address `host` has now, as numeric text (IPv4 or IPv6), in no particular order; empty
    /// when the name does not exist. Throws when there is no answer (the DNS server failed or
    /// timed out): the caller then keeps the last answer it had.
    func addresses(of host: String) throws -> [String]
}

/// A lookup that got no answer, with getaddrinfo's code.
public struct LookupError: Error, CustomStringConvertible {
    public let host: String
    public let code: Int32
    public let reason: String
    public var description: String { "cannot look up \(host): \(reason) (\(code))" }

    public init(host: String, code: Int32, reason: String) {
        self.host = host
        self.code = code
        self.reason = reason
    }
}

/// getaddrinfo(3): every A and AAAA record of the name (and `/etc/hosts`, as the system is set up).
/// libzmq would connect to the first of them only, which is why the bus looks names up itself.
public struct SystemResolver: HostResolver {
    public init() {}

    public func addresses(of host: String) throws -> [String] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, nil, &hints, &list)
        defer { if let list { freeaddrinfo(list) } }
        switch rc {
        case 0: break
        // The name does not exist, or has no address: an answer, and it is "none".
        case EAI_NONAME, Self.noData: return []
        default:
            let reason = rc == EAI_SYSTEM ? String(cString: strerror(errno)) : String(cString: gai_strerror(rc))
            throw LookupError(host: host, code: rc, reason: reason)
        }
        var found: [String] = []
        var next = list
        while let info = next {
            if let text = Self.numericHost(info.pointee.ai_addr, length: info.pointee.ai_addrlen), !found.contains(text) {
                found.append(text)
            }
            next = info.pointee.ai_next
        }
        return found
    }

    /// `EAI_NODATA`, which glibc declares only under `_GNU_SOURCE`.
    static let noData: Int32 = -5

    private static func numericHost(_ address: UnsafeMutablePointer<sockaddr>?, length: socklen_t) -> String? {
        guard let address else { return nil }
        var buffer = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        guard getnameinfo(address, length, &buffer, socklen_t(buffer.count), nil, 0, NI_NUMERICHOST) == 0 else { return nil }
        return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}

/// Names given in a hosts file (`address name…` per line, `#` comments), read again at every
/// lookup, before any other resolver (`REDEEM_BUS_HOSTS_FILE`). Every line naming a host adds
/// its address, so one name can list several instances. For fleets without DNS, and for tests
/// that start instances on loopback addresses of their own.
public struct HostsFileResolver: HostResolver {
    public let path: String
    public let fallback: any HostResolver

    public init(path: String, fallback: any HostResolver = SystemResolver()) {
        self.path = path
        self.fallback = fallback
    }

    public func addresses(of host: String) throws -> [String] {
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw LookupError(host: host, code: 0, reason: "cannot read \(path)")
        }
        var found: [String] = []
        var listed = false
        for line in text.split(whereSeparator: \.isNewline) {
            let fields = line.prefix { $0 != "#" }.split(whereSeparator: \.isWhitespace).map(String.init)
            guard fields.count >= 2, fields.dropFirst().contains(host) else { continue }
            listed = true
            if !found.contains(fields[0]) { found.append(fields[0]) }
        }
        return listed ? found : try fallback.addresses(of: host)
    }
}
