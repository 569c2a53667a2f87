internal import CCrypto
import Foundation

/// An asymmetric key (libcrypto `EVP_PKEY`), freed with its owner. Immutable after creation;
/// OpenSSL allows concurrent use of a key for signing and verifying.
public final class AsymmetricKey: @unchecked Sendable {
    public enum Algorithm: Sendable { case ed25519, rs256 }

    let raw: OpaquePointer
    public let algorithm: Algorithm
    /// RS256 only: a verification context set up once and copied for each signature.
    private let verifier: OpaquePointer?

    private init?(_ raw: OpaquePointer?, _ algorithm: Algorithm) {
        guard let raw else { return nil }
        self.raw = raw
        self.algorithm = algorithm
        verifier = algorithm == .rs256 ? ccrypto_verifier(raw) : nil
    }

    deinit {
        EVP_MD_CTX_free(verifier)
        EVP_PKEY_free(raw)
    }

    /// Takes ownership of a key read from DER; its algorithm follows from its type (RSA or Ed25519).
    private static func adopt(_ key: OpaquePointer?) -> AsymmetricKey? {
        guard let key else { return nil }
        switch ccrypto_key_kind(key) {
        case 1: return AsymmetricKey(key, .rs256)
        case 2: return AsymmetricKey(key, .ed25519)
        default:
            EVP_PKEY_free(key)
            return nil
        }
    }

    /// An Ed25519 private key from 32 secret bytes.
    public static func ed25519(privateKey bytes: [UInt8]) -> AsymmetricKey? {
        guard bytes.count == 32 else { return nil }
        return AsymmetricKey(ccrypto_ed25519_private(bytes), .ed25519)
    }

    public static func ed25519(publicKey bytes: [UInt8]) -> AsymmetricKey? {
        guard bytes.count == 32 else { return nil }
        return AsymmetricKey(ccrypto_ed25519_public(bytes), .ed25519)
    }

    /// The raw public half of an Ed25519 key.
    public var ed25519PublicKey: [UInt8]? {
        var out = [UInt8](repeating: 0, count: 32)
        return ccrypto_ed25519_public_of(raw, &out) == 1 ? out : nil
    }

    /// An RSA public key from a JWK's modulus and exponent.
    public static func rsa(n: [UInt8], e: [UInt8]) -> AsymmetricKey? {
        AsymmetricKey(ccrypto_rsa_public_from_ne(n, n.count, e, e.count), .rs256)
    }

    /// A new RSA key pair (tooling and tests: they sign tokens as an identity provider would).
    public static func generateRSA(bits: Int = 2048) -> AsymmetricKey? {
        AsymmetricKey(ccrypto_rsa_generate(UInt32(bits)), .rs256)
    }

    /// Modulus and exponent of an RSA key, big-endian.
    public var rsaComponents: (n: [UInt8], e: [UInt8])? {
        var n = [UInt8](repeating: 0, count: 1024), e = [UInt8](repeating: 0, count: 1024)
        var nlen = 0, elen = 0
        guard ccrypto_rsa_export_ne(raw, &n, &nlen, &e, &elen) == 1 else { return nil }
        return (Array(n[0..<nlen]), Array(e[0..<elen]))
    }

    /// A private key as DER (RSA keys as PKCS#1), for storage.
    public var privateKeyDER: [UInt8]? { der(publicHalf: false) }

    /// The public half as DER (SubjectPublicKeyInfo), whatever the algorithm.
    public var publicKeyDER: [UInt8]? { der(publicHalf: true) }

    /// A private key from DER (RSA or Ed25519); its algorithm follows from the key's type.
    public static func privateKey(der: [UInt8]) -> AsymmetricKey? { adopt(ccrypto_key_from_der(der, der.count, 0)) }

    public static func publicKey(der: [UInt8]) -> AsymmetricKey? { adopt(ccrypto_key_from_der(der, der.count, 1)) }

    /// A private key from PEM: PKCS#8 (`BEGIN PRIVATE KEY`, what a Google service account's key
    /// file holds) or PKCS#1 (`BEGIN RSA PRIVATE KEY`). An encrypted key is refused, never
    /// prompted for.
    public static func privateKey(pem: String) -> AsymmetricKey? { adopt(pemKey(pem, publicHalf: false)) }

    /// The private key as PKCS#8 DER (the body of a `BEGIN PRIVATE KEY` PEM); nil for a public key.
    public var privateKeyPKCS8: [UInt8]? { pkcs8DER(raw) }

    private func der(publicHalf: Bool) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: 8192)
        let len = ccrypto_key_to_der(raw, publicHalf ? 1 : 0, &out, out.count)
        return len > 0 ? Array(out[0..<len]) : nil
    }

    public func sign(_ message: [UInt8]) -> [UInt8]? {
        var sig = [UInt8](repeating: 0, count: 1024)
        let len = ccrypto_sign(raw, algorithm == .rs256 ? 1 : 0, message, message.count, &sig)
        return len > 0 ? Array(sig[0..<len]) : nil
    }

    public func verify(_ signature: [UInt8], of message: [UInt8]) -> Bool {
        if let verifier { return ccrypto_verify_from(verifier, message, message.count, signature, signature.count) == 1 }
        return ccrypto_verify(raw, algorithm == .rs256 ? 1 : 0, message, message.count, signature, signature.count) == 1
    }
}
