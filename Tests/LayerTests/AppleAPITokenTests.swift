import Foundation
import Testing
import TestSupport
@testable import Core
@testable import Cryptography

/// ES256 as JOSE writes it, and the bearer tokens of Apple's two APIs: their claims, their
/// life, and their reuse until shortly before they expire.
@Suite struct AppleAPITokenTests {
    /// RFC 7515, appendix A.3: somebody else's ES256 signature, so the `r ‖ s` handling is the standard's.
    @Test func verifiesTheRFC7515ES256Example() throws {
        let x = try #require(Base64URL.decode("f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU"))
        let y = try #require(Base64URL.decode("x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"))
        // SubjectPublicKeyInfo of a P-256 key: the fixed prefix, then the uncompressed point.
        let spki = CryptoTests.bytes("3059301306072a8648ce3d020106082a8648ce3d030107034200") + [0x04] + x + y
        let key = try #require(ES256Key.publicKey(der: spki))
        let token = "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
            + ".DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q"
        let jws = try #require(CompactJWS(token))
        #expect(jws.isSigned(by: key))
        #expect(String(decoding: jws.header, as: UTF8.self) == #"{"alg":"ES256"}"#)
        var tampered = jws.signature
        tampered[63] ^= 1
        #expect(!key.verify(tampered, of: jws.signingInput))
        #expect(!key.verify(Array(jws.signature.dropLast()), of: jws.signingInput))
        #expect(!ES256Key.generate().verify(jws.signature, of: jws.signingInput))
    }

    @Test func signaturesAreSixtyFourBytesAndKeysSurviveAP8File() throws {
        let key = ES256Key.generate()
        let message = Array("header.payload".utf8)
        let signature = try #require(key.sign(message))
        #expect(signature.count == 64)
        #expect(key.verify(signature, of: message))
        #expect(!key.verify(signature, of: message + [0]))
        let pem = PEM.encode(try #require(key.privateKeyPKCS8), label: "PRIVATE KEY")
        let reread = try #require(ES256Key.privateKey(pem: pem))
        #expect(key.verify(try #require(reread.sign(message)), of: message))
        #expect(reread.publicKeyDER == key.publicKeyDER)
        // A public key has no private half; other key types are not ES256 keys.
        #expect(ES256Key.publicKey(der: key.publicKeyDER)?.privateKeyPKCS8 == nil)
        let rsa = try #require(AsymmetricKey.generateRSA(bits: 2048)?.privateKeyDER)
        #expect(ES256Key.privateKey(pem: PEM.encode(rsa, label: "RSA PRIVATE KEY")) == nil)
        #expect(ES256Key.privateKey(pem: "-----BEGIN PRIVATE KEY-----\nnot base64\n-----END PRIVATE KEY-----\n") == nil)
    }

    func decode(_ token: String) throws -> (JWT.Header, AppleAPIToken.Claims, CompactJWS) {
        let jws = try #require(CompactJWS(token))
        return (try JSONDecoder().decode(JWT.Header.self, from: Data(jws.header)),
                try JSONDecoder().decode(AppleAPIToken.Claims.self, from: Data(jws.payload)), jws)
    }

    @Test func anAppStoreConnectTokenCarriesApple_sClaimsAndLivesAtMostTwentyMinutes() throws {
        let key = ES256Key.generate()
        let issuer = AppleAPIToken(api: .appStoreConnect, keyId: "2X9R4HXF34", issuerId: "57246542-96fe-1a63-e053-0824d011072a", key: key)
        let now = Date(timeIntervalSince1970: 1_800_000_000.7)
        let issued = try issuer.issue(now: now)
        let (header, claims, jws) = try decode(issued.token)
        #expect(header.alg == "ES256" && header.kid == "2X9R4HXF34" && header.typ == "JWT")
        #expect(claims == AppleAPIToken.Claims(iss: "57246542-96fe-1a63-e053-0824d011072a", iat: 1_800_000_000, exp: 1_800_000_900,
                                               aud: "appstoreconnect-v1", bid: nil))
        #expect(issued.expires == 1_800_000_900)
        #expect(jws.isSigned(by: key))
        #expect(!String(decoding: jws.payload, as: UTF8.self).contains("bid"))
        let (_, long, _) = try decode(try issuer.issue(now: now, lifetime: 3600).token)
        #expect(long.exp - long.iat! == 20 * 60)
    }

    @Test func anAppStoreServerTokenNamesTheAppAndLivesAtMostAnHour() throws {
        let issuer = AppleAPIToken(api: .appStoreServer(bundleId: "com.example.redeem"), keyId: "K", issuerId: "I", key: ES256Key.generate())
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let (_, claims, _) = try decode(try issuer.issue(now: now).token)
        #expect(claims.bid == "com.example.redeem" && claims.aud == "appstoreconnect-v1" && claims.exp == 1_800_000_900)
        let (_, long, _) = try decode(try issuer.issue(now: now, lifetime: 3 * 3600).token)
        #expect(long.exp - long.iat! == 60 * 60)
    }

    @Test func theCacheReusesATokenUntilAMinuteBeforeItExpires() throws {
        let issuer = AppleAPIToken(api: .appStoreConnect, keyId: "K", issuerId: "I", key: ES256Key.generate())
        var cache = AppleAPITokenCache(issuer: issuer, lifetime: 600, renewBefore: 60)
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        let first = try cache.token(now: t0)
        #expect(try cache.token(now: t0 + 539) == first)
        let second = try cache.token(now: t0 + 540)
        #expect(second != first)
        #expect(try decode(second).1.iat == 1_800_000_540)
        #expect(try cache.token(now: t0 + 1079) == second)
        #expect(try cache.token(now: t0 + 1080) != second)
    }

    @Test func theKeyIsReadFromAP8File() throws {
        let apiKey = try TestAppleAPIKey()
        let issuer = try AppleAPIToken(api: .appStoreConnect, keyId: apiKey.keyId, issuerId: apiKey.issuerId, privateKeyFile: apiKey.privateKeyFile.path)
        let (_, _, jws) = try decode(try issuer.issue(now: Date()).token)
        #expect(jws.isSigned(by: apiKey.key))
        #expect(throws: AppleAPIToken.Failure.unreadableKey(path: "/nonexistent/AuthKey.p8")) {
            try AppleAPIToken(api: .appStoreConnect, keyId: "K", issuerId: "I", privateKeyFile: "/nonexistent/AuthKey.p8")
        }
        let dir = try Project.temporaryDirectory("p8")
        defer { try? FileManager.default.removeItem(at: dir) }
        let rsa = dir.appendingPathComponent("AuthKey_RSA.p8")
        try Data(PEM.encode(try #require(AsymmetricKey.generateRSA(bits: 2048)?.privateKeyDER), label: "RSA PRIVATE KEY").utf8).write(to: rsa)
        #expect(throws: AppleAPIToken.Failure.unreadableKey(path: rsa.path)) {
            try AppleAPIToken(api: .appStoreConnect, keyId: "K", issuerId: "I", privateKeyFile: rsa.path)
        }
    }
}
