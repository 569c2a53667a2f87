import Foundation
import RedeemKit
import Testing

/// Sessions over a stubbed gateway: single-flight refresh, a lost refresh answer, sign-in and
/// sign-out through the token store, errors with the server's code, message and request id,
/// timeouts and cancellation.
@Suite struct SessionTests {
    /// A gateway whose refresh takes a while and hands out `access-2`; entitlements accept only it.
    static func refreshingServer(delay: TimeInterval = 0.2) -> StubServer {
        StubServer { r in
            switch (r.method, r.path) {
            case ("POST", "/v1/sessions/refresh"):
                return .delayed(delay, .json(200, Fixture.auth(access: "access-2", refresh: "refresh-2")))
            case ("GET", "/v1/me/entitlements"):
                guard r.authorization == "Bearer access-2" else { return .json(401, Fixture.error("invalidToken", "the token is not valid")) }
                return .json(200, Fixture.entitlements)
            default:
                return .json(404, Fixture.error("routeNotFound", "no such route"))
            }
        }
    }

    @Test func manyCallsFindingAnExpiredTokenMakeOneRefresh() async throws {
        let server = Self.refreshingServer()
        let store = try Fixture.signedInStore(expiresIn: -60)
        let client = server.client(store: store)
        let results = try await withThrowingTaskGroup(of: [Entitlement].self) { group in
            for _ in 0..<25 { group.addTask { try await client.entitlements() } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 25)
        #expect(results.allSatisfy { $0.first?.entitlementId == "pro" })
        let refreshes = server.requests("POST", "/v1/sessions/refresh")
        #expect(refreshes.count == 1)
        #expect(refreshes.first?.json["refreshToken"] as? String == "refresh-1")
        #expect(server.requests("GET", "/v1/me/entitlements").allSatisfy { $0.authorization == "Bearer access-2" })
        // The rotated pair is what the store now holds: a relaunch uses it.
        let stored = try #require(try store.data(forKey: "redeemkit.session"))
        #expect(String(decoding: stored, as: UTF8.self).contains("refresh-2"))
    }

    @Test func manyCallsRefusedAsInvalidTokenMakeOneRefresh() async throws {
        let server = Self.refreshingServer()
        // Not expired by the clock, but the server refuses it (revoked signing key, clock skew).
        let client = server.client(store: try Fixture.signedInStore(expiresIn: 600))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<20 { group.addTask { _ = try await client.entitlements() } }
            try await group.waitForAll()
        }
        #expect(server.requests("POST", "/v1/sessions/refresh").count == 1)
        #expect(server.requests("GET", "/v1/me/entitlements").filter { $0.authorization == "Bearer access-2" }.count == 20)
    }

    @Test func aLostRefreshAnswerIsRetriedWithTheSameToken() async throws {
        let attempts = Counter()
        let server = StubServer { r in
            switch r.path {
            case "/v1/sessions/refresh":
                // The first answer is lost on the way; the grace window answers the retry.
                return attempts.next() == 1 ? .drop : .json(200, Fixture.auth(access: "access-2", refresh: "refresh-2"))
            default:
                return .json(200, Fixture.entitlements)
            }
        }
        let client = server.client(store: try Fixture.signedInStore(expiresIn: -1))
        #expect(try await client.entitlements().count == 1)
        let refreshes = server.requests("POST", "/v1/sessions/refresh")
        #expect(refreshes.count == 2)
        #expect(refreshes.allSatisfy { $0.json["refreshToken"] as? String == "refresh-1" })
    }

    @Test func aRefusedRefreshSignsOut() async throws {
        let server = StubServer { _ in .json(401, Fixture.error("invalidToken", "the refresh token is not valid")) }
        let store = try Fixture.signedInStore(expiresIn: -1)
        let client = server.client(store: store)
        let error = await #expect(throws: RedeemError.self) { try await client.entitlements() }
        #expect(error?.code == .invalidToken)
        #expect(try await client.isSignedIn == false)
        #expect(try store.data(forKey: "redeemkit.session") == nil)
    }

