internal import CCrypto
import Foundation

/// An X.509 certificate (libcrypto `X509`), freed with its owner. Never changed after it is
/// read, so threads may share it: OpenSSL only reads a certificate to verify with it.
public final class X509Certificate: @unchecked Sendable {
    let raw: OpaquePointer

    init(adopting raw: OpaquePointer) { self.raw = raw }

    deinit { X509_free(raw) }

    /// A certificate from DER; nil if it does not parse, or if bytes follow it.
    public convenience init?(der: [UInt8]) {
        let parsed = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            guard let start = buffer.baseAddress else { return nil }
            var cursor: UnsafePointer<UInt8>? = start
            let x509 = d2i_X509(nil, &cursor, buffer.count)
            guard cursor == start + buffer.count else {
                X509_free(x509)
                return nil
            }
            return x509
        }
        guard let parsed else {
            ERR_clear_error()
            return nil
        }
        self.init(adopting: parsed)
    }

    /// Every certificate of a file: its `BEGIN CERTIFICATE` blocks in order, or, when it has
    /// none, the whole file as one DER certificate (as Apple serves its roots, `.cer`).
    public static func all(pemOrDER data: Data) -> [X509Certificate] {
        let bytes = Array(data)
        var found: [X509Certificate] = []
        bytes.withUnsafeBytes { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return }
            defer { BIO_free(bio) }
            while let x509 = PEM_read_bio_X509(bio, nil, { _, _, _, _ in -1 }, nil) {
                found.append(X509Certificate(adopting: x509))
            }
        }
        ERR_clear_error()  // the read that ends the loop leaves "no start line" behind
        if found.isEmpty, let single = X509Certificate(der: bytes) { found.append(single) }
        return found
    }

    public var der: [UInt8] {
        guard let der = encodedDER({ i2d_X509(raw, $0) }) else { preconditionFailure("a parsed certificate always encodes") }
        return der
    }

    /// Whether the certificate carries an extension with this dotted OID, critical or not.
    public func hasExtension(oid: String) -> Bool {
        guard let object = OBJ_txt2obj(oid, 1) else {
            ERR_clear_error()
            return false
        }
        defer { ASN1_OBJECT_free(object) }
        return X509_get_ext_by_OBJ(raw, object, -1) >= 0
    }

    /// The subject's public key, when it is a P-256 key.
    public var es256PublicKey: ES256Key? { ES256Key(adopting: X509_get_pubkey(raw)) }
}

/// Trust anchors, and chain verification by libcrypto (`X509_verify_cert`) in its strict mode,
/// as Apple's library does: signatures, validity at a given time, CA constraints and key usages.
/// Revocation is not checked (that needs OCSP, online). The store is set up once and only read
/// afterwards; OpenSSL locks its own lookups, so threads may verify at the same time.
public final class X509TrustStore: @unchecked Sendable {
    /// Why a chain did not verify: libcrypto's `X509_V_ERR_…` code and its text.
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public let code: Int32
        public let reason: String
        /// A certificate of the chain was expired, or not yet valid, at the time asked about.
        public var isOutsideValidity: Bool { code == X509_V_ERR_CERT_HAS_EXPIRED || code == X509_V_ERR_CERT_NOT_YET_VALID }
        public var description: String { "X509_V_ERR \(code): \(reason)" }
    }

    private let store: OpaquePointer
    public let roots: [X509Certificate]

    /// Nil when `roots` is empty or libcrypto refuses one of them.
    public init?(roots: [X509Certificate]) {
        guard !roots.isEmpty, let store = X509_STORE_new() else { return nil }
        self.store = store
        self.roots = roots
        guard roots.allSatisfy({ X509_STORE_add_cert(store, $0.raw) == 1 }),
              X509_STORE_set_flags(store, UInt(X509_V_FLAG_X509_STRICT)) == 1 else { return nil }
    }

    deinit { X509_STORE_free(store) }

    /// Builds and checks the chain from `leaf` to one of the roots through `intermediates`
    /// (which are not trusted themselves), with validity judged at `time`. Answers the chain,
    /// leaf first and root last.
    public func verify(_ leaf: X509Certificate, intermediates: [X509Certificate], at time: Date) -> Result<[X509Certificate], Failure> {
        guard let ctx = X509_STORE_CTX_new(), let untrusted = OPENSSL_sk_new_null() else {
            preconditionFailure("libcrypto is out of memory")
        }
        defer {
            OPENSSL_sk_free(untrusted)  // the certificates stay owned by their wrappers
            X509_STORE_CTX_free(ctx)
        }
        return withExtendedLifetime((leaf, intermediates)) {
            for certificate in intermediates { _ = OPENSSL_sk_push(untrusted, UnsafeRawPointer(certificate.raw)) }
            guard X509_STORE_CTX_init(ctx, store, leaf.raw, untrusted) == 1 else { preconditionFailure("X509_STORE_CTX_init failed") }
            X509_STORE_CTX_set_time(ctx, 0, time_t(time.timeIntervalSince1970.rounded(.down)))
            guard X509_verify_cert(ctx) == 1 else {
                let code = X509_STORE_CTX_get_error(ctx)
                ERR_clear_error()
                return .failure(Failure(code: code, reason: String(cString: X509_verify_cert_error_string(Int(code)))))
            }
            // get1: the chain and a reference to each certificate in it are ours.
            guard let chain = X509_STORE_CTX_get1_chain(ctx) else { preconditionFailure("a verified context has a chain") }
            defer { OPENSSL_sk_free(chain) }
            return .success((0..<OPENSSL_sk_num(chain)).map { X509Certificate(adopting: OpaquePointer(OPENSSL_sk_value(chain, $0)!)) })
        }
    }
}
