import Foundation
import Testing
import TestSupport
@testable import Core
@testable import Cryptography

/// What the App Store signs is taken only when its chain, Apple's extensions, signature, app
/// and environment are all right; each way of being wrong is refused with its own failure.
@Suite struct AppleSignedDataTests {
    static let bundleId = "com.example.redeem"
    static let appAppleId: Int64 = 1_234_567_890
    let ca: TestAppleCA
    let verifier: AppleSignedData

    init() throws {
        ca = try TestAppleCA()
        verifier = try AppleSignedData(rootCertificatesFile: ca.rootCertificatesFile.path, bundleId: Self.bundleId,
                                       appAppleId: Self.appAppleId, environments: [.production])
    }

    /// A time as Apple writes it: whole milliseconds.
    static func ms(_ date: Date) -> Date { Date(timeIntervalSince1970: (date.timeIntervalSince1970 * 1000).rounded() / 1000) }

    static func transaction(signedDate: Date? = ms(Date())) -> JWSTransactionDecodedPayload {
        var t = JWSTransactionDecodedPayload(transactionId: "2000000123456789", originalTransactionId: "2000000123456780", bundleId: bundleId,
                                             productId: "pro.monthly", purchaseDate: Date(timeIntervalSince1970: 1_760_000_000.123), environment: .production)
        t.expiresDate = Date(timeIntervalSince1970: 1_762_678_400)
        t.type = .autoRenewable
        t.offerType = .offerCode
        t.offerIdentifier = "SPRING-25 pro.monthly"
        t.offerDiscountType = .payAsYouGo
        t.appAccountToken = UUID(uuidString: "7e3fb20b-4cdb-47cc-936d-99d65f608138")
        t.price = 4990
        t.currency = "USD"
        t.storefront = "USA"
        t.transactionReason = .purchase
        t.signedDate = signedDate
        return t
    }

    func refusal(_ jws: String, by verifier: AppleSignedData? = nil, now: Date = Date()) -> AppleSignedData.Failure? {
        do {
            _ = try (verifier ?? self.verifier).verifyTransaction(jws, now: now)
            return nil
        } catch {
            return error
        }
    }

    @Test func aTransactionSignedThroughTheChainVerifiesAndDecodes() throws {
        let t = Self.transaction()
        let decoded = try verifier.verifyTransaction(ca.sign(t))
        #expect(decoded == t)
        #expect(decoded.offerType == .offerCode && decoded.price == 4990 && decoded.environment == .production)
    }

    /// Apple's field names and number formats, written by hand rather than by our encoder.
    @Test func apple_sJSONDecodesFieldByField() throws {
        let signed = Int64(Date().timeIntervalSince1970 * 1000)
        let json = """
        {"transactionId":"2000000123456789","originalTransactionId":"2000000123456780","webOrderLineItemId":"2000000012345678",
         "bundleId":"com.example.redeem","productId":"pro.monthly","subscriptionGroupIdentifier":"21345678",
         "purchaseDate":1760000000000,"originalPurchaseDate":1760000000000,"expiresDate":1762678400000,"quantity":1,
         "type":"Auto-Renewable Subscription","appAccountToken":"7e3fb20b-4cdb-47cc-936d-99d65f608138","inAppOwnershipType":"PURCHASED",
         "signedDate":\(signed),"offerType":3,"offerIdentifier":"SPRING-25","offerDiscountType":"FREE_TRIAL","offerPeriod":"P1M",
         "environment":"Production","storefront":"GBR","storefrontId":"143444","transactionReason":"PURCHASE","price":0,"currency":"GBP",
         "appTransactionId":"704289572311054300","someFieldAppAddsLater":true}
        """
        let t = try verifier.verifyTransaction(ca.sign(json: Data(json.utf8)))
        #expect(t.transactionId == "2000000123456789" && t.originalTransactionId == "2000000123456780")
        #expect(t.purchaseDate == Date(timeIntervalSince1970: 1_760_000_000) && t.expiresDate == Date(timeIntervalSince1970: 1_762_678_400))
        #expect(t.type == .autoRenewable && t.offerType == .offerCode && t.offerDiscountType == .freeTrial && t.offerPeriod == "P1M")
        #expect(t.appAccountToken == UUID(uuidString: "7E3FB20B-4CDB-47CC-936D-99D65F608138"))
        #expect(t.storefront == "GBR" && t.currency == "GBP" && t.price == 0 && t.transactionReason == .purchase)
        #expect(t.signedDate == Date(timeIntervalSince1970: Double(signed) / 1000))
    }

