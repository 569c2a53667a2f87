import Foundation
import Testing

@testable import Core
@testable import GatewayService
@testable import HTTP

/// `REDEEM_CORS_ORIGINS` as the gateway reads it, and what it answers (the stack test drives the
/// same over HTTP: GatewayEdgeTests).
@Suite struct CORSPolicyTests {
    @Test func readsOriginsAndRefusesWhatIsNoOrigin() throws {
        let policy = try CORSPolicy(setting: " https://App.Example.com , http://localhost:5173,")
        #expect(policy.origins == ["https://app.example.com", "http://localhost:5173"])
        #expect(try CORSPolicy(setting: "").origins.isEmpty)
        for bad in [
            "*", "app.example.com", "https://app.example.com/path", "ftp://app.example.com",
            "https://user@app.example.com"
        ] {
            #expect(throws: ConfigError.self, "\(bad)") { try CORSPolicy(setting: bad) }
        }
    }

    @Test func answersAPreflightOnlyWhenOn() {
        let request = HTTPRequest(
            method: "OPTIONS", path: "/v1/coupons", query: [:],
            headers: ["origin": "https://app.example.com", "access-control-request-method": "POST"], requestId: "r",
            clientAddress: "127.0.0.1")
        #expect(CORSPolicy(origins: []).preflight(request) == nil, "off: routed as before (405)")
        let answer = CORSPolicy(origins: ["https://app.example.com"]).preflight(request)
        #expect(answer?.status == 204)
        #expect(answer?.headers.contains { $0 == ("Access-Control-Allow-Origin", "https://app.example.com") } == true)
        let stranger = CORSPolicy(origins: ["https://other.example.com"]).preflight(request)
        #expect(
            stranger?.status == 204 && stranger?.headers.contains { $0.0 == "Access-Control-Allow-Origin" } == false)
    }
}

/// An error's `type`, by status and code, as docs/errors.md's table sorts them.
@Suite struct ErrorTypeTests {
    @Test(arguments: [
        (401, "invalidToken", ErrorType.authentication), (403, "forbidden", .permission),
        (429, "rateLimited", .rateLimit),
        (500, "internal", .api), (503, "unavailable", .api), (504, "timeout", .api), (422, "exhausted", .refused),
        (422, "notFound", .refused), (404, "notFound", .invalidRequest), (422, "invalid", .invalidRequest),
        (409, "codeInUse", .invalidRequest), (400, "malformedJson", .invalidRequest)
    ])
    func typeFollowsStatusAndCode(status: Int, code: String, type: ErrorType) {
        #expect(ErrorType(status: status, code: code) == type)
    }

    @Test func everyErrorAnswerCarriesItsTypeAndDocument() throws {
        let response = HTTPResponse.error(HTTPError(409, "codeInUse", "taken", field: "code"))
        let body = try JSONDecoder().decode(ErrorBody.self, from: response.body)
        #expect(body.error.type == .invalidRequest)
        #expect(body.error.docUrl == ErrorBody.errorsDocument + "#codeinuse")
        #expect(String(decoding: response.body, as: UTF8.self).contains(#""type":"invalid_request""#))
    }
}