    @Test func signUpKeepsTheSessionAndSignOutForgetsIt() async throws {
        let server = StubServer { r in
            switch (r.method, r.path) {
            case ("POST", "/v1/accounts"): .json(201, Fixture.auth(access: "access-1", refresh: "refresh-1"))
            case ("DELETE", "/v1/sessions/current"): .empty(204)
            case ("DELETE", "/v1/me"): .empty(204)
            default: .json(404, Fixture.error("routeNotFound", "no such route"))
            }
        }
        let store = MemoryTokenStore()
        let client = server.client(store: store)
        let account = try await client.signUp(email: "pilot@example.com", password: "correct horse battery", cloudkitRecordName: "_abc123")
        #expect(account.appUserId == "app-user-1")
        #expect(server.requests("POST", "/v1/accounts").first?.json["cloudkitRecordName"] as? String == "_abc123")
        // A new client over the same store (a relaunch) is signed in.
        let relaunched = server.client(store: store)
        #expect(try await relaunched.account?.id == account.id)
        await relaunched.signOut()
        #expect(server.requests("DELETE", "/v1/sessions/current").first?.authorization == "Bearer access-1")
        #expect(try store.data(forKey: "redeemkit.session") == nil)
        #expect(try await relaunched.isSignedIn == false)
    }

    @Test func deleteAccountCallsDeleteMeAndForgetsTheSession() async throws {
        let server = StubServer { r in r.path == "/v1/me" && r.method == "DELETE" ? .empty(204) : .json(404, Fixture.error("routeNotFound", "no")) }
        let store = try Fixture.signedInStore(expiresIn: 600)
        let client = server.client(store: store)
        try await client.deleteAccount()
        #expect(server.requests("DELETE", "/v1/me").first?.authorization == "Bearer access-1")
        #expect(try store.data(forKey: "redeemkit.session") == nil)
    }

    @Test func errorsCarryTheServersCodeMessageFieldAndRequestId() async throws {
        let server = StubServer { _ in
            .json(422, Fixture.error("weakPassword", "the password is too common", field: "password"), headers: ["X-Request-Id": "req-42"])
        }
        let error = await #expect(throws: RedeemError.self) {
            try await server.client().signUp(email: "a@example.com", password: "password1234")
        }
        #expect(error?.kind == .server(status: 422))
        #expect(error?.code == .weakPassword)
        #expect(error?.message == "the password is too common")
        #expect(error?.field == "password")
        #expect(error?.requestId == "req-42")
        #expect(error?.localizedDescription == "the password is too common")
    }

    @Test func aCallGivesUpAtItsTimeout() async throws {
        // An answer that would come a minute later: the call must end long before it.
        let server = StubServer { _ in .delayed(60, .json(200, Fixture.entitlements)) }
        let client = server.client(store: try Fixture.signedInStore(expiresIn: 600), timeout: 0.3)
        let started = Date()
        let error = await #expect(throws: RedeemError.self) { try await client.entitlements() }
        #expect(error?.kind == .timedOut)
        // Generous: the other suites share two cores with this one.
        #expect(Date().timeIntervalSince(started) < 20)
    }

    @Test func aCancelledCallEndsAtOnce() async throws {
        // An answer that would come a minute later: the call must end long before it.
        let server = StubServer { _ in .delayed(60, .json(200, Fixture.entitlements)) }
        let client = server.client(store: try Fixture.signedInStore(expiresIn: 600), timeout: 10)
        let started = Date()
        let task = Task { try await client.entitlements() }
        try await Task.sleep(nanoseconds: 100_000_000)
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(Date().timeIntervalSince(started) < 20)
    }
}

/// A counter shared by a stub's handler calls.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func next() -> Int {
        lock.lock()
        defer { lock.unlock() }
        value += 1
        return value
    }
}
