import Foundation
import Testing

@testable import Cryptography

/// TOTP (RFC 6238) over libcrypto's HMAC-SHA1, against the RFC's own test vectors.
@Suite struct TOTPTests {
    static let rfcSecret = TOTP(secret: Array("12345678901234567890".utf8))

    /// RFC 6238 appendix B, the SHA1 column: 8 digits; the 6 an app shows are its last 6.
    @Test(arguments: [
        (59 as Int64, "94287082"), (1_111_111_109, "07081804"), (1_111_111_111, "14050471"),
        (1_234_567_890, "89005924"), (2_000_000_000, "69279037"), (20_000_000_000, "65353130")
    ])
    func rfc6238Vectors(time: Int64, expected: String) {
        let step = TOTP.step(at: Date(timeIntervalSince1970: Double(time)))
        #expect(Self.rfcSecret.code(step: step, digits: 8) == expected)
        #expect(Self.rfcSecret.code(step: step) == String(expected.suffix(6)))
    }

    /// A code is taken within one step either side of now, once: not for a step at or before the
    /// one last used, not from further away, not in another shape.
    @Test func aCodeWorksNearItsTimeAndOnce() {
        let now = Date(timeIntervalSince1970: 1_111_111_111)
        let step = TOTP.step(at: now)
        let code = Self.rfcSecret.code(step: step)
        #expect(Self.rfcSecret.matchingStep(code, at: now, after: 0) == step)
        #expect(
            Self.rfcSecret.matchingStep(code, at: now.addingTimeInterval(30), after: 0) == step, "a phone 30 s slow")
        #expect(Self.rfcSecret.matchingStep(code, at: now.addingTimeInterval(90), after: 0) == nil, "too far")
        #expect(Self.rfcSecret.matchingStep(code, at: now, after: step) == nil, "used already")
        #expect(Self.rfcSecret.matchingStep(" " + code.dropFirst(), at: now, after: 0) == nil)
        #expect(Self.rfcSecret.matchingStep(code + "0", at: now, after: 0) == nil)
        #expect(TOTP(secret: TOTP.newSecret()).matchingStep(code, at: now, after: 0) == nil, "another secret")
    }

    /// RFC 4648 §10's vectors, without padding; the URI apps read carries the secret so.
    @Test(arguments: [
        ("", ""), ("f", "MY"), ("fo", "MZXQ"), ("foo", "MZXW6"), ("foob", "MZXW6YQ"), ("fooba", "MZXW6YTB"),
        ("foobar", "MZXW6YTBOI")
    ])
    func base32(plain: String, encoded: String) {
        #expect(Base32.encode(Array(plain.utf8)) == encoded)
        #expect(Base32.decode(encoded) == Array(plain.utf8) && Base32.decode(encoded.lowercased()) == Array(plain.utf8))
    }

    @Test func base32RefusesOtherCharacters() {
        #expect(Base32.decode("MZXW1") == nil && Base32.decode("MZ XW") == nil)
    }

    @Test func theURIAnAppReads() {
        #expect(
            Self.rfcSecret.uri(issuer: "Redeem", account: "op@example.com")
                == "otpauth://totp/Redeem:op@example.com?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&issuer=Redeem&algorithm=SHA1&digits=6&period=30"
        )
    }
}
