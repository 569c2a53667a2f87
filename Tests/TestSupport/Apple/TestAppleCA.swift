import CCrypto
import Core
import Cryptography
import Foundation

/// Plays Apple's certificate authority for tests: a root, an intermediate with the extension of
/// Apple's WWDR intermediates and a signing leaf with the extension of Apple's receipt signing
/// certificates, all made at run time. Signs documents as the App Store does (ES256 by the
/// leaf, `x5c` = leaf, intermediate, root), and issues the certificates a test needs to prove
/// what is refused (expired, self-signed, without Apple's extensions, from another CA).
public final class TestAppleCA: Sendable {
    /// A certificate and the key it certifies.
    public struct Identity: Sendable {
        public let der: [UInt8]
        public let key: ES256Key
        public init(der: [UInt8], key: ES256Key) {
            self.der = der
            self.key = key
        }
        /// The certificate as `x5c` carries it: standard base64 of the DER.
        public var x5c: String { Data(der).base64EncodedString() }
    }

    public let root: Identity
    public let intermediate: Identity
    public let leaf: Identity
    /// The root certificate as PEM: what `REDEEM_APPLE_ROOT_CERTS` names.
    public let rootCertificatesFile: URL
    /// The organisation named in every certificate this CA issues.
    public let name: String
    private let directory: URL

