import Core
import Foundation

/// Verifies what the App Store signs (transactions, App Store Server Notifications V2) the way
/// Apple's app-store-server-library does offline, and decodes it.
///
/// A document is a compact JWS with `alg: ES256` and an `x5c` header of exactly three
/// certificates: leaf, intermediate, root. The leaf and intermediate must chain, in libcrypto's
/// strict mode, to one of the configured roots (the root the document sends is ignored), at
/// the document's `signedDate` (now when it has none). The leaf must carry Apple's receipt
/// signing extension (OID 1.2.840.113635.100.6.11.1) and the intermediate Apple's WWDR one
/// (1.2.840.113635.100.6.2.1). The leaf's P-256 key must have made the signature. Then the
/// bundle id, the environment and, for production notifications, the app's Apple id must be
/// the expected ones. Revocation is not checked: that needs Apple's OCSP responder, online.
public struct AppleSignedData: Sendable {
    /// Why a document was refused; every case is a 401 to whoever sent it.
    public enum Failure: Error, Sendable, Equatable {
        /// Not a compact JWS, or a header, payload or certificate that does not decode.
        case malformed
        /// A header algorithm other than ES256, or a leaf key that is not P-256.
        case badAlgorithm
        /// Not three certificates, or no chain from them to a configured root.
        case badChain
        /// A certificate of the chain was not valid at the signing date.
        case expired
        /// The leaf or the intermediate lacks Apple's extension.
        case missingAppleOID
        /// The leaf's key did not make the signature.
        case badSignature
        case wrongBundle
        case wrongEnvironment
        /// Another app's Apple id (`appAppleId`).
        case wrongApp
    }

    public enum ConfigurationError: Error, Sendable, Equatable {
        /// The root certificates file could not be read, or holds no certificate.
        case noRootCertificates(path: String)
        /// Production data names the app by its Apple id, so it must be known (as Apple's library requires).
        case productionNeedsAppAppleId
    }

    /// The extension Apple puts on the certificates that sign App Store data.
    public static let leafOID = "1.2.840.113635.100.6.11.1"
    /// The extension of Apple's WWDR intermediate certificates.
    public static let intermediateOID = "1.2.840.113635.100.6.2.1"

    public let bundleId: String
    public let appAppleId: Int64?
    /// Documents of other environments are refused; callers read which one a document is from its payload.
    public let environments: Set<AppStoreEnvironment>
    private let trust: X509TrustStore

    public init(roots: [X509Certificate], bundleId: String, appAppleId: Int64?,
                environments: Set<AppStoreEnvironment>) throws(ConfigurationError) {
        if environments.contains(.production) && appAppleId == nil { throw .productionNeedsAppAppleId }
        guard let trust = X509TrustStore(roots: roots) else { throw .noRootCertificates(path: "") }
        self.trust = trust
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.environments = environments
    }

    /// Reads the roots from a file: PEM, one or more certificates (`REDEEM_APPLE_ROOT_CERTS`),
    /// or one DER certificate as Apple serves them.
    public init(rootCertificatesFile path: String, bundleId: String, appAppleId: Int64?,
                environments: Set<AppStoreEnvironment>) throws(ConfigurationError) {
        guard let data = FileManager.default.contents(atPath: path) else { throw .noRootCertificates(path: path) }
        let roots = X509Certificate.all(pemOrDER: data)
        guard !roots.isEmpty else { throw .noRootCertificates(path: path) }
        try self.init(roots: roots, bundleId: bundleId, appAppleId: appAppleId, environments: environments)
    }

    /// A signed transaction (`signedTransactionInfo`, or what the app got from StoreKit).
    public func verifyTransaction(_ signed: String, now: Date = Date()) throws(Failure) -> JWSTransactionDecodedPayload {
        let transaction = try verified(signed, as: JWSTransactionDecodedPayload.self, now: now) { $0.signedDate }
        guard transaction.bundleId == bundleId else { throw .wrongBundle }
        guard environments.contains(transaction.environment) else { throw .wrongEnvironment }
        return transaction
    }

    /// A notification's `signedPayload`. Its `signedTransactionInfo` is a document of its own,
    /// for `verifyTransaction`.
    public func verifyNotification(_ signedPayload: String, now: Date = Date()) throws(Failure) -> ResponseBodyV2DecodedPayload {
        let notification = try verified(signedPayload, as: ResponseBodyV2DecodedPayload.self, now: now) { $0.signedDate }
        let about: (bundleId: String?, appAppleId: Int64?, environment: AppStoreEnvironment?)
        if let data = notification.data {
            about = (data.bundleId, data.appAppleId, data.environment)
        } else if let summary = notification.summary {
            about = (summary.bundleId, summary.appAppleId, summary.environment)
        } else {
            about = (nil, nil, nil)
        }
        guard about.bundleId == bundleId else { throw .wrongBundle }
        guard let environment = about.environment, environments.contains(environment) else { throw .wrongEnvironment }
        // Apple's library checks the app id in production only: sandbox notifications may lack it.
        // One that names an app, when ours is known, must name ours.
        if environment == .production || (about.appAppleId != nil && appAppleId != nil) {
            guard about.appAppleId == appAppleId else { throw .wrongApp }
        }
        return notification
    }

    private struct Header: Decodable {
        var alg: String?
        var x5c: [String]?
    }

    /// The checks every document gets, in the library's order: form, algorithm, chain (at the
    /// signing date that `signedDate` reads from the payload), Apple's extensions, signature.
    private func verified<T: Decodable>(_ text: String, as type: T.Type, now: Date,
                                        signedDate: (T) -> Date?) throws(Failure) -> T {
        let decoder = JSONDecoder.appleSignedData
        guard let jws = CompactJWS(text), let header = try? decoder.decode(Header.self, from: Data(jws.header)),
              let payload = try? decoder.decode(T.self, from: Data(jws.payload)) else { throw .malformed }
        guard header.alg == "ES256" else { throw .badAlgorithm }
        guard let x5c = header.x5c, x5c.count == 3 else { throw .badChain }
        // x5c holds standard base64 DER (RFC 7515 §4.1.6). Only the leaf and the intermediate are
        // used: the root must be one of ours, not whichever the sender put third.
        let sent = x5c.prefix(2).map { Data(base64Encoded: $0).flatMap { X509Certificate(der: Array($0)) } }
        guard let leaf = sent[0], let intermediate = sent[1] else { throw .malformed }
        switch trust.verify(leaf, intermediates: [intermediate], at: signedDate(payload) ?? now) {
        case .failure(let failure):
            throw failure.isOutsideValidity ? .expired : .badChain
        case .success(let chain):
            guard chain.count == 3 else { throw .badChain }
        }
        guard leaf.hasExtension(oid: Self.leafOID), intermediate.hasExtension(oid: Self.intermediateOID) else { throw .missingAppleOID }
        guard let key = leaf.es256PublicKey else { throw .badAlgorithm }
        guard jws.isSigned(by: key) else { throw .badSignature }
        return payload
    }
}
