import Foundation
import RedeemKit
import Testing

/// Server error codes are a closed set with `unknown(_:)`: each known one reads as its case and
/// back, a code a newer server adds still reads, and the message, status and field stay with it.
@Suite struct ErrorCodeTests {
    /// Which kind of case a code is, to tell apart cases that `==` (by spelling) would not.
    static func shape(_ code: RedeemErrorCode) -> String {
        switch code {
        case .refused(let reason): "refused \(reason.rawValue)"
        case .http(let status): "http \(status)"
        case .unknown(let raw): "unknown \(raw)"
        default: "named"
        }
    }

    @Test func everyCodeReadsAsItsCaseAndBack() {
        let known: [RedeemErrorCode] = [
            .invalidToken, .weakPassword, .mailNotConfigured, .signInCodeUsed, .appleIdInUse, .internal,
            .idempotencyKeyReused, .idempotencyKeyInUse, .refused(.exhausted), .refused(.webOnly), .http(502),
            .unknown("somethingNew")
        ]
        for code in known {
            #expect(RedeemErrorCode(rawValue: code.rawValue) == code, "\(code)")
        }
        // Read as their cases, not as `unknown`, so a switch finds them.
        for raw in [
            "invalidToken", "weakPassword", "mailNotConfigured", "internal", "notFound", "idempotencyKeyReused",
            "idempotencyKeyInUse", "methodNotAllowed", "malformedJson", "tooLarge", "unsupportedMediaType"
        ] {
            #expect(Self.shape(RedeemErrorCode(rawValue: raw)) == "named", "\(raw)")
        }
        #expect(Self.shape(RedeemErrorCode(rawValue: "webOnly")) == "refused webOnly")
        #expect(Self.shape(RedeemErrorCode(rawValue: "http502")) == "http 502")
        #expect(Self.shape(RedeemErrorCode(rawValue: "teapot")) == "unknown teapot")
        #expect(RedeemErrorCode.unknown("invalidToken") == .invalidToken, "the same spelling is the same code")
        #expect(RedeemErrorCode(rawValue: "internal") == .internal)
        #expect(RedeemErrorCode(rawValue: "webOnly") == .refused(.webOnly))
        #expect(RedeemErrorCode(rawValue: "alreadyOwned") == .refused(.alreadyOwned))
        // `notFound` is "no such thing" first; a refused redeem reads it as the refusal.
        #expect(RedeemErrorCode(rawValue: "notFound") == .notFound)
        #expect(RedeemErrorCode(rawValue: "teapot") == .unknown("teapot"))
        #expect(RedeemErrorCode(rawValue: "http") == .unknown("http"))
        #expect("\(RedeemErrorCode.refused(.notReady))" == "notReady")
    }

    @Test func anUnknownCodeKeepsItsMessageStatusFieldAndRequestId() async throws {
        let server = StubServer { _ in
            .json(
                409, Fixture.error("somethingNew", "A newer server said no.", field: "email"),
                headers: ["X-Request-Id": "req-9"])
        }
        let client = server.client()
        let error = await #expect(throws: RedeemError.self) {
            try await client.signIn(email: "a@example.com", password: "x")
        }
        #expect(error?.code == .unknown("somethingNew"))
        #expect(error?.message == "A newer server said no." && error?.status == 409 && error?.field == "email")
        #expect(error?.requestId == "req-9")
        #expect(error?.description == "somethingNew: A newer server said no. (field email) [request req-9]")
    }

    @Test func anErrorWithoutABodyIsItsStatus() async throws {
        let client = StubServer { _ in .empty(502) }.client()
        let error = await #expect(throws: RedeemError.self) {
            try await client.signIn(email: "a@example.com", password: "x")
        }
        #expect(error?.code == .http(502) && error?.status == 502)
    }

    @Test func aSwitchOverCodesNeedsNoStrings() {
        func advice(_ code: RedeemErrorCode) -> String {
            switch code {
            case .weakPassword: "Choose a longer password."
            case .refused(.webOnly): "Redeem it on the web."
            case .unknown(let raw): "Something new: \(raw)"
            default: "Try again."
            }
        }
        #expect(advice(RedeemErrorCode(rawValue: "weakPassword")) == "Choose a longer password.")
        #expect(advice(RedeemErrorCode(rawValue: "webOnly")) == "Redeem it on the web.")
        #expect(advice(RedeemErrorCode(rawValue: "brandNew")) == "Something new: brandNew")
    }
}
