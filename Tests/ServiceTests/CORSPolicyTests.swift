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
