internal import CCrypto
import Foundation

/// AES-256-GCM (NIST SP 800-38D) from libcrypto: a 256-bit key, a random 96-bit nonce per message
/// and a 128-bit tag. A sealed message is `nonce ‖ ciphertext ‖ tag`; `aad` is authenticated but
/// not encrypted, and must be given again to open it.
public enum AESGCM {
    public static let keySize = 32
    public static let nonceSize = 12
    public static let tagSize = 16

    /// Encrypts and authenticates `plaintext` under `key` (32 bytes) with a fresh random nonce.
    public static func seal(_ plaintext: [UInt8], key: [UInt8], aad: [UInt8] = []) -> [UInt8] {
        seal(plaintext, key: key, nonce: Crypto.randomBytes(nonceSize), aad: aad)
    }

    /// With a given nonce, for the known-answer tests only: a nonce must never repeat under a key.
    static func seal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8], aad: [UInt8]) -> [UInt8] {
        precondition(key.count == keySize && nonce.count == nonceSize, "AES-256-GCM needs a 32-byte key and a 12-byte nonce")
        var tag = [UInt8](repeating: 0, count: tagSize)
        guard let ciphertext = crypt(plaintext, key: key, nonce: nonce, aad: aad, tag: &tag, encrypt: true) else {
            preconditionFailure("AES-256-GCM encryption failed")
        }
        return nonce + ciphertext + tag
    }

    /// The plaintext of a sealed message, or nil when it was not sealed under this key and `aad`
    /// or was altered.
    public static func open(_ sealed: [UInt8], key: [UInt8], aad: [UInt8] = []) -> [UInt8]? {
        precondition(key.count == keySize, "AES-256-GCM needs a 32-byte key")
        guard sealed.count >= nonceSize + tagSize else { return nil }
        var tag = Array(sealed[(sealed.count - tagSize)...])
        return crypt(Array(sealed[nonceSize..<(sealed.count - tagSize)]), key: key, nonce: Array(sealed[..<nonceSize]), aad: aad,
                     tag: &tag, encrypt: false)
    }

    /// One pass of libcrypto's cipher interface either way: encrypting writes the tag into `tag`;
    /// decrypting checks it (in Final), and nothing is answered unless it matches.
    private static func crypt(_ input: [UInt8], key: [UInt8], nonce: [UInt8], aad: [UInt8], tag: inout [UInt8], encrypt: Bool) -> [UInt8]? {
        guard let ctx = EVP_CIPHER_CTX_new() else { preconditionFailure("EVP_CIPHER_CTX_new failed") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: input.count + tagSize)
        var ok = key.withUnsafeBufferPointer { k in
            nonce.withUnsafeBufferPointer { n in EVP_CipherInit_ex(ctx, EVP_aes_256_gcm(), nil, k.baseAddress, n.baseAddress, encrypt ? 1 : 0) }
        } == 1
        var length: Int32 = 0
        if ok, !aad.isEmpty {
            ok = aad.withUnsafeBufferPointer { EVP_CipherUpdate(ctx, nil, &length, $0.baseAddress, Int32($0.count)) } == 1
        }
        var written = 0
        if ok, !input.isEmpty {
            ok = out.withUnsafeMutableBufferPointer { o in
                input.withUnsafeBufferPointer { i in EVP_CipherUpdate(ctx, o.baseAddress, &length, i.baseAddress, Int32(i.count)) }
            } == 1
            written = Int(length)
        }
        if ok, !encrypt {
            ok = tag.withUnsafeMutableBufferPointer { EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, Int32(tagSize), $0.baseAddress) } == 1
        }
        // GCM is a stream mode: Final writes nothing; it completes the tag, or checks it.
        if ok { ok = out.withUnsafeMutableBufferPointer { EVP_CipherFinal_ex(ctx, $0.baseAddress! + written, &length) } > 0 }
        written += Int(length)
        if ok, encrypt {
            ok = tag.withUnsafeMutableBufferPointer { EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, Int32(tagSize), $0.baseAddress) } == 1
        }
        guard ok, written == input.count else { return nil }
        return Array(out[..<input.count])
    }
}
