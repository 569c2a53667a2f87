import Core
import Foundation
import Glibc
import Runtime
import Synchronization

/// Where a webhook may be delivered: every address a URL's host resolves to must pass `refusal`
/// (https to a public address; a private or loopback one only when allowed), and the delivery
/// connects to the one address checked, so a DNS answer that changes in between cannot redirect it.
extension Webhooks {
    /// Where a delivery goes: the URL as checked, and the one address it connects to.
    struct Destination: Sendable, Equatable {
        let url: URL
        /// `https` or `http`, the only scheme the connection may use.
        let scheme: String
        /// Numeric IPv4 or IPv6 text.
        let address: String
        let port: Int
    }

    /// The rule for one address: https to a public address, always; http or https to a private or
    /// loopback one, only with `allowPrivate` (REDEEM_WEBHOOK_ALLOW_PRIVATE); plain http to a public
    /// one, never. Answers why not, or nil when the address may be used.
    static func refusal(scheme: String, address: String, allowPrivate: Bool) -> String? {
        if isPrivate(address) {
            return allowPrivate ? nil : "url resolves to a private or loopback address (\(address))"
        }
        return scheme == "https" ? nil : "url must use https to reach a public address (\(address))"
    }

    /// Checks a URL and resolves its host, once: before it is stored, and before each delivery,
    /// which then connects to the address answered here and resolves nothing again (no DNS
    /// rebinding between the check and the connect). Every address the name resolves to must pass
    /// `refusal` (a name that answers with a private address among public ones is refused, rather
    /// than trusting the order), and the first, in the resolver's order of preference, is used.
    static func destination(
        _ text: String, allowPrivate: Bool, resolve: (String) -> [String] = resolve
    ) throws -> Destination {
        let invalid = { (why: String) in ServiceError(.invalid, why, field: "url") }
        guard text.count <= 2000, let url = URL(string: text), let scheme = url.scheme?.lowercased(),
            var host = url.host, !host.isEmpty
        else {
            throw invalid("url must be an absolute https URL")
        }
        guard scheme == "https" || (allowPrivate && scheme == "http") else { throw invalid("url must use https") }
        guard url.user == nil, url.password == nil else { throw invalid("url must not carry credentials") }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let addresses = resolve(host.lowercased())
        guard let first = addresses.first else { throw invalid("url's host does not resolve") }
        if let why = addresses.lazy.compactMap({ refusal(scheme: scheme, address: $0, allowPrivate: allowPrivate) })
            .first
        {
            throw invalid(why)
        }
        return Destination(url: url, scheme: scheme, address: first, port: url.port ?? (scheme == "https" ? 443 : 80))
    }

    /// Checks a URL before it is stored (see `destination`). The host is resolved off the
    /// cooperative pool, and waited for up to `within`: a DNS server that does not answer holds
    /// `getaddrinfo` for 5 s a server, which would hold one of the pool's threads (grants' other
    /// work with it) and outlast the gateway's wait for the bus (a 504). Past `within`, the answer
    /// is `unavailable`, to try again; the lookup finishes on its own thread.
    static func checkURL(
        _ text: String, allowPrivate: Bool, within: Duration = .seconds(3),
        resolve: @escaping @Sendable (String) -> [String] = resolve
    ) async throws -> URL {
        let checked = Mutex<Result<Destination, any Error>?>(nil)
        let inTime = await Lifecycle.withDeadline(seconds: within.seconds) {
            let result = await WebhookDeliverer.offThePool {
                Result { try destination(text, allowPrivate: allowPrivate, resolve: resolve) }
            }
            checked.withLock { $0 = result }
        }
        guard inTime, let result = checked.withLock({ $0 }) else {
            throw ServiceError(
                .unavailable, "url's host did not resolve in time; try again", field: "url", retryAfter: 1)
        }
        return try result.get().url
    }

    static func resolve(_ host: String) -> [String] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &result) == 0, let first = result else { return [] }
        defer { freeaddrinfo(result) }
        var out: [String] = []
        var p: UnsafeMutablePointer<addrinfo>? = first
        while let ai = p {
            var buf = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if getnameinfo(
                ai.pointee.ai_addr, ai.pointee.ai_addrlen, &buf, socklen_t(buf.count), nil, 0, NI_NUMERICHOST) == 0
            {
                out.append(buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
            }
            p = ai.pointee.ai_next
        }
        return out
    }

    /// Whether an address (IPv4 or IPv6 text) is one a webhook must not reach: loopback, private,
    /// link-local, site-local, shared, IETF-reserved, benchmarking, multicast or unspecified, also when an IPv6 address carries such an IPv4
    /// address (mapped, compatible, NAT64, 6to4) or hides one (Teredo). Unparseable text counts as
    /// private.
    static func isPrivate(_ address: String) -> Bool {
        var v4 = in_addr()
        if inet_pton(AF_INET, address, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { isPrivate(v4: Array($0)) }
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, address, &v6) == 1 else { return true }
        let b = withUnsafeBytes(of: &v6) { Array($0) }
        let zeros = { (r: Range<Int>) in b[r].allSatisfy { $0 == 0 } }
        if zeros(0..<15) && b[15] <= 1 { return true }  // :: and ::1
        if b[0] & 0xfe == 0xfc || b[0] == 0xff { return true }  // fc00::/7, ff00::/8
        // fe80::/10 link-local, fec0::/10 (deprecated) site-local
        if b[0] == 0xfe && b[1] & 0x80 == 0x80 { return true }
        // IPv4-mapped and IPv4-compatible: the IPv4 address's rule
        if zeros(0..<10) && ((b[10] == 0xff && b[11] == 0xff) || (b[10] == 0 && b[11] == 0)) {
            return isPrivate(v4: Array(b[12..<16]))
        }
        // NAT64 64:ff9b::/96: the embedded IPv4 address's rule
        if b[0..<12] == [0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0] { return isPrivate(v4: Array(b[12..<16])) }
        if b[0..<6] == [0, 0x64, 0xff, 0x9b, 0, 1] { return true }  // local-use NAT64 64:ff9b:1::/48
        if b[0] == 0x20 && b[1] == 0x02 { return isPrivate(v4: Array(b[2..<6])) }  // 6to4 2002::/16
        if b[0..<4] == [0x20, 0x01, 0, 0] { return true }  // Teredo 2001::/32
        if b[0..<8] == [0x01, 0, 0, 0, 0, 0, 0, 0] { return true }  // discard-only 100::/64
        return false
    }

    static func isPrivate(v4 o: [UInt8]) -> Bool {
        switch (o[0], o[1]) {
        case (10, _), (127, _), (0, _): return true
        case (169, 254), (192, 168): return true
        case (192, 0) where o[2] == 0: return true  // IETF protocol assignments 192.0.0.0/24
        case (198, 18...19): return true  // benchmarking 198.18.0.0/15
        case (172, 16...31): return true
        case (100, 64...127): return true
        case (224...255, _): return true
        default: return false
        }
    }
}
