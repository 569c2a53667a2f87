import Core
import Foundation

/// A JSON Web Signature in compact serialisation (RFC 7515 §7.1): three base64url segments,
/// `header.payload.signature`, as Apple's signed data and API tokens are written. This only
/// splits and decodes; which algorithm and key are acceptable is the caller's to decide.
public struct CompactJWS: Sendable {
    /// The decoded header and payload (JSON), and the signature bytes.
    public let header: [UInt8]
    public let payload: [UInt8]
    public let signature: [UInt8]
    /// What the signature covers: the first two segments, as sent.
    public let signingInput: [UInt8]

    /// The largest text accepted: a notification holds two nested JWS, each with three certificates.
    public static let maximumLength = 256 * 1024

    public init?(_ text: String) {
        // Split on the bytes: a String split walks grapheme clusters.
        let bytes = Array(text.utf8)
        guard bytes.count <= Self.maximumLength else { return nil }
        let dots = bytes.indices.filter { bytes[$0] == UInt8(ascii: ".") }
        guard dots.count == 2,
              let header = Base64URL.decode(bytes: bytes[..<dots[0]]),
              let payload = Base64URL.decode(bytes: bytes[(dots[0] + 1)..<dots[1]]),
              let signature = Base64URL.decode(bytes: bytes[(dots[1] + 1)...]) else { return nil }
        self.header = header
        self.payload = payload
        self.signature = signature
        signingInput = Array(bytes[..<dots[1]])
    }

    /// Signs `header` and `payload` (JSON, as they are to be sent) with an ES256 key.
    public static func sign(header: Data, payload: Data, key: ES256Key) -> String? {
        let input = Base64URL.encode(header) + "." + Base64URL.encode(payload)
        return key.sign(Array(input.utf8)).map { input + "." + Base64URL.encode($0) }
    }

    /// Whether `key` made the signature (ES256).
    public func isSigned(by key: ES256Key) -> Bool { key.verify(signature, of: signingInput) }
}