    /// Validity of the three certificates: a year back, ten years ahead.
    public init(name: String = "Test Apple", now: Date = Date()) throws {
        let from = now.addingTimeInterval(-365 * 86_400), until = now.addingTimeInterval(10 * 365 * 86_400)
        self.name = name
        // Apple's own common names; `name` is the organisation.
        root = Self.issue("Apple Root CA - G3", name, issuer: nil, isCA: true, oids: [], from: from, until: until)
        intermediate = Self.issue("Apple Worldwide Developer Relations Certification Authority", name, issuer: root, isCA: true,
                                  oids: [AppleSignedData.intermediateOID], from: from, until: until)
        leaf = Self.issue("Prod ECC Mac App Store and iTunes Store Receipt Signing", name, issuer: intermediate, isCA: false,
                          oids: [AppleSignedData.leafOID], from: from, until: until)
        directory = try Project.temporaryDirectory("apple-ca")
        rootCertificatesFile = directory.appendingPathComponent("apple-roots.pem")
        try Data(PEM.encode(root.der, label: "CERTIFICATE").utf8).write(to: rootCertificatesFile)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// Another certificate: under `issuer`, or self-signed when it is nil, carrying `oids`
    /// (Apple's extensions, or none), valid from `from` until `until`.
    public func issue(_ subject: String, issuer: Identity?, isCA: Bool = false, oids: [String],
                      from: Date = Date().addingTimeInterval(-86_400), until: Date = Date().addingTimeInterval(86_400)) -> Identity {
        Self.issue(subject, name, issuer: issuer, isCA: isCA, oids: oids, from: from, until: until)
    }

    /// A leaf under this CA's intermediate, with Apple's leaf extension unless `appleOID` is false.
    public func issueLeaf(appleOID: Bool = true, from: Date = Date().addingTimeInterval(-86_400),
                          until: Date = Date().addingTimeInterval(86_400)) -> Identity {
        issue("Receipt Signing", issuer: intermediate, oids: appleOID ? [AppleSignedData.leafOID] : [], from: from, until: until)
    }

    /// `payload` signed as the App Store signs: ES256 by `signer` (the leaf unless told), with
    /// `chain` as `x5c` (leaf, intermediate, root unless told) and `alg` in the header.
    public func sign(json payload: Data, signer: Identity? = nil, chain: [Identity]? = nil, alg: String = "ES256") -> String {
        let signer = signer ?? leaf
        let header = ["alg": alg as Any, "x5c": (chain ?? [signer, intermediate, root]).map(\.x5c)]
        let headerJSON = try! JSONSerialization.data(withJSONObject: header, options: [.sortedKeys, .withoutEscapingSlashes])
        return CompactJWS.sign(header: headerJSON, payload: payload, key: signer.key)!
    }

    /// An Apple payload (a transaction, a notification) encoded as Apple does, then signed.
    public func sign<T: Encodable>(_ payload: T, signer: Identity? = nil, chain: [Identity]? = nil, alg: String = "ES256") -> String {
        sign(json: try! JSONEncoder.appleSignedData.encode(payload), signer: signer, chain: chain, alg: alg)
    }

    /// Issues an X.509 v3 certificate with libcrypto, with the extensions a strict verifier
    /// wants: critical basic constraints and key usage, key identifiers, and `oids` as Apple
    /// marks its own (non-critical, value ASN.1 NULL).
    static func issue(_ subject: String, _ organization: String, issuer: Identity?, isCA: Bool, oids: [String], from: Date, until: Date) -> Identity {
        let key = ES256Key.generate()
        let x509 = X509_new()!
        let issuerX509 = issuer.map { certificate in certificate.der.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_X509(nil, &cursor, buffer.count)!
        } }
        let subjectKey = key.publicKeyDER.withUnsafeBufferPointer { ccrypto_key_from_der($0.baseAddress, $0.count, 1)! }
        let signingKey = (issuer?.key ?? key).privateKeyPKCS8!.withUnsafeBufferPointer { ccrypto_key_from_der($0.baseAddress, $0.count, 0)! }
        let name = X509_NAME_new()!
        defer {
            X509_NAME_free(name)
            EVP_PKEY_free(signingKey)
            EVP_PKEY_free(subjectKey)
            X509_free(issuerX509)
            X509_free(x509)
        }
        var ok = X509_set_version(x509, 2) == 1
            && ASN1_INTEGER_set(X509_get_serialNumber(x509), Int.random(in: 1...Int(Int32.max))) == 1
            && ASN1_TIME_set(X509_getm_notBefore(x509), time_t(from.timeIntervalSince1970)) != nil
            && ASN1_TIME_set(X509_getm_notAfter(x509), time_t(until.timeIntervalSince1970)) != nil
            && X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, organization, -1, -1, 0) == 1
            && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, subject, -1, -1, 0) == 1
            && X509_set_subject_name(x509, name) == 1
            && X509_set_issuer_name(x509, issuerX509.map { X509_get_subject_name($0) } ?? name) == 1
            && X509_set_pubkey(x509, subjectKey) == 1
        var ctx = X509V3_CTX()
        X509V3_set_ctx(&ctx, issuerX509 ?? x509, x509, nil, nil, 0)
        var extensions: [(nid: Int32, value: String)] = [
            (NID_basic_constraints, isCA ? "critical,CA:TRUE" : "critical,CA:FALSE"),
            (NID_key_usage, isCA ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature"),
            (NID_subject_key_identifier, "hash"),
        ]
        if issuer != nil { extensions.append((NID_authority_key_identifier, "keyid:always")) }
        for (nid, value) in extensions where ok { ok = add(X509V3_EXT_nconf_nid(nil, &ctx, nid, value), to: x509) }
        for oid in oids where ok { ok = add(X509V3_EXT_nconf(nil, &ctx, oid, "DER:05:00"), to: x509) }
        ok = ok && X509_sign(x509, signingKey, EVP_sha256()) > 0
        let length = i2d_X509(x509, nil)
        var der = [UInt8](repeating: 0, count: Int(max(length, 0)))
        ok = ok && length > 0 && der.withUnsafeMutableBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return i2d_X509(x509, &cursor) == length
        }
        precondition(ok, "libcrypto could not issue the test certificate \(subject): \(String(cString: ERR_error_string(ERR_get_error(), nil)))")
        return Identity(der: der, key: key)
    }

    private static func add(_ ext: OpaquePointer?, to x509: OpaquePointer) -> Bool {
        guard let ext else { return false }
        defer { X509_EXTENSION_free(ext) }
        return X509_add_ext(x509, ext, -1) == 1
    }
}

/// PEM text (RFC 7468): base64 of the DER in lines of 64, between BEGIN and END lines.
public enum PEM {
    public static func encode(_ der: [UInt8], label: String) -> String {
        let base64 = Array(Data(der).base64EncodedString())
        let lines = stride(from: 0, to: base64.count, by: 64).map { String(base64[$0..<min($0 + 64, base64.count)]) }
        return (["-----BEGIN \(label)-----"] + lines + ["-----END \(label)-----"]).joined(separator: "\n") + "\n"
    }
}
