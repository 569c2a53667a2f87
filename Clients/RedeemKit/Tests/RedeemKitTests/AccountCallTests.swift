import Foundation
import RedeemKit
import Testing

/// Email verification, password reset, the browser sign-in's code exchange and linking Apple:
/// each call's route, body and token, and what it does to the stored session.
@Suite struct AccountCallTests {
    static let verifiedAccount = Fixture.account().replacingOccurrences(
        of: #""createdAt""#, with: #""emailVerified":true,"createdAt""#)

    @Test func anEmailIsVerifiedWithTheMailedCode() async throws {
        let server = StubServer { r in
            switch (r.method, r.path) {
            case ("POST", "/v1/me/email/verify"): .empty(202)
            case ("POST", "/v1/accounts/email/confirm"): .empty(204)
            case ("GET", "/v1/me"):
                .json(
                    200,
                    String(Self.verifiedAccount.dropLast())
                        + #","managementUrl":"https://apps.apple.com/account/subscriptions"}"#)
            default: .json(404, Fixture.error("routeNotFound", "no such route"))
            }
        }
        let client = server.client(store: try Fixture.signedInStore(expiresIn: 600))
        try await client.requestEmailVerification()
        #expect(server.requests("POST", "/v1/me/email/verify").first?.authorization == "Bearer access-1")
        try await client.confirmEmail(code: "ev_abc")
        let confirm = try #require(server.requests("POST", "/v1/accounts/email/confirm").first)
        #expect(confirm.json["token"] as? String == "ev_abc")
        // The stored account is read again: verified, with where to manage the subscription.
        #expect(try await client.account?.emailVerified == true)
        #expect(try await client.account?.managementUrl == URL(string: "https://apps.apple.com/account/subscriptions"))
    }

    @Test func aServerWithoutMailSaysSo() async throws {
        let server = StubServer { _ in .json(403, Fixture.error("mailNotConfigured", "This server sends no mail.")) }
        let client = server.client(store: try Fixture.signedInStore(expiresIn: 600))
        let error = await #expect(throws: RedeemError.self) { try await client.requestEmailVerification() }
        #expect(error?.code == .mailNotConfigured)
        let reset = await #expect(throws: RedeemError.self) {
            try await client.requestPasswordReset(email: "pilot@example.com")
        }
        #expect(reset?.code == .mailNotConfigured)
    }

    @Test func aPasswordResetSignsIn() async throws {
        let server = StubServer { r in
            switch (r.method, r.path) {
            case ("POST", "/v1/sessions/password/reset"): .empty(202)
            case ("POST", "/v1/sessions/password/reset/confirm"):
                .json(200, Fixture.auth(access: "after-reset", refresh: "r2"))
            case ("GET", "/v1/me/entitlements"): .json(200, Fixture.entitlements)
            default: .json(404, Fixture.error("routeNotFound", "no such route"))
            }
        }
        let client = server.client()
        try await client.requestPasswordReset(email: "pilot@example.com")
        let request = try #require(server.requests("POST", "/v1/sessions/password/reset").first)
        #expect(request.json["email"] as? String == "pilot@example.com" && request.authorization == nil)
        let account = try await client.resetPassword(code: "pr_xyz", newPassword: "a much longer password")
        #expect(account.email == "pilot@example.com")
        let confirm = try #require(server.requests("POST", "/v1/sessions/password/reset/confirm").first)
        #expect(
            confirm.json["token"] as? String == "pr_xyz"
                && confirm.json["password"] as? String == "a much longer password")
        #expect(try await client.isSignedIn)
        _ = try await client.entitlements()
        #expect(server.requests("GET", "/v1/me/entitlements").first?.authorization == "Bearer after-reset")
    }

    @Test func aBrowserSignInIsFinishedWithItsCodeAndVerifier() async throws {
        let server = StubServer { r in
            r.path == "/v1/sessions/exchange"
                ? .json(200, Fixture.auth(access: "from-apple", refresh: "r3"))
                : .json(404, Fixture.error("routeNotFound", "no such route"))
        }
        let client = server.client()
        try await client.exchangeSignInCode("sic_123", codeVerifier: "verifier-abc")
        let exchange = try #require(server.requests("POST", "/v1/sessions/exchange").first)
        #expect(
            exchange.json["code"] as? String == "sic_123" && exchange.json["codeVerifier"] as? String == "verifier-abc")
        #expect(try await client.isSignedIn)

        let used = StubServer { _ in .json(401, Fixture.error("signInCodeUsed", "This sign-in code was used already."))
        }.client()
        let error = await #expect(throws: RedeemError.self) {
            try await used.exchangeSignInCode("sic_123", codeVerifier: "v")
        }
        #expect(error?.code == .signInCodeUsed)
    }

    @Test func appleIsLinkedToTheSignedInAccount() async throws {
        let linked = Fixture.account().replacingOccurrences(
            of: #"{"type":"cloudkit","recordName":"_abc123"}"#,
            with: #"{"type":"apple","email":"pilot@example.com"}"#)
        let server = StubServer { r in
            r.path == "/v1/me/apple" ? .json(200, linked) : .json(404, Fixture.error("routeNotFound", "no such route"))
        }
        let client = server.client(store: try Fixture.signedInStore(expiresIn: 600))
        let account = try await client.linkApple(identityToken: "apple.jwt")
        #expect(account.identities.contains { $0.type == "apple" })
        #expect(server.requests("POST", "/v1/me/apple").first?.json["identityToken"] as? String == "apple.jwt")
        #expect(try await client.account?.identities.contains { $0.type == "apple" } == true)
    }
}
