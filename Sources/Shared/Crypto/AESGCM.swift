import Foundation
internal import CCrypto

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
        guard let ctx = EVP_CIPHER_CTX_new() else { preconditionFailure("EVP_CIPHER_CTX_new failed") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: plaintext.count + tagSize)
        var ok = key.withUnsafeBufferPointer { k in
            nonce.withUnsafeBufferPointer { n in EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nil, k.baseAddress, n.baseAddress) }
        } == 1
        var length: Int32 = 0
        if ok, !aad.isEmpty {
            ok = aad.withUnsafeBufferPointer { EVP_EncryptUpdate(ctx, nil, &length, $0.baseAddress, Int32($0.count)) } == 1
        }
        var written = 0
        if ok, !plaintext.isEmpty {
            ok = out.withUnsafeMutableBufferPointer { o in
                plaintext.withUnsafeBufferPointer { p in EVP_EncryptUpdate(ctx, o.baseAddress, &length, p.baseAddress, Int32(p.count)) }
            } == 1
            written = Int(length)
        }
        if ok {
            // GCM is a stream mode: Final writes nothing, it only completes the tag.
            ok = out.withUnsafeMutableBufferPointer { EVP_EncryptFinal_ex(ctx, $0.baseAddress! + written, &length) } == 1
            written += Int(length)
        }
        if ok {
            ok = written == plaintext.count
                && out.withUnsafeMutableBufferPointer { EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, Int32(tagSize), $0.baseAddress! + written) } == 1
        }
        precondition(ok, "AES-256-GCM encryption failed")
        return nonce + out
    }

    /// The plaintext of a sealed message, or nil when it was not sealed under this key and `aad`
    /// or was altered.
    public static func open(_ sealed: [UInt8], key: [UInt8], aad: [UInt8] = []) -> [UInt8]? {
        precondition(key.count == keySize, "AES-256-GCM needs a 32-byte key")
        guard sealed.count >= nonceSize + tagSize else { return nil }
        let nonce = Array(sealed[..<nonceSize])
        let ciphertext = Array(sealed[nonceSize..<(sealed.count - tagSize)])
        var tag = Array(sealed[(sealed.count - tagSize)...])
        guard let ctx = EVP_CIPHER_CTX_new() else { preconditionFailure("EVP_CIPHER_CTX_new failed") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: ciphertext.count + tagSize)
        var ok = key.withUnsafeBufferPointer { k in
            nonce.withUnsafeBufferPointer { n in EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), nil, k.baseAddress, n.baseAddress) }
        } == 1
        var length: Int32 = 0
        if ok, !aad.isEmpty {
            ok = aad.withUnsafeBufferPointer { EVP_DecryptUpdate(ctx, nil, &length, $0.baseAddress, Int32($0.count)) } == 1
        }
        var written = 0
        if ok, !ciphertext.isEmpty {
            ok = out.withUnsafeMutableBufferPointer { o in
                ciphertext.withUnsafeBufferPointer { c in EVP_DecryptUpdate(ctx, o.baseAddress, &length, c.baseAddress, Int32(c.count)) }
            } == 1
            written = Int(length)
        }
        if ok { ok = tag.withUnsafeMutableBufferPointer { EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, Int32(tagSize), $0.baseAddress) } == 1 }
        // Final checks the tag; nothing is answered unless it matches.
        if ok { ok = out.withUnsafeMutableBufferPointer { EVP_DecryptFinal_ex(ctx, $0.baseAddress! + written, &length) } > 0 }
        guard ok, written + Int(length) == ciphertext.count else { return nil }
        return Array(out[..<ciphertext.count])
    }
}
