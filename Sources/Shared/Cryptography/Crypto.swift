internal import CCrypto
import Core
import Foundation

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
        let ok = bytes.withUnsafeBufferPointer { EVP_Digest($0.baseAddress, $0.count, &out, nil, sha256Algorithm, nil) }
        precondition(ok == 1, "SHA-256 failed")
        return out
    }

    /// SHA-256 as fetched from the default provider, once: `SHA256()` and `EVP_sha256()` look it
    /// up by name on every call (a lock, a string compare, allocations), which cost twice the
    /// hashing itself for the gateway's 600-byte tokens. A fetched `EVP_MD` is immutable and may
    /// be used from any thread.
    private nonisolated(unsafe) static let sha256Algorithm: OpaquePointer? = {
        let md = EVP_MD_fetch(nil, "SHA256", nil)
        precondition(md != nil, "libcrypto has no SHA-256")
        return md
    }()

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

    /// HMAC-SHA1 (RFC 2104): what TOTP (RFC 6238) is defined with, and authenticator apps use.
    public static func hmacSHA1(key: [UInt8], _ data: some DataProtocol) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 20)
        var len: UInt32 = 20
        let bytes = Array(data)
        _ = key.withUnsafeBufferPointer { k in
            bytes.withUnsafeBufferPointer { d in
                HMAC(EVP_sha1(), k.baseAddress, Int32(k.count), d.baseAddress, d.count, &out, &len)
            }
        }
        return out
    }

    /// HKDF-SHA256 (RFC 5869): `length` bytes of key material from a secret. For a secret that is
    /// already uniformly random (a token), an empty salt is fine; `info` keeps uses apart.
    public static func hkdfSHA256(_ secret: [UInt8], salt: [UInt8] = [], info: [UInt8], length: Int = 32) -> [UInt8] {
        precondition(!secret.isEmpty && length > 0 && length <= 255 * 32, "HKDF-SHA256 needs a secret and 1 to 8160 bytes of output")
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "HKDF", nil) else { preconditionFailure("libcrypto has no HKDF") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: length)
        var outLength = length
        var ok = EVP_PKEY_derive_init(ctx) == 1 && EVP_PKEY_CTX_set_hkdf_md(ctx, EVP_sha256()) == 1
            && secret.withUnsafeBufferPointer { EVP_PKEY_CTX_set1_hkdf_key(ctx, $0.baseAddress, Int32($0.count)) } == 1
        // Empty salt and info are left unset: HKDF then uses the RFC's defaults (a zero salt, no info).
        if ok, !salt.isEmpty { ok = salt.withUnsafeBufferPointer { EVP_PKEY_CTX_set1_hkdf_salt(ctx, $0.baseAddress, Int32($0.count)) } == 1 }
        if ok, !info.isEmpty { ok = info.withUnsafeBufferPointer { EVP_PKEY_CTX_add1_hkdf_info(ctx, $0.baseAddress, Int32($0.count)) } == 1 }
        if ok { ok = out.withUnsafeMutableBufferPointer { EVP_PKEY_derive(ctx, $0.baseAddress, &outLength) } == 1 }
        precondition(ok && outLength == length, "HKDF-SHA256 failed")
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
