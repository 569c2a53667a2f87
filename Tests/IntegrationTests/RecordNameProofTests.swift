import Core
import Database
import Foundation
import TestSupport
import XCTest

/// A record name is claimed only with proof (docs/security.md): against a fake CloudKit Web
/// Services on loopback, a record name is accepted at sign-up, at Sign in with Apple and by a link
/// only with a web auth token CloudKit says is its user's; without CloudKit settings (and without
/// `REDEEM_CLOUDKIT_TRUST_CLIENT=1`) record names are refused.
final class RecordNameProofTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var bare: Stack!
    nonisolated(unsafe) static var cloudKit: FakeCloudKit!
    nonisolated(unsafe) static var apple: AppleIdentityProvider!
    nonisolated(unsafe) static var jwksDirectory: URL?
    static let clientId = "com.example.redeem.proof"

    override class func startSuite() throws {
        cloudKit = try FakeCloudKit()
        apple = AppleIdentityProvider()
        let dir = try Project.temporaryDirectory("jwks")
        jwksDirectory = dir
        let jwks = dir.appendingPathComponent("apple-jwks.json")
        try apple.jwks().write(to: jwks)
        stack = try Stack(environment: cloudKit.environmentVariables.merging(["REDEEM_APPLE_CLIENT_ID": clientId, "REDEEM_APPLE_JWKS": jwks.path]) { $1 })
        // Neither CloudKit settings nor the unsafe trust.
        bare = try Stack(environment: ["REDEEM_CLOUDKIT_TRUST_CLIENT": "0"])
    }

    override class func stopSuite() {
        stack?.stop()
        bare?.stop()
        let done = DispatchSemaphore(value: 0)
        Task { await cloudKit?.stop(); done.signal() }
        done.wait()
        if let jwksDirectory { try? FileManager.default.removeItem(at: jwksDirectory) }
    }

    override func setUp() async throws { Self.cloudKit.healthy() }

    var client: HTTPClient { Self.stack.client }
    var cloudKit: FakeCloudKit { Self.cloudKit }

    static func email() -> String { "ck-\(UUID().uuidString.prefix(8).lowercased())@example.com" }
    static func recordName() -> String { "_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased() }
    static let password = "correct horse battery"

    func signUp(_ body: [String: Any] = [:], on stack: Stack? = nil) async throws -> HTTPClient.Response {
        try await (stack ?? Self.stack).client.json("POST", "/v1/accounts", ["email": Self.email(), "password": Self.password].merging(body) { $1 })
    }

    func access(_ r: HTTPClient.Response) throws -> String { try XCTUnwrap((try r.json()["session"] as? [String: Any])?["accessToken"] as? String) }
    func appUserId(_ r: HTTPClient.Response) throws -> String { try XCTUnwrap((try r.json()["account"] as? [String: Any])?["appUserId"] as? String) }

    func owners(_ recordName: String) async throws -> Int {
        let database = try Self.stack.adminDatabaseURL()
        return try await offThePool {
            try PGConnection(url: database).query("SELECT count(*)::int AS n FROM accounts.user_ids WHERE value = $1", [recordName]).rows.first!.decode("n")
        }
    }

    func testASignUpClaimsARecordNameOnlyWithAWebAuthTokenOfItsUser() async throws {
        let victim = Self.recordName(), attacker = Self.recordName()
        let bare = try await signUp(["cloudkitRecordName": victim])
        XCTAssertEqual(bare.status, 422, bare.text)
        XCTAssertEqual(bare.errorCode, "recordNameUnproven")
        XCTAssertEqual(bare.errorField, "cloudkitRecordName")
        let othersToken = try await signUp(["cloudkitRecordName": victim, "cloudkitWebAuthToken": cloudKit.issueToken(for: attacker)])
        XCTAssertEqual(othersToken.status, 422, "the attacker's own token proves the attacker's record name, not the victim's")
        XCTAssertEqual(othersToken.errorCode, "recordNameUnproven")
        let forged = try await signUp(["cloudkitRecordName": victim, "cloudkitWebAuthToken": "wat+made-up=="])
        XCTAssertEqual(forged.status, 422)
        do { let n = try await owners(victim); XCTAssertEqual(n, 0, "nothing was written") }

        let token = cloudKit.issueToken(for: victim)
        let proven = try await signUp(["cloudkitRecordName": victim, "cloudkitWebAuthToken": token])
        XCTAssertEqual(proven.status, 201, proven.text)
        XCTAssertEqual(try appUserId(proven), victim)
        let replayed = try await signUp(["cloudkitRecordName": attacker, "cloudkitWebAuthToken": token])
        XCTAssertEqual(replayed.status, 422, "CloudKit spends a web auth token on its first use")
    }

    /// The attack of the issue: a record name seen in a dashboard or a ticket is claimed first by
    /// someone else. Without the owner's token the claim fails, and the owner links it after.
    func testAFirstClaimantWithoutProofDoesNotTakeTheOwnersRecordName() async throws {
        let owner = Self.recordName()
        let attacker = try access(try await signUp())
        let claim = try await client.json("POST", "/v1/me/cloudkit", ["recordName": owner], token: attacker)
        XCTAssertEqual(claim.status, 422, claim.text)
        XCTAssertEqual(claim.errorCode, "recordNameUnproven")
        XCTAssertEqual(claim.errorField, "recordName")
        let own = Self.recordName()
        let withOwnToken = try await client.json("POST", "/v1/me/cloudkit", ["recordName": owner, "cloudkitWebAuthToken": cloudKit.issueToken(for: own)],
                                                 token: attacker)
        XCTAssertEqual(withOwnToken.status, 422)
        do { let n = try await owners(owner); XCTAssertEqual(n, 0) }

        let victim = try access(try await signUp())
        let linked = try await client.json("POST", "/v1/me/cloudkit", ["recordName": owner, "cloudkitWebAuthToken": cloudKit.issueToken(for: owner)],
                                           token: victim)
        XCTAssertEqual(linked.status, 200, "the owner is not answered 409: \(linked.text)")
        XCTAssertEqual(try linked.json()["appUserId"] as? String, owner)
    }

    func testSignInWithAppleClaimsARecordNameOnlyWithProof() async throws {
        let record = Self.recordName()
        let identity = Self.apple.token(.init(aud: Self.clientId, sub: "ck." + UUID().uuidString.prefix(8), email: Self.email(), emailVerified: true))
        let unproven = try await client.json("POST", "/v1/sessions/apple", ["identityToken": identity, "cloudkitRecordName": record])
        XCTAssertEqual(unproven.status, 422, unproven.text)
        XCTAssertEqual(unproven.errorCode, "recordNameUnproven")
        let proven = try await client.json("POST", "/v1/sessions/apple", ["identityToken": identity, "cloudkitRecordName": record,
                                                                          "cloudkitWebAuthToken": cloudKit.issueToken(for: record)])
        XCTAssertEqual(proven.status, 201, proven.text)
        XCTAssertEqual(try appUserId(proven), record)
    }

    /// CloudKit down or throttling: 503, nothing written; the same claim goes through once it is up.
    func testCloudKitDownIsA503AndWritesNothing() async throws {
        let record = Self.recordName()
        let user = try access(try await signUp())
        for status in [503, 429] {
            cloudKit.fail(with: status)
            let r = try await client.json("POST", "/v1/me/cloudkit", ["recordName": record, "cloudkitWebAuthToken": cloudKit.issueToken(for: record)],
                                          token: user)
            XCTAssertEqual(r.status, 503, r.text)
            XCTAssertEqual(r.errorCode, "unavailable")
        }
        do { let n = try await owners(record); XCTAssertEqual(n, 0) }
        cloudKit.healthy()
        let r = try await client.json("POST", "/v1/me/cloudkit", ["recordName": record, "cloudkitWebAuthToken": cloudKit.issueToken(for: record)],
                                      token: user)
        XCTAssertEqual(r.status, 200, r.text)
    }

    /// The API token and the container travel to CloudKit, which refuses others: the fake saw
    /// every claim, and no token reached the service logs.
    func testTokensStayOutOfTheLogs() async throws {
        let record = Self.recordName()
        let token = cloudKit.issueToken(for: record)
        let before = cloudKit.requestCount
        let r = try await signUp(["cloudkitRecordName": record, "cloudkitWebAuthToken": token])
        XCTAssertEqual(r.status, 201, r.text)
        XCTAssertEqual(cloudKit.requestCount, before + 1)
        let logs = Self.stack.logs()
        XCTAssertFalse(logs.contains(cloudKit.apiToken), "the API token is in the logs")
        XCTAssertFalse(logs.contains(String(token.dropFirst(4).prefix(36))), "a web auth token is in the logs")
    }

    /// No CloudKit settings and no trust: every record name is refused, 403, and an account
    /// without one is made as before.
    func testWithoutCloudKitSettingsRecordNamesAreRefused() async throws {
        let record = Self.recordName()
        let refused = try await signUp(["cloudkitRecordName": record, "cloudkitWebAuthToken": "wat+x=="], on: Self.bare)
        XCTAssertEqual(refused.status, 403, refused.text)
        XCTAssertEqual(refused.errorCode, "cloudKitNotConfigured")
        let plain = try await signUp(on: Self.bare)
        XCTAssertEqual(plain.status, 201, plain.text)
        let link = try await Self.bare.client.json("POST", "/v1/me/cloudkit", ["recordName": record], token: try access(plain))
        XCTAssertEqual(link.status, 403, link.text)
        XCTAssertEqual(link.errorCode, "cloudKitNotConfigured")
        XCTAssertTrue(Self.bare.logs().contains("record names are refused"))
    }
}
