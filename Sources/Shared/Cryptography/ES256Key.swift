internal import CCrypto
import Foundation

/// A NIST P-256 key for ES256 (RFC 7518 §3.4), the algorithm of Apple's API tokens and of the
/// data the App Store signs. JOSE carries an ECDSA signature as the raw 32-byte `r` and `s`;
/// OpenSSL writes and reads DER, so `sign` and `verify` convert. Immutable after creation;
/// OpenSSL allows concurrent use of one key for signing and verifying.
public final class ES256Key: @unchecked Sendable {
    let raw: OpaquePointer

    /// Takes ownership of `key`; nil (and the key freed) unless it is a P-256 key.
    init?(adopting key: OpaquePointer?) {
        guard let key else { return nil }
        guard Self.isP256(key) else {
            EVP_PKEY_free(key)
            return nil
        }
        raw = key
    }

    deinit { EVP_PKEY_free(raw) }

    private static func isP256(_ key: OpaquePointer) -> Bool {
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_EC else { return false }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1, length < name.count else { return false }
        let group = String(decoding: name[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return group == "prime256v1" || group == "P-256"
    }

    /// A new key pair (tests, and tooling that plays Apple).
    public static func generate() -> ES256Key {
        let ctx = EVP_PKEY_CTX_new_from_name(nil, "EC", nil)
        defer { EVP_PKEY_CTX_free(ctx) }
        var key: OpaquePointer?
        guard let ctx, EVP_PKEY_keygen_init(ctx) == 1, EVP_PKEY_CTX_set_group_name(ctx, "P-256") == 1,
              EVP_PKEY_generate(ctx, &key) == 1, let made = ES256Key(adopting: key) else {
            preconditionFailure("libcrypto cannot make a P-256 key")
        }
        return made
    }

    /// A private key from PEM: PKCS#8 (`BEGIN PRIVATE KEY`, what Apple's .p8 files hold) or SEC1
    /// (`BEGIN EC PRIVATE KEY`). An encrypted key is refused, never prompted for.
    public static func privateKey(pem: String) -> ES256Key? { ES256Key(adopting: pemKey(pem, publicHalf: false)) }

    /// A public key from PEM (`BEGIN PUBLIC KEY`).
    public static func publicKey(pem: String) -> ES256Key? { ES256Key(adopting: pemKey(pem, publicHalf: true)) }

    /// A private key from DER (PKCS#8 or SEC1).
    public static func privateKey(der: [UInt8]) -> ES256Key? { ES256Key(adopting: ccrypto_key_from_der(der, der.count, 0)) }

    /// A public key from DER (SubjectPublicKeyInfo).
    public static func publicKey(der: [UInt8]) -> ES256Key? { ES256Key(adopting: ccrypto_key_from_der(der, der.count, 1)) }

    /// The public half as DER (SubjectPublicKeyInfo).
    public var publicKeyDER: [UInt8] {
        var out = [UInt8](repeating: 0, count: 512)
        let length = ccrypto_key_to_der(raw, 1, &out, out.count)
        precondition(length > 0, "a P-256 public key always encodes")
        return Array(out[..<length])
    }

    /// The private key as PKCS#8 DER, the body of a .p8 file; nil for a public key.
    public var privateKeyPKCS8: [UInt8]? { pkcs8DER(raw) }

    /// A JOSE ES256 signature of `message` (SHA-256): `r` then `s`, 32 bytes each.
    public func sign(_ message: [UInt8]) -> [UInt8]? {
        var der = [UInt8](repeating: 0, count: 1024)
        let length = ccrypto_sign(raw, 1, message, message.count, &der)
        guard length > 0 else { return nil }
        return Self.joseSignature(der: Array(der[..<length]))
    }

    /// Whether `signature` (JOSE: 64 bytes, `r` then `s`) is this key's signature of `message`.
    public func verify(_ signature: [UInt8], of message: [UInt8]) -> Bool {
        guard let der = Self.derSignature(jose: signature) else { return false }
        return ccrypto_verify(raw, 1, message, message.count, der, der.count) == 1
    }

    /// OpenSSL's DER `ECDSA-Sig-Value` as JOSE's fixed-width `r ‖ s`.
    static func joseSignature(der: [UInt8]) -> [UInt8]? {
        der.withUnsafeBufferPointer { buffer -> [UInt8]? in
            var cursor = buffer.baseAddress
            guard let sig = d2i_ECDSA_SIG(nil, &cursor, buffer.count) else { return nil }
            defer { ECDSA_SIG_free(sig) }
            var r = [UInt8](repeating: 0, count: 32), s = [UInt8](repeating: 0, count: 32)
            guard BN_bn2binpad(ECDSA_SIG_get0_r(sig), &r, 32) == 32, BN_bn2binpad(ECDSA_SIG_get0_s(sig), &s, 32) == 32 else { return nil }
            return r + s
        }
    }

    /// JOSE's `r ‖ s` as DER for OpenSSL; nil unless it is 64 bytes.
    static func derSignature(jose: [UInt8]) -> [UInt8]? {
        guard jose.count == 64, let sig = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(sig) }
        let r = BN_bin2bn(jose, 32, nil), s = Array(jose[32...]).withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
        guard let r, let s, ECDSA_SIG_set0(sig, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        return encodedDER { i2d_ECDSA_SIG(sig, $0) }
    }
}

/// The first key of a PEM text, private (PKCS#8, SEC1 or PKCS#1) or public (`BEGIN PUBLIC KEY`),
/// owned by the caller; nil (the error queue cleared) when there is none. An encrypted key is
/// refused, never prompted for.
func pemKey(_ pem: String, publicHalf: Bool) -> OpaquePointer? {
    let bytes = Array(pem.utf8)
    let key = bytes.withUnsafeBytes { buffer -> OpaquePointer? in
        guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
        defer { BIO_free(bio) }
        return publicHalf ? PEM_read_bio_PUBKEY(bio, nil, { _, _, _, _ in -1 }, nil) : PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in -1 }, nil)
    }
    if key == nil { ERR_clear_error() }
    return key
}

/// A private key as PKCS#8 DER; nil for a public key.
func pkcs8DER(_ key: OpaquePointer) -> [UInt8]? {
    guard let info = EVP_PKEY2PKCS8(key) else {
        ERR_clear_error()
        return nil
    }
    defer { PKCS8_PRIV_KEY_INFO_free(info) }
    return encodedDER { i2d_PKCS8_PRIV_KEY_INFO(info, $0) }
}

/// Runs one of libcrypto's `i2d_…` encoders twice: once for the length, once to write.
func encodedDER(_ i2d: (UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?) -> Int32) -> [UInt8]? {
    let length = i2d(nil)
    guard length > 0 else { return nil }
    var out = [UInt8](repeating: 0, count: Int(length))
    let written = out.withUnsafeMutableBufferPointer { buffer -> Int32 in
        var cursor = buffer.baseAddress
        return i2d(&cursor)
    }
    return written == length ? out : nil
}
