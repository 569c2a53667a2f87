import Core
import Foundation
import Synchronization

/// Compact JSON Web Tokens (RFC 7519) signed with EdDSA (Ed25519) or RS256. Only the algorithms
/// the verifier expects are accepted: `alg: none` or a swapped algorithm is refused.
public enum JWT {
    public struct Header: Codable, Sendable {
        public var alg: String
        public var typ: String?
        public var kid: String?
        public init(alg: String, typ: String? = "JWT", kid: String? = nil) {
            self.alg = alg
            self.typ = typ
            self.kid = kid
        }
    }

    public enum Failure: Error, Sendable, Equatable {
        case malformed, wrongAlgorithm, unknownKey, badSignature
    }

    /// One decoder for every verification (decoding with it is thread-safe; its options never change).
    /// It reads the claims itself before Foundation would (`TextJSONDecoder`).
    private static let decoder: JSONDecoder = TextJSONDecoder(dates: .foundation)

    /// Headers of tokens that verified, by their encoded segment: every token of one key carries
    /// the same header, so it is decoded once rather than per token (a `JSONDecoder` pass is as
    /// dear as half an RSA verification). Only a verified token's header is kept, so nobody can
    /// fill this with headers of their own; it stops growing at `knownHeaderLimit` (keys).
    private static let knownHeaders = Mutex<[String: Header]>([:])
    static let knownHeaderLimit = 64

    public static func algorithmName(_ a: AsymmetricKey.Algorithm) -> String { a == .ed25519 ? "EdDSA" : "RS256" }

    /// Signs `claims` with `key`; `kid` names the key for verifiers.
    public static func sign<C: Encodable>(_ claims: C, key: AsymmetricKey, kid: String?) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let header = Base64URL.encode(try encoder.encode(Header(alg: algorithmName(key.algorithm), kid: kid)))
        let payload = Base64URL.encode(try encoder.encode(claims))
        let input = Array("\(header).\(payload)".utf8)
        guard let sig = key.sign(input) else { throw Failure.badSignature }
        return "\(header).\(payload).\(Base64URL.encode(sig))"
    }

    /// Checks the signature with the key `keyFor` answers for the header's `kid` and decodes the
    /// claims. The header's algorithm must be the key's own and one of `algorithms`, so neither
    /// `alg: none` nor a token signed for another key type passes. Expiry, issuer and audience are
    /// the caller's to check (they differ per token kind).
    public static func verify<C: Decodable>(_ token: String, as: C.Type, algorithms: Set<AsymmetricKey.Algorithm>,
                                            keyFor: (String?) -> AsymmetricKey?) throws -> (Header, C) {
        // Split on the bytes: a String split walks grapheme clusters, slow for a 600-byte token.
        let bytes = Array(token.utf8)
        let dots = bytes.indices.filter { bytes[$0] == UInt8(ascii: ".") }
        guard dots.count == 2, bytes.count < 16_384,
              let payloadBytes = Base64URL.decode(bytes: bytes[(dots[0] + 1)..<dots[1]]),
              let sig = Base64URL.decode(bytes: bytes[(dots[1] + 1)...]) else { throw Failure.malformed }
        let headerSegment = String(decoding: bytes[..<dots[0]], as: UTF8.self)
        let known = knownHeaders.withLock { $0[headerSegment] }
        guard let header = known ?? decodeHeader(headerSegment) else { throw Failure.malformed }
        guard let algorithm = algorithms.first(where: { algorithmName($0) == header.alg }) else { throw Failure.wrongAlgorithm }
        guard let key = keyFor(header.kid), key.algorithm == algorithm else { throw Failure.unknownKey }
        guard key.verify(sig, of: Array(bytes[..<dots[1]])) else { throw Failure.badSignature }
        guard let claims = try? decoder.decode(C.self, from: Data(payloadBytes)) else { throw Failure.malformed }
        if known == nil {
            knownHeaders.withLock { if $0.count < knownHeaderLimit { $0[headerSegment] = header } }
        }
        return (header, claims)
    }

    private static func decodeHeader(_ segment: String) -> Header? {
        Base64URL.decode(segment).flatMap { try? decoder.decode(Header.self, from: Data($0)) }
    }

    public static func verify<C: Decodable>(_ token: String, as type: C.Type, algorithm: AsymmetricKey.Algorithm,
                                            keyFor: (String?) -> AsymmetricKey?) throws -> (Header, C) {
        try verify(token, as: type, algorithms: [algorithm], keyFor: keyFor)
    }
}
