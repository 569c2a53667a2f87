import Foundation
import RedeemKit
import Synchronization
import Testing

/// RedeemKit proves the record names it sends: a new web auth token from the configuration's
/// `CloudKitIdentityProvider` for every call that carries one, none for calls without, and no
/// request at all when the provider fails.
@Suite struct CloudKitProofTests {
    /// Hands out `wat-1`, `wat-2`, … or fails.
    final class FakeTokens: CloudKitIdentityProvider {
        let issued = Mutex(0)
        let failing: Bool
        init(failing: Bool = false) { self.failing = failing }
        struct NoICloudAccount: Error {}
        func webAuthToken() async throws -> String {
            if failing { throw NoICloudAccount() }
            return "wat-\(issued.withLock { $0 += 1; return $0 })"
        }
    }

    static func server() -> StubServer {
        StubServer { r in
            switch (r.method, r.path) {
            case ("POST", "/v1/accounts"), ("POST", "/v1/sessions/apple"): .json(201, Fixture.auth(access: "access-1", refresh: "refresh-1"))
            case ("POST", "/v1/sessions"): .json(200, Fixture.auth(access: "access-1", refresh: "refresh-1"))
            case ("POST", "/v1/me/cloudkit"): .json(200, #"{"appUserId":"app-user-1","changed":false,"keptBecause":"alreadyThisId"}"#)
            case ("GET", "/v1/me/entitlements"): .json(200, Fixture.entitlements)
            default: .json(404, Fixture.error("routeNotFound", "no such route"))
            }
        }
    }

    static func client(_ server: StubServer, _ tokens: FakeTokens) -> RedeemClient {
        RedeemClient(configuration: .init(baseURL: server.baseURL, tokenStore: MemoryTokenStore(), platform: .ios, timeout: 5,
                                          urlSession: server.session, cloudKit: tokens))
    }

    @Test func everyRecordNameGoesWithANewWebAuthToken() async throws {
        let server = Self.server(), tokens = FakeTokens()
        let client = Self.client(server, tokens)
        try await client.signUp(email: "pilot@example.com", password: "correct horse battery", cloudkitRecordName: "_abc")
        try await client.signInWithApple(identityToken: "id-token", cloudkitRecordName: "_abc")
        _ = try await client.linkCloudKit(recordName: "_abc")
        let signUp = try #require(server.requests("POST", "/v1/accounts").first).json
        #expect(signUp["cloudkitRecordName"] as? String == "_abc")
        #expect(signUp["cloudkitWebAuthToken"] as? String == "wat-1")
        #expect(server.requests("POST", "/v1/sessions/apple").first?.json["cloudkitWebAuthToken"] as? String == "wat-2")
        let link = try #require(server.requests("POST", "/v1/me/cloudkit").first).json
        #expect(link["recordName"] as? String == "_abc")
        #expect(link["cloudkitWebAuthToken"] as? String == "wat-3", "CloudKit spends a token once: each call fetches its own")
    }

    @Test func noRecordNameNoToken() async throws {
        let server = Self.server(), tokens = FakeTokens()
        let client = Self.client(server, tokens)
        try await client.signUp(email: "pilot@example.com", password: "correct horse battery")
        #expect(server.requests("POST", "/v1/accounts").first?.json["cloudkitWebAuthToken"] == nil)
        #expect(tokens.issued.withLock { $0 } == 0)
    }

    @Test func aProviderThatFailsFailsTheCallBeforeAnyRequest() async throws {
        let server = Self.server()
        let client = Self.client(server, FakeTokens(failing: true))
        let error = await #expect(throws: RedeemError.self) {
            try await client.signUp(email: "pilot@example.com", password: "correct horse battery", cloudkitRecordName: "_abc")
        }
        #expect(error?.kind == .cloudKit)
        #expect(error?.code == .cloudKitUnavailable)
        #expect(server.requests("POST", "/v1/accounts").isEmpty)
    }
}
