import Foundation
internal import CCrypto

/// Small, well-known primitives from OpenSSL's libcrypto.
public enum Crypto {
    /// Cryptographically secure random bytes.
    public static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let ok = bytes.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(count)) }
        precondition(ok == 1, "RAND_bytes failed")
        return bytes
    }

    public static func sha256(_ data: some DataProtocol) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        let bytes = Array(data)
        _ = bytes.withUnsafeBufferPointer { SHA256($0.baseAddress, $0.count, &out) }
        return out
    }

    public static func hmacSHA256(key: [UInt8], _ data: some DataProtocol) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var len: UInt32 = 32
        let bytes = Array(data)
        _ = key.withUnsafeBufferPointer { k in
            bytes.withUnsafeBufferPointer { d in
                HMAC(EVP_sha256(), k.baseAddress, Int32(k.count), d.baseAddress, d.count, &out, &len)
            }
        }
        return out
    }

    /// Compares in time independent of where the inputs differ.
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBufferPointer { x in b.withUnsafeBufferPointer { y in CRYPTO_memcmp(x.baseAddress, y.baseAddress, a.count) == 0 } }
    }

    /// A random token in URL-safe base64 without padding (`bytes` of entropy).
    public static func randomToken(bytes: Int = 32) -> String { Base64URL.encode(randomBytes(bytes)) }
}

/// Base64url without padding (RFC 7515 §2), as JWTs use it.
public enum Base64URL {
    public static func encode(_ bytes: some DataProtocol) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard !s.contains("=") else { return nil }
        while s.count % 4 != 0 { s += "=" }
        return Data(base64Encoded: s).map { Array($0) }
    }
}

extension Array where Element == UInt8 {
    public var hex: String { map { String(format: "%02x", $0) }.joined() }
}
