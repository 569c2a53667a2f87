import Core
import Foundation

/// An IP network in CIDR notation (`10.0.0.0/8`, `fd00::/8`; an address alone is one host), as
/// `REDEEM_TRUSTED_PROXIES` lists them.
public struct IPNetwork: Sendable, Equatable, CustomStringConvertible {
    /// The network's address bytes (4 or 16), host bits cleared.
    let bytes: [UInt8]
    let prefix: Int

    /// Parses `address[/prefix]`; nil if it is not one.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let bytes = IPNetwork.address(String(parts[0])) else { return nil }
        let bits = bytes.count * 8
        var prefix = bits
        if parts.count == 2 {
            guard let p = Int(parts[1]), (0...bits).contains(p), parts[1].allSatisfy(\.isASCII) else { return nil }
            prefix = p
        }
        self.prefix = prefix
        self.bytes = IPNetwork.masked(bytes, prefix)
    }

    /// Whether `address` (text) is in this network. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`)
    /// counts as its IPv4 address.
    public func contains(_ address: String) -> Bool {
        guard let b = IPNetwork.address(address) else { return false }
        return contains(bytes: b)
    }

    func contains(bytes b: [UInt8]) -> Bool {
        var candidate = b
        if candidate.count == 16, bytes.count == 4, candidate.prefix(12) == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF] {
            candidate = Array(candidate.suffix(4))
        }
        return candidate.count == bytes.count && IPNetwork.masked(candidate, prefix) == bytes
    }

    public var description: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        bytes.withUnsafeBytes { _ = inet_ntop(bytes.count == 4 ? AF_INET : AF_INET6, $0.baseAddress, &buffer, socklen_t(buffer.count)) }
        return String(cString: buffer) + "/\(prefix)"
    }

    /// The bytes of an IPv4 or IPv6 address in text (libc's `inet_pton`), or nil.
    static func address(_ text: String) -> [UInt8]? {
        var v4 = in_addr(), v6 = in6_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }

    static func masked(_ bytes: [UInt8], _ prefix: Int) -> [UInt8] {
        bytes.enumerated().map { i, byte in
            let keep = max(0, min(8, prefix - i * 8))
            return keep == 8 ? byte : byte & ~(UInt8(0xFF) >> keep)
        }
    }

    /// Parses a comma-separated list; throws naming the first entry that is not a network.
    public static func list(_ text: String, variable: String) throws(ConfigError) -> [IPNetwork] {
        try text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }.map { entry throws(ConfigError) in
            guard let network = IPNetwork(entry) else {
                throw ConfigError(variable: variable, problem: "\(entry) is not an IP address or a CIDR network (such as 10.0.0.0/8)")
            }
            return network
        }
    }
}

/// Who a request comes from. A connection from a trusted proxy (`REDEEM_TRUSTED_PROXIES`) may
/// name the client it forwards, in the one header the operator names (`REDEEM_TRUSTED_PROXY_HEADER`:
/// `x-forwarded-for` by default, or `forwarded` for RFC 7239's `for=`); any other header is never
/// read, since a proxy that sets one passes the others on from the client untouched. Any other
/// connection is its own client, whatever its headers say. The hops are read from the right (each
/// proxy appends the address it received from): the first that is not a trusted proxy is the
/// client, so a client cannot choose its address by sending the header itself.
public enum ClientAddress {
    /// The header read by default: the one nginx, HAProxy, Envoy and the cloud load balancers append to.
    public static let defaultHeader = "x-forwarded-for"

    /// `header` is the lowercased name of the header to read.
    public static func resolve(peer: String, headers: [String: String], trusted: [IPNetwork], header: String = defaultHeader) -> String {
        guard !trusted.isEmpty, isTrusted(peer, trusted), let value = headers[header] else { return peer }
        let hops = header == "forwarded" ? forwardedFor(value) : value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        var client = peer
        for hop in hops.reversed() {
            // Not an address ("unknown", an obfuscated name, garbage): the hop that reported it is
            // the last one known.
            guard IPNetwork.address(hop) != nil else { return client }
            client = hop
            if !isTrusted(hop, trusted) { return hop }
        }
        return client
    }

    /// Checks a header name from the configuration (`REDEEM_TRUSTED_PROXY_HEADER`) and answers it
    /// lowercased, as requests' headers are looked up.
    public static func headerName(_ text: String, variable: String) throws(ConfigError) -> String {
        let name = text.trimmingCharacters(in: .whitespaces).lowercased()
        let token = Set("abcdefghijklmnopqrstuvwxyz0123456789!#$%&'*+-.^_`|~")
        guard !name.isEmpty, name.count <= 64, name.allSatisfy(token.contains) else {
            throw ConfigError(variable: variable, problem: "\(text) is not a header name (such as x-forwarded-for or forwarded)")
        }
        return name
    }

    static func isTrusted(_ address: String, _ trusted: [IPNetwork]) -> Bool {
        guard let bytes = IPNetwork.address(address) else { return false }
        return trusted.contains { $0.contains(bytes: bytes) }
    }

    /// The `for=` values of a `Forwarded` header, in order: `for=192.0.2.1`, `for="[2001:db8::1]:8080"`.
    static func forwardedFor(_ header: String) -> [String] {
        header.split(separator: ",").compactMap { element in
            for pair in element.split(separator: ";") {
                let kv = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                guard kv.count == 2, kv[0].lowercased() == "for" else { continue }
                var value = kv[1]
                if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = String(value.dropFirst().dropLast()) }
                if value.hasPrefix("[") {
                    // [v6] or [v6]:port
                    guard let close = value.firstIndex(of: "]") else { return value }
                    return String(value[value.index(after: value.startIndex)..<close])
                }
                // v4 or v4:port (a bare v6 is not allowed unquoted and bracketed, but is taken as it is)
                if value.filter({ $0 == ":" }).count == 1, let colon = value.firstIndex(of: ":") { return String(value[..<colon]) }
                return value
            }
            return nil
        }
    }
}
