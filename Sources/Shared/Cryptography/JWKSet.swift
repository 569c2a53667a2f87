import Core
import Foundation
import FoundationNetworking
import Synchronization

/// The RSA keys of a JSON Web Key Set (RFC 7517), by key id: what Apple's and Google's identity
/// token keys are published as. Keys of other types, and keys without an id, are left out.
public enum JWKSet {
    struct Document: Decodable {
        struct Key: Decodable { var kty: String; var kid: String?; var n: String?; var e: String? }
        var keys: [Key]
    }

    public static func rsaKeys(_ data: Data) -> [String: AsymmetricKey] {
        guard let set = try? JSONDecoder().decode(Document.self, from: data) else { return [:] }
        var out: [String: AsymmetricKey] = [:]
        for k in set.keys where k.kty == "RSA" {
            guard let kid = k.kid, let n = k.n.flatMap(Base64URL.decode), let e = k.e.flatMap(Base64URL.decode),
                  let key = AsymmetricKey.rsa(n: n, e: e) else { continue }
            out[kid] = key
        }
        return out
    }
}

/// A key set read from a URL (`https://…`) or a file, kept an hour, and read again when a token
/// names a key it lacks (the issuer rotated its keys), at most once a minute. When a read fails,
/// the keys read before stay in use.
public final class JWKSource: Sendable {
    public struct Unavailable: Error, Sendable {}

    public let source: String
    private let cache = Mutex<(keys: [String: AsymmetricKey], fetchedAt: Date?)>(([:], nil))

    public init(_ source: String) { self.source = source }

    /// The keys, with the one `kid` names when the set has it (read again for it if needed).
    public func keys(for kid: String?) async throws -> [String: AsymmetricKey] {
        let keys = try await current(refresh: false)
        guard let kid, keys[kid] == nil else { return keys }
        return try await current(refresh: true)
    }

    private func current(refresh: Bool) async throws -> [String: AsymmetricKey] {
        let (cached, fetchedAt) = cache.withLock { $0 }
        if let fetchedAt {
            let age = Date().timeIntervalSince(fetchedAt)
            if (!refresh && age < 3600) || age < 60 { return cached }
        }
        let data: Data
        do {
            if source.hasPrefix("http://") || source.hasPrefix("https://"), let url = URL(string: source) {
                data = try await URLSession.shared.data(from: url).0
            } else {
                data = try Data(contentsOf: URL(fileURLWithPath: source))
            }
        } catch {
            if !cached.isEmpty { return cached }
            throw Unavailable()
        }
        let parsed = JWKSet.rsaKeys(data)
        cache.withLock { $0 = (parsed, Date()) }
        return parsed
    }

    /// The `kid` in a compact JWT's header, unverified (to pick the key to verify with).
    public static func kid(of token: String) -> String? {
        guard let first = token.split(separator: ".").first, let bytes = Base64URL.decode(first),
              let header = try? JSONDecoder().decode(JWT.Header.self, from: Data(bytes)) else { return nil }
        return header.kid
    }
}