    @Test func aNotificationVerifiesAndSoDoesTheTransactionInsideIt() throws {
        let sender = AppleNotificationSender(ca: ca, bundleId: Self.bundleId, appAppleId: Self.appAppleId)
        let t = Self.transaction(signedDate: nil)
        let sent = sender.notification(.offerRedeemed, subtype: .initialBuy, transaction: t, signedDate: Self.ms(Date()))
        let n = try verifier.verifyNotification(sender.signedPayload(sent))
        #expect(n == sent)
        #expect(n.notificationType == .offerRedeemed && n.subtype == .initialBuy && n.data?.appAppleId == Self.appAppleId)
        let inner = try verifier.verifyTransaction(#require(n.data?.signedTransactionInfo))
        #expect(inner.transactionId == t.transactionId && inner.signedDate == sent.signedDate)
        // A type Apple adds later still decodes, and is none of the known ones.
        let later = sender.notification(.init("SOMETHING_NEW"), transaction: nil)
        #expect(try verifier.verifyNotification(sender.signedPayload(later)).notificationType.rawValue == "SOMETHING_NEW")
    }

    @Test func aForgedSignatureIsRefused() throws {
        let genuine = ca.sign(Self.transaction())
        let parts = genuine.split(separator: ".").map(String.init)
        var cheaper = Self.transaction()
        cheaper.price = 0
        let swapped = parts[0] + "." + Base64URL.encode(try JSONEncoder.appleSignedData.encode(cheaper)) + "." + parts[2]
        #expect(refusal(swapped) == .badSignature)
        // The genuine chain, signed by a key that is not the leaf's.
        let impostor = TestAppleCA.Identity(der: ca.leaf.der, key: ES256Key.generate())
        #expect(refusal(ca.sign(Self.transaction(), signer: impostor, chain: [ca.leaf, ca.intermediate, ca.root])) == .badSignature)
        var flipped = Base64URL.decode(parts[2])!
        flipped[10] ^= 1
        #expect(refusal(parts[0] + "." + parts[1] + "." + Base64URL.encode(flipped)) == .badSignature)
    }

    @Test func aChainNotRootedInTheConfiguredCAIsRefused() throws {
        let other = try TestAppleCA(name: "Impostor")
        #expect(refusal(other.sign(Self.transaction())) == .badChain)
        // Sending our root third does not help: only the configured roots are trusted.
        #expect(refusal(other.sign(Self.transaction(), chain: [other.leaf, other.intermediate, ca.root])) == .badChain)
        // And the root sent is not needed: the genuine leaf and intermediate are enough.
        #expect(refusal(ca.sign(Self.transaction(), chain: [ca.leaf, ca.intermediate, other.root])) == nil)
    }

    @Test func aSelfSignedLeafIsRefused() {
        let leaf = ca.issue("Receipt Signing", issuer: nil, oids: [AppleSignedData.leafOID])
        #expect(refusal(ca.sign(Self.transaction(), signer: leaf, chain: [leaf, ca.intermediate, ca.root])) == .badChain)
        // A leaf that is its own intermediate does not make a chain of three either.
        #expect(refusal(ca.sign(Self.transaction(), signer: leaf, chain: [leaf, leaf, ca.root])) == .badChain)
    }

    @Test func aChainOfOtherThanThreeCertificatesIsRefused() {
        #expect(refusal(ca.sign(Self.transaction(), chain: [ca.leaf, ca.intermediate])) == .badChain)
        #expect(refusal(ca.sign(Self.transaction(), chain: [ca.leaf, ca.intermediate, ca.root, ca.root])) == .badChain)
        #expect(refusal(ca.sign(Self.transaction(), chain: [])) == .badChain)
    }

    @Test func aCertificateWithoutApple_sExtensionIsRefused() {
        let plainLeaf = ca.issueLeaf(appleOID: false)
        #expect(refusal(ca.sign(Self.transaction(), signer: plainLeaf)) == .missingAppleOID)
        let plainIntermediate = ca.issue("Intermediate", issuer: ca.root, isCA: true, oids: [])
        let leaf = ca.issue("Receipt Signing", issuer: plainIntermediate, oids: [AppleSignedData.leafOID])
        #expect(refusal(ca.sign(Self.transaction(), signer: leaf, chain: [leaf, plainIntermediate, ca.root])) == .missingAppleOID)
        // Apple's extensions swapped between the two certificates are not accepted either.
        let swappedIntermediate = ca.issue("Intermediate", issuer: ca.root, isCA: true, oids: [AppleSignedData.leafOID])
        let swappedLeaf = ca.issue("Receipt Signing", issuer: swappedIntermediate, oids: [AppleSignedData.intermediateOID])
        #expect(refusal(ca.sign(Self.transaction(), signer: swappedLeaf, chain: [swappedLeaf, swappedIntermediate, ca.root])) == .missingAppleOID)
    }

    /// Validity is judged at the signing date, as Apple's library does offline.
    @Test func aLeafExpiredAtTheSigningDateIsRefusedAndOneValidThenIsNot() {
        let day: TimeInterval = 86_400, now = Date()
        let leaf = ca.issueLeaf(from: now - 10 * day, until: now - 5 * day)
        let signedNow = ca.sign(Self.transaction(signedDate: Self.ms(now)), signer: leaf)
        #expect(refusal(signedNow) == .expired)
        let signedThen = ca.sign(Self.transaction(signedDate: Self.ms(now - 7 * day)), signer: leaf)
        #expect(refusal(signedThen) == nil)
        let notYetValid = ca.sign(Self.transaction(signedDate: Self.ms(now - 12 * day)), signer: leaf)
        #expect(refusal(notYetValid) == .expired)
        // Without a signing date, the time is now (an input).
        let undated = ca.sign(Self.transaction(signedDate: nil), signer: leaf)
        #expect(refusal(undated, now: now) == .expired)
        #expect(refusal(undated, now: now - 7 * day) == nil)
    }

    @Test func anotherAlgorithmIsRefused() {
        for alg in ["HS256", "none", "ES384", "RS256"] {
            #expect(refusal(ca.sign(Self.transaction(), alg: alg)) == .badAlgorithm, "alg \(alg)")
        }
    }

    @Test func whatIsNotAJWSIsMalformed() throws {
        #expect(refusal("") == .malformed)
        #expect(refusal("a.b") == .malformed)
        #expect(refusal("not.a.jws") == .malformed)
        let t = Self.transaction()
        #expect(refusal(ca.sign(json: Data(#"{"transactionId":"1"}"#.utf8))) == .malformed)
        let garbage = TestAppleCA.Identity(der: [0x30, 0x03, 0x02, 0x01, 0x01], key: ca.leaf.key)
        #expect(refusal(ca.sign(t, signer: ca.leaf, chain: [garbage, ca.intermediate, ca.root])) == .malformed)
        let header = Base64URL.encode(Data(#"{"alg":"ES256","x5c":["%%%","%%%","%%%"]}"#.utf8))
        let jws = ca.sign(t).split(separator: ".")
        #expect(refusal(header + "." + jws[1] + "." + jws[2]) == .malformed)
    }

    @Test func anotherAppOrEnvironmentIsRefused() throws {
        var other = Self.transaction()
        other.bundleId = "com.example.other"
        #expect(refusal(ca.sign(other)) == .wrongBundle)
        var sandbox = Self.transaction()
        sandbox.environment = .sandbox
        #expect(refusal(ca.sign(sandbox)) == .wrongEnvironment)
        let both = try AppleSignedData(rootCertificatesFile: ca.rootCertificatesFile.path, bundleId: Self.bundleId,
                                       appAppleId: Self.appAppleId, environments: [.production, .sandbox])
        #expect(try both.verifyTransaction(ca.sign(sandbox)).environment == .sandbox)
    }

    @Test func aNotificationForAnotherAppBundleOrEnvironmentIsRefused() throws {
        func refusal(_ sender: AppleNotificationSender, by verifier: AppleSignedData? = nil) -> AppleSignedData.Failure? {
            do {
                _ = try (verifier ?? self.verifier).verifyNotification(sender.signedPayload(sender.notification(.subscribed, transaction: Self.transaction())))
                return nil
            } catch {
                return error
            }
        }
        #expect(refusal(AppleNotificationSender(ca: ca, bundleId: Self.bundleId, appAppleId: 999)) == .wrongApp)
        #expect(refusal(AppleNotificationSender(ca: ca, bundleId: Self.bundleId, appAppleId: nil)) == .wrongApp)
        #expect(refusal(AppleNotificationSender(ca: ca, bundleId: "com.example.other", appAppleId: Self.appAppleId)) == .wrongBundle)
        #expect(refusal(AppleNotificationSender(ca: ca, bundleId: Self.bundleId, appAppleId: Self.appAppleId, environment: .sandbox)) == .wrongEnvironment)
        // Sandbox notifications may leave the app id out.
        let sandbox = try AppleSignedData(rootCertificatesFile: ca.rootCertificatesFile.path, bundleId: Self.bundleId,
                                          appAppleId: Self.appAppleId, environments: [.sandbox])
        #expect(refusal(AppleNotificationSender(ca: ca, bundleId: Self.bundleId, appAppleId: nil, environment: .sandbox), by: sandbox) == nil)
        #expect(refusal(AppleNotificationSender(ca: ca, bundleId: Self.bundleId, appAppleId: 999, environment: .sandbox), by: sandbox) == .wrongApp)
    }

    @Test func rootsComeFromPEMWithSeveralCertificatesOrFromDER() throws {
        let other = try TestAppleCA(name: "Second")
        let dir = try Project.temporaryDirectory("apple-roots")
        defer { try? FileManager.default.removeItem(at: dir) }
        let both = dir.appendingPathComponent("roots.pem"), der = dir.appendingPathComponent("AppleRootCA-G3.cer")
        try Data((PEM.encode(ca.root.der, label: "CERTIFICATE") + PEM.encode(other.root.der, label: "CERTIFICATE")).utf8).write(to: both)
        try Data(other.root.der).write(to: der)
        let verifierOfBoth = try AppleSignedData(rootCertificatesFile: both.path, bundleId: Self.bundleId, appAppleId: Self.appAppleId, environments: [.production])
        #expect(refusal(ca.sign(Self.transaction()), by: verifierOfBoth) == nil)
        #expect(refusal(other.sign(Self.transaction()), by: verifierOfBoth) == nil)
        let verifierOfDER = try AppleSignedData(rootCertificatesFile: der.path, bundleId: Self.bundleId, appAppleId: Self.appAppleId, environments: [.production])
        #expect(refusal(other.sign(Self.transaction()), by: verifierOfDER) == nil)
        #expect(refusal(ca.sign(Self.transaction()), by: verifierOfDER) == .badChain)
    }

    @Test func aBadConfigurationFailsAtStart() throws {
        #expect(throws: AppleSignedData.ConfigurationError.noRootCertificates(path: "/nonexistent/roots.pem")) {
            try AppleSignedData(rootCertificatesFile: "/nonexistent/roots.pem", bundleId: Self.bundleId, appAppleId: Self.appAppleId, environments: [.production])
        }
        let dir = try Project.temporaryDirectory("apple-roots")
        defer { try? FileManager.default.removeItem(at: dir) }
        let empty = dir.appendingPathComponent("empty.pem")
        try Data("no certificate here\n".utf8).write(to: empty)
        #expect(throws: AppleSignedData.ConfigurationError.noRootCertificates(path: empty.path)) {
            try AppleSignedData(rootCertificatesFile: empty.path, bundleId: Self.bundleId, appAppleId: Self.appAppleId, environments: [.production])
        }
        #expect(throws: AppleSignedData.ConfigurationError.productionNeedsAppAppleId) {
            try AppleSignedData(rootCertificatesFile: ca.rootCertificatesFile.path, bundleId: Self.bundleId, appAppleId: nil, environments: [.production])
        }
        #expect(throws: Never.self) {
            try AppleSignedData(rootCertificatesFile: ca.rootCertificatesFile.path, bundleId: Self.bundleId, appAppleId: nil, environments: [.sandbox])
        }
    }
}
