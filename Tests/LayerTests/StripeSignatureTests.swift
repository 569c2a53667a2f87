import Cryptography
import Foundation
import TestSupport
import Testing

/// Stripe's webhook signature (`StripeSignature`), checked against headers the fake Stripe signs
/// as Stripe does: a real one passes, with several `v1` values and a rolled secret; a forged,
/// stale, future or malformed one is refused with its machine code.
@Suite struct StripeSignatureTests {
    let secret = "whsec_test_3f9a1c0b2d4e6f8a"
    let payload = Data(#"{"id":"evt_1","type":"checkout.session.completed"}"#.utf8)
    let now = Date(timeIntervalSince1970: 1_790_000_000)

    func refusal(_ header: String?, secrets: [String]? = nil, body: Data? = nil) -> StripeSignature.Failure? {
        do {
            try StripeSignature.verify(payload: body ?? payload, header: header, secrets: secrets ?? [secret], now: now)
            return nil
        } catch {
            return error
        }
    }

    @Test func stripesOwnHeaderPasses() throws {
        let header = FakeStripe.signature(payload, secret: secret, time: now.addingTimeInterval(-30))
        let at = try StripeSignature.verify(payload: payload, header: header, secrets: [secret], now: now)
        #expect(at == now.addingTimeInterval(-30))
        #expect(
            StripeSignature.header(payload: payload, secrets: [secret], time: now.addingTimeInterval(-30)) == header)
    }

    @Test func anyOfSeveralSignaturesAndSecretsMatches() {
        let rolled = FakeStripe.signature(payload, secret: "whsec_old", time: now, extra: [secret])
        #expect(refusal(rolled) == nil, "the second v1 is this endpoint's")
        let oldSecretHere = FakeStripe.signature(payload, secret: "whsec_old", time: now)
        #expect(refusal(oldSecretHere, secrets: ["whsec_new", "whsec_old"]) == nil)
    }

    @Test func forgedStaleAndMalformedAreRefused() {
        #expect(refusal(FakeStripe.signature(payload, secret: "whsec_someone_else", time: now)) == .forged)
        let changed = Data(#"{"id":"evt_1","type":"checkout.session.expired"}"#.utf8)
        #expect(refusal(FakeStripe.signature(payload, secret: secret, time: now), body: changed) == .forged)
        #expect(refusal(FakeStripe.signature(payload, secret: secret, time: now.addingTimeInterval(-301))) == .stale)
        #expect(refusal(FakeStripe.signature(payload, secret: secret, time: now.addingTimeInterval(301))) == .stale)
        #expect(refusal(FakeStripe.signature(payload, secret: secret, time: now.addingTimeInterval(-299))) == nil)
        #expect(refusal(nil) == .malformed)
        #expect(refusal("v1=00") == .malformed)
        #expect(refusal("t=\(Int(now.timeIntervalSince1970))") == .malformed)
        #expect(refusal("t=abc,v1=" + String(repeating: "0", count: 64)) == .malformed)
        #expect(refusal("t=\(Int(now.timeIntervalSince1970)),v1=" + String(repeating: "0", count: 64)) == .forged)
        #expect(StripeSignature.Failure.forged.code == "invalidSignature")
        #expect(StripeSignature.Failure.stale.code == "staleSignature")
    }
}
