import Core
import Cryptography
import Database
import Foundation
import TestSupport
import XCTest

/// `Idempotency-Key` on every POST: the same key and body answer the first answer again without
/// running, another body is 422 `idempotencyKeyReused`, a key still running is 409
/// `idempotencyKeyInUse`, and keys belong to their caller (an API key, an account); without a
/// credential, to the route and the very request (another body is another key). Answers are sealed
/// at rest, and a key is forgotten after its 24 h.
final class IdempotencyTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var minter: TokenMinter!

    override class func startSuite() throws {
        stack = try Stack()
        minter = try stack.minter()
    }

    override class func stopSuite() { stack?.stop() }

    var client: HTTPClient { Self.stack.client }
    var admin: String { Self.stack.adminKey }

    static func unique(_ prefix: String) -> String { prefix + "-" + UUID().uuidString.prefix(8).uppercased() }

    /// A POST of exactly these body bytes (a dictionary's serialization need not keep its order).
    func post(_ path: String, _ body: String, token: String, key: String?) async throws -> HTTPClient.Response {
        try await Self.post(client, path, body, token: token, key: key)
    }

    static func post(
        _ client: HTTPClient, _ path: String, _ body: String, token: String, key: String?
    ) async throws -> HTTPClient.Response {
        var headers = ["Authorization": "Bearer \(token)", "Content-Type": "application/json"]
        if let key { headers["Idempotency-Key"] = key }
        return try await client.send("POST", path, body: Data(body.utf8), headers: headers)
    }

    func newKeyBody(_ name: String) -> String { #"{"name":"\#(name)","role":"readonly","mode":"live"}"# }

    /// The ids of the API keys named `name`.
    func keys(named name: String) async throws -> [String] {
        var ids: [String] = []
        var cursor: String?
        repeat {
            let r = try await client.get(
                "/v1/api-keys?limit=100" + (cursor.map { "&cursor=\($0)" } ?? ""), token: admin)
            XCTAssertEqual(r.status, 200, r.text)
            let page = try r.json()
            for key in page["data"] as? [[String: Any]] ?? [] where key["name"] as? String == name {
                ids.append(try XCTUnwrap(key["id"] as? String))
            }
            cursor = page["nextCursor"] as? String
        } while cursor != nil
        return ids
    }

    func testTheSameKeyAndBodyAnswerTheFirstAnswerAndRunOnce() async throws {
        let name = Self.unique("idem")
        let key = UUID().uuidString
        let first = try await post("/v1/api-keys", newKeyBody(name), token: admin, key: key)
        XCTAssertEqual(first.status, 201, first.text)
        XCTAssertNil(first.header("Idempotent-Replayed"))
        let again = try await post("/v1/api-keys", newKeyBody(name), token: admin, key: key)
        XCTAssertEqual(again.status, 201, again.text)
        XCTAssertEqual(again.body, first.body, "the first answer, the same key secret and id")
        XCTAssertEqual(again.header("Idempotent-Replayed"), "true")
        XCTAssertEqual(again.header("Content-Type"), first.header("Content-Type"))
        XCTAssertNotEqual(again.header("X-Request-Id"), first.header("X-Request-Id"), "each request has its own id")
        let made = try await keys(named: name)
        XCTAssertEqual(made.count, 1, "one key created")

        // A coupon: without the key the second create would be 409 codeInUse.
        let code = Self.unique("IDEM")
        let coupon =
            #"{"code":"\#(code)","kind":"freePeriod","duration":{"unit":"month","count":1},"maxRedemptions":5}"#
        let created = try await post("/v1/coupons", coupon, token: admin, key: key + "-coupon")
        XCTAssertEqual(created.status, 201, created.text)
        let replayed = try await post("/v1/coupons", coupon, token: admin, key: key + "-coupon")
        XCTAssertEqual(replayed.status, 201, replayed.text)
        XCTAssertEqual(replayed.body, created.body)
        let plain = try await post("/v1/coupons", coupon, token: admin, key: nil)
        XCTAssertEqual(plain.errorCode, "codeInUse", "without the key it runs again")

        // A redemption: one, answered twice.
        let user = try Self.minter.user()
        let redeem = #"{"code":"\#(code)","platform":"web"}"#
        let r1 = try await post("/v1/redemptions", redeem, token: user.token, key: "redeem-1")
        XCTAssertEqual(r1.status, 201, r1.text)
        let r2 = try await post("/v1/redemptions", redeem, token: user.token, key: "redeem-1")
        XCTAssertEqual(r2.status, 201, r2.text)
        XCTAssertEqual(r2.body, r1.body)
        XCTAssertEqual(r2.header("Idempotent-Replayed"), "true")
        let got = try await client.get("/v1/coupons/\(code)", token: admin)
        XCTAssertEqual(try got.json()["remaining"] as? Int, 4, "one use taken")
    }

    func testTheSameKeyWithAnotherRequestIs422() async throws {
        let key = UUID().uuidString
        let name = Self.unique("idem")
        let first = try await post("/v1/api-keys", newKeyBody(name), token: admin, key: key)
        XCTAssertEqual(first.status, 201, first.text)
        let other = try await post("/v1/api-keys", newKeyBody(name + "-other"), token: admin, key: key)
        XCTAssertEqual(other.status, 422, other.text)
        XCTAssertEqual(other.errorCode, "idempotencyKeyReused")
        XCTAssertEqual(other.errorField, "Idempotency-Key")
        let elsewhere = try await post("/v1/webhooks", #"{"url":"https://example.com/hook"}"#, token: admin, key: key)
        XCTAssertEqual(elsewhere.errorCode, "idempotencyKeyReused", "another route is another request")
        let otherKeys = try await keys(named: name + "-other")
        XCTAssertEqual(otherKeys, [], "nothing ran")
        // An answer that is an error is kept too: the same request is answered it again.
        let bad = #"{"name":"x","role":"emperor","mode":"live"}"#
        let refused = try await post("/v1/api-keys", bad, token: admin, key: key + "-bad")
        XCTAssertEqual(refused.status, 422, refused.text)
        let refusedAgain = try await post("/v1/api-keys", bad, token: admin, key: key + "-bad")
        XCTAssertEqual(refusedAgain.body, refused.body)
        XCTAssertEqual(refusedAgain.header("Idempotent-Replayed"), "true")
    }

    func testSixteenConcurrentRequestsWithOneKeyCreateOneObject() async throws {
        let name = Self.unique("race")
        let key = UUID().uuidString
        let body = newKeyBody(name)
        let (client, admin) = (self.client, self.admin)
        let answers = try await withThrowingTaskGroup(of: HTTPClient.Response.self) { group in
            for _ in 0..<16 {
                group.addTask { try await Self.post(client, "/v1/api-keys", body, token: admin, key: key) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let created = answers.filter { $0.status == 201 }
        XCTAssertGreaterThanOrEqual(created.count, 1)
        XCTAssertEqual(Set(created.map(\.body)).count, 1, "every 201 is the one answer")
        for r in answers where r.status != 201 {
            XCTAssertEqual(r.status, 409, r.text)
            XCTAssertEqual(r.errorCode, "idempotencyKeyInUse")
            XCTAssertNotNil(r.header("Retry-After"))
        }
        let made = try await keys(named: name)
        XCTAssertEqual(made.count, 1, "one key created by 16 requests")
        let later = try await post("/v1/api-keys", body, token: admin, key: key)
        XCTAssertEqual(later.status, 201)
        XCTAssertEqual(later.body, created.first?.body)
    }

    func testKeysBelongToTheirCaller() async throws {
        let key = UUID().uuidString
        let name = Self.unique("own")
        // Two keys of one caller: two objects.
        let a = try await post("/v1/api-keys", newKeyBody(name), token: admin, key: key + "-a")
        let b = try await post("/v1/api-keys", newKeyBody(name), token: admin, key: key + "-b")
        XCTAssertEqual([a.status, b.status], [201, 201])
        XCTAssertNotEqual(a.body, b.body)
        // Another admin key with the same key and body: its own object.
        let made = try await post(
            "/v1/api-keys", #"{"name":"second admin","role":"admin","mode":"live"}"#, token: admin, key: nil)
        let secondAdmin = try XCTUnwrap(try made.json()["key"] as? String)
        let c = try await post("/v1/api-keys", newKeyBody(name), token: secondAdmin, key: key + "-a")
        XCTAssertEqual(c.status, 201, c.text)
        XCTAssertNil(c.header("Idempotent-Replayed"))
        XCTAssertNotEqual(c.body, a.body)
        let all = try await keys(named: name)
        XCTAssertEqual(all.count, 3)
        // Two accounts with one key and one body: each its own redemption.
        let code = Self.unique("OWN")
        let coupon =
            #"{"code":"\#(code)","kind":"freePeriod","duration":{"unit":"month","count":1},"maxRedemptions":5}"#
        let made2 = try await post("/v1/coupons", coupon, token: admin, key: nil)
        XCTAssertEqual(made2.status, 201, made2.text)
        let redeem = #"{"code":"\#(code)","platform":"web"}"#
        let u1 = try Self.minter.user(), u2 = try Self.minter.user()
        let r1 = try await post("/v1/redemptions", redeem, token: u1.token, key: key)
        let r2 = try await post("/v1/redemptions", redeem, token: u2.token, key: key)
        XCTAssertEqual([r1.status, r2.status], [201, 201], r2.text)
        XCTAssertNil(r2.header("Idempotent-Replayed"))
        XCTAssertNotEqual(try r1.json()["redemptionId"] as? String, try r2.json()["redemptionId"] as? String)
        let got = try await client.get("/v1/coupons/\(code)", token: admin)
        XCTAssertEqual(try got.json()["remaining"] as? Int, 3)
    }

    func testAGetIgnoresTheKeyAndALongKeyIs422() async throws {
        let key = UUID().uuidString
        let name = Self.unique("get")
        let made = try await post("/v1/api-keys", newKeyBody(name), token: admin, key: key)
        XCTAssertEqual(made.status, 201, made.text)
        let get = try await client.send(
            "GET", "/v1/api-keys?limit=1", headers: ["Authorization": "Bearer \(admin)", "Idempotency-Key": key])
        XCTAssertEqual(get.status, 200, get.text)
        XCTAssertNil(get.header("Idempotent-Replayed"))
        XCTAssertNotNil(try get.json()["data"] as? [Any], "a page, not the POST's answer")
        let long = try await post(
            "/v1/api-keys", newKeyBody(name + "-long"), token: admin, key: String(repeating: "k", count: 256))
        XCTAssertEqual(long.status, 422, long.text)
        XCTAssertEqual(long.errorField, "Idempotency-Key")
        let longest = try await post(
            "/v1/api-keys", newKeyBody(name + "-255"), token: admin, key: String(repeating: "k", count: 255))
        XCTAssertEqual(longest.status, 201, longest.text)
        // Without a credential the answer is 401, whatever the key.
        let anonymous = try await client.send(
            "POST", "/v1/api-keys", body: Data(newKeyBody(name).utf8),
            headers: ["Content-Type": "application/json", "Idempotency-Key": String(repeating: "k", count: 256)])
        XCTAssertEqual(anonymous.status, 401, anonymous.text)
        let none = try await keys(named: name + "-long")
        XCTAssertEqual(none, [])
    }

    // MARK: Routes without a credential

    /// A POST of these body bytes without a credential.
    func anonymousPost(_ path: String, _ body: String, key: String?) async throws -> HTTPClient.Response {
        var headers = ["Content-Type": "application/json"]
        if let key { headers["Idempotency-Key"] = key }
        return try await client.send("POST", path, body: Data(body.utf8), headers: headers)
    }

    static let password = "a long enough passphrase"
    static func signUpBody(_ email: String) -> String { #"{"email":"\#(email)","password":"\#(password)"}"# }
    static func email() -> String { "idem-\(UUID().uuidString.prefix(8).lowercased())@example.com" }

    /// The accounts database as its owner, which may move a key's time.
    func accountsDatabase() throws -> PGConnection {
        try PGConnection(url: try Self.stack.databaseURL(of: "accounts", owner: true))
    }

    func testASignUpRetriedWithItsKeyAnswersTheOneAccountAndKeepsNoTokenInTheClear() async throws {
        let key = UUID().uuidString
        let body = Self.signUpBody(Self.email())
        let first = try await anonymousPost("/v1/accounts", body, key: key)
        XCTAssertEqual(first.status, 201, first.text)
        XCTAssertNil(first.header("Idempotent-Replayed"))
        let again = try await anonymousPost("/v1/accounts", body, key: key)
        XCTAssertEqual(again.status, 201, again.text)
        XCTAssertEqual(again.header("Idempotent-Replayed"), "true")
        XCTAssertEqual(again.body, first.body, "the one account and session")
        // Without the key the same sign-up runs, and the email is taken: one account was made.
        let plain = try await anonymousPost("/v1/accounts", body, key: nil)
        XCTAssertEqual(plain.status, 409, plain.text)
        XCTAssertEqual(plain.errorCode, "emailInUse")

        // At rest: the answer is sealed under the secret key, so the tokens are not in the row.
        let session = try XCTUnwrap(try first.json()["session"] as? [String: Any])
        let access = try XCTUnwrap(session["accessToken"] as? String)
        let refresh = try XCTUnwrap(session["refreshToken"] as? String)
        let rows = try accountsDatabase().query(
            "SELECT scope, request_hash, response, key_id FROM accounts.idempotency_keys WHERE key = $1", [key]
        ).rows
        XCTAssertEqual(rows.count, 1)
        let row = try XCTUnwrap(rows.first)
        let scope = try row.decode("scope", as: String.self)
        XCTAssertTrue(scope.hasPrefix("anonymous:POST /v1/accounts:"), scope)
        XCTAssertFalse(scope.contains(Self.password), "the scope holds a digest, not the body")
        // Nor a plain SHA-256 of the body, against which guesses of the password could be tried.
        let plainDigest = Crypto.sha256(Data((body + "\ncookie:").utf8)).hex
        XCTAssertFalse(scope.contains(plainDigest), scope)
        let requestHash = try row.decode("request_hash", as: PGBytes.self).data
        XCTAssertNotEqual(requestHash, Data(Crypto.sha256(Data("POST /v1/accounts\n\(body)".utf8))))
        XCTAssertEqual(requestHash.count, 32)
        let stored = try row.decode("response", as: PGBytes.self).data
        // Neither as text nor as the base64 of the answer's body, which is how the answer is encoded.
        for secret in [access, refresh, Self.password, first.body.base64EncodedString()] {
            XCTAssertNil(stored.range(of: Data(secret.utf8)), "a token or the password in the clear")
        }
        let opened = try Self.stack.secretKeyring().open(
            Array(stored), keyId: try row.decodeIfPresent("key_id", as: String.self),
            context: "accounts.idempotency_keys/\(scope)/\(key)")
        let answer = try JSONDecoder().decode(Idempotency.StoredResponse.self, from: Data(opened))
        XCTAssertEqual(answer.body, first.body, "the secret key opens the answer")
    }

    func testTheSameKeyWithAnotherBodyWithoutACredentialIsAnotherRequest() async throws {
        let key = UUID().uuidString
        let (a, b) = (Self.email(), Self.email())
        let first = try await anonymousPost("/v1/accounts", Self.signUpBody(a), key: key)
        XCTAssertEqual(first.status, 201, first.text)
        let other = try await anonymousPost("/v1/accounts", Self.signUpBody(b), key: key)
        XCTAssertEqual(other.status, 201, other.text)
        XCTAssertNil(other.header("Idempotent-Replayed"))
        XCTAssertEqual((try other.json()["account"] as? [String: Any])?["email"] as? String, b, "its own account")

        // A sign-in with the key: only the same password is answered the session again.
        let signIn = #"{"email":"\#(a)","password":"\#(Self.password)"}"#
        let signedIn = try await anonymousPost("/v1/sessions", signIn, key: key)
        XCTAssertEqual(signedIn.status, 200, signedIn.text)
        let wrongPassword = #"{"email":"\#(a)","password":"not the password"}"#
        let wrong = try await anonymousPost("/v1/sessions", wrongPassword, key: key)
        XCTAssertEqual(wrong.status, 401, wrong.text)
        XCTAssertNil(wrong.header("Idempotent-Replayed"))
        XCTAssertNil(wrong.body.range(of: Data("accessToken".utf8)), "no session for another password")
        let replayed = try await anonymousPost("/v1/sessions", signIn, key: key)
        XCTAssertEqual(replayed.header("Idempotent-Replayed"), "true")
        XCTAssertEqual(replayed.body, signedIn.body)
    }

    func testAKeyIsForgottenAfterItsDay() async throws {
        let key = UUID().uuidString
        let body = Self.signUpBody(Self.email())
        let first = try await anonymousPost("/v1/accounts", body, key: key)
        XCTAssertEqual(first.status, 201, first.text)
        let db = try accountsDatabase()
        let life = try XCTUnwrap(
            try db.query(
                "SELECT extract(epoch FROM expires_at - created_at)::int AS s FROM accounts.idempotency_keys WHERE key = $1",
                [key]
            ).first)
        XCTAssertEqual(try life.decode("s", as: Int.self), 24 * 3600)
        // 25 h later, the prune forgets it, and the same request runs again: the email is taken.
        _ = try db.query(
            """
            UPDATE accounts.idempotency_keys SET created_at = created_at - interval '25 hours',
                expires_at = expires_at - interval '25 hours' WHERE key = $1
            """, [key])
        let gone = try XCTUnwrap(try db.query("SELECT accounts.idempotency_prune() AS gone").first)
        XCTAssertGreaterThanOrEqual(try gone.decode("gone", as: Int.self), 1)
        XCTAssertEqual(try db.query("SELECT 1 FROM accounts.idempotency_keys WHERE key = $1", [key]).rows.count, 0)
        let later = try await anonymousPost("/v1/accounts", body, key: key)
        XCTAssertEqual(later.status, 409, later.text)
        XCTAssertEqual(later.errorCode, "emailInUse")
        XCTAssertNil(later.header("Idempotent-Replayed"))
    }
}
