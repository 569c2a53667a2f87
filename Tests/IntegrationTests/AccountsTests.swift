import Core
import Cryptography
import Foundation
import Runtime
import TestSupport
import XCTest

/// Accounts and sessions through the gateway over HTTP, on one stack with Sign in with Apple configured
/// against a JWKS this suite made itself.
final class AccountsTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var jwksDirectory: URL?
    nonisolated(unsafe) static var apple: AppleIdentityProvider!
    static let clientId = "com.example.redeem"
    /// The web flow's Services ID, the second audience `REDEEM_APPLE_CLIENT_ID` lists.
    static let servicesId = "com.example.redeem.web"
    /// The refresh grace window of this suite's stack: long enough that an immediate retry is
    /// inside it even on a loaded machine, short enough to wait past.
    static let refreshGrace: Double = 3
    /// Every secret the tests use, to check none reaches the logs.
    static let secrets = SecretLog()

    override class func startSuite() throws {
        apple = AppleIdentityProvider()
        let dir = try Project.temporaryDirectory("jwks")
        jwksDirectory = dir
        let jwks = dir.appendingPathComponent("apple-jwks.json")
        try apple.jwks().write(to: jwks)
        stack = try Stack(environment: ["REDEEM_APPLE_CLIENT_ID": "\(clientId), \(servicesId)", "REDEEM_APPLE_JWKS": jwks.path,
                                        "REDEEM_REFRESH_GRACE": String(Int(refreshGrace))])
    }

    override class func stopSuite() {
        let logs = stack?.logs() ?? ""
        let leaked = secrets.all.filter { logs.contains($0) }
        stack?.stop()
        if let jwksDirectory { try? FileManager.default.removeItem(at: jwksDirectory) }
        precondition(leaked.isEmpty, "secrets found in the service logs: \(leaked.map { String($0.prefix(12)) + "…" })")
    }

    var client: HTTPClient { Self.stack.client }

    // MARK: - Helpers

    static func email() -> String { "pilot-\(UUID().uuidString.prefix(8))@Example.com" }

    struct Session {
        var accountId: String, appUserId: String, access: String, refresh: String
    }

    func signUp(_ email: String = AccountsTests.email(), password: String = "correct horse battery", recordName: String? = nil) async throws -> Session {
        var body: [String: Any] = ["email": email, "password": password]
        if let recordName { body["cloudkitRecordName"] = recordName }
        let resp = try await client.json("POST", "/v1/accounts", body)
        XCTAssertEqual(resp.status, 201, resp.text)
        return try session(resp, password: password)
    }

    func session(_ resp: HTTPClient.Response, password: String? = nil) throws -> Session {
        let o = try resp.decode(AccountSessionBody.self)
        let result = Session(
            accountId: o.account.id, appUserId: try XCTUnwrap(o.account.appUserId),
            access: o.session.accessToken, refresh: try XCTUnwrap(o.session.refreshToken))
        Self.secrets.add(result.access, result.refresh)
        if let password { Self.secrets.add(password) }
        return result
    }

    // MARK: - Email and password

    func testSignUpAnswersAccountAndSessionAndMeReadsIt() async throws {
        let email = Self.email()
        let s = try await signUp(email)
        XCTAssertNotNil(UUID(uuidString: s.appUserId), "web-first accounts get a UUID appUserId")
        let me = try await client.get("/v1/me", token: s.access)
        XCTAssertEqual(me.status, 200)
        let o = try me.json()
        XCTAssertEqual(o["email"] as? String, email)
        XCTAssertEqual(o["appUserId"] as? String, s.appUserId)
        XCTAssertEqual((o["identities"] as? [[String: Any]])?.first?["type"] as? String, "email")
        // Emails are unique regardless of case.
        let again = try await client.json("POST", "/v1/accounts", ["email": email.uppercased(), "password": "another good passphrase"])
        XCTAssertEqual(again.status, 409)
        XCTAssertEqual(again.errorCode, "emailInUse")
    }

    func testWeakPasswordsAndBadEmailsAre422NamingTheField() async throws {
        for (password, why) in [("short1!", "under 10 characters"), ("password123", "common"), ("QWERTYUIOP", "common, any case")] {
            let r = try await client.json("POST", "/v1/accounts", ["email": Self.email(), "password": password])
            XCTAssertEqual(r.status, 422, why)
            XCTAssertEqual(r.errorCode, "weakPassword", why)
            XCTAssertEqual(r.errorField, "password", why)
        }
        for bad in ["no-at-sign", "a@b", "two@@example.com", "sp ace@example.com", "@example.com"] {
            let r = try await client.json("POST", "/v1/accounts", ["email": bad, "password": "correct horse battery"])
            XCTAssertEqual(r.status, 422, bad)
            XCTAssertEqual(r.errorField, "email", bad)
        }
        let missing = try await client.json("POST", "/v1/accounts", ["email": Self.email()])
        XCTAssertEqual(missing.status, 422)
        XCTAssertEqual(missing.errorField, "password")
        let notJSON = try await client.send("POST", "/v1/accounts", body: Data("{nope".utf8), headers: ["Content-Type": "application/json"])
        XCTAssertEqual(notJSON.status, 400)
        XCTAssertEqual(notJSON.errorCode, "malformedJson")
        let form = try await client.send("POST", "/v1/accounts", body: Data("email=x".utf8), headers: ["Content-Type": "application/x-www-form-urlencoded"])
        XCTAssertEqual(form.status, 415)
    }

    func testSignInRefusesUnknownEmailAndWrongPasswordAlikeInAboutTheSameTime() async throws {
        let email = Self.email()
        _ = try await signUp(email, password: "a fine long passphrase")
        let ok = try await client.json("POST", "/v1/sessions", ["email": email.lowercased(), "password": "a fine long passphrase"])
        XCTAssertEqual(ok.status, 200)
        _ = try session(ok)
        func attempt(_ e: String, _ p: String) async throws -> (HTTPClient.Response, Double) {
            let start = ContinuousClock.now
            let r = try await client.json("POST", "/v1/sessions", ["email": e, "password": p])
            return (r, (ContinuousClock.now - start).seconds)
        }
        var wrong: [Double] = [], unknown: [Double] = []
        for _ in 0..<5 {
            let (a, ta) = try await attempt(email, "not the passphrase")
            let (b, tb) = try await attempt(Self.email(), "not the passphrase")
            XCTAssertEqual(a.status, 401)
            XCTAssertEqual(b.status, 401)
            XCTAssertEqual(a.errorCode, "invalidCredentials")
            XCTAssertEqual(a.text, b.text, "the same answer for both")
            wrong.append(ta)
            unknown.append(tb)
        }
        let (mw, mu) = (wrong.sorted()[2], unknown.sorted()[2])
        // Both pay for one argon2id verification; an early return for unknown emails would be ~10x faster.
        XCTAssertGreaterThan(mu, mw * 0.5, "unknown email answered much faster (\(mu) s vs \(mw) s)")
        XCTAssertLessThan(mu, mw * 2.0, "unknown email answered much slower (\(mu) s vs \(mw) s)")
    }

    func testConcurrentSignUpsWithOneEmailMakeExactlyOneAccount() async throws {
        let email = Self.email()
        let client = self.client
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<8 {
                group.addTask {
                    try await client.json("POST", "/v1/accounts", ["email": i % 2 == 0 ? email : email.lowercased(), "password": "racing passphrase \(i)"]).status
                }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        XCTAssertEqual(statuses.filter { $0 == 201 }.count, 1, "\(statuses)")
        XCTAssertEqual(statuses.filter { $0 == 409 }.count, 7, "\(statuses)")
    }

    // MARK: - The appUserId rule

    func testIOSFirstAccountTakesItsRecordNameAsAppUserId() async throws {
        let record = "_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let s = try await signUp(recordName: record)
        XCTAssertEqual(s.appUserId, record)
        let me = try await client.get("/v1/me", token: s.access).json()
        let identities = me["identities"] as? [[String: Any]] ?? []
        XCTAssertTrue(identities.contains { $0["type"] as? String == "cloudkit" && $0["recordName"] as? String == record })
        // The same record name on another new account is taken.
        let second = try await client.json("POST", "/v1/accounts", ["email": Self.email(), "password": "correct horse battery", "cloudkitRecordName": record])
        XCTAssertEqual(second.status, 409)
        XCTAssertEqual(second.errorCode, "recordNameInUse")
    }

    func testRecordNamesRevenueCatCannotUseAre422() async throws {
        for bad in [String(repeating: "a", count: 101), "has/slash", "null", "Anonymous", "0", "-1", "[object Object]", " ", " padded", "tab\there"] {
            let r = try await client.json("POST", "/v1/accounts", ["email": Self.email(), "password": "correct horse battery", "cloudkitRecordName": bad])
            XCTAssertEqual(r.status, 422, bad)
            XCTAssertEqual(r.errorCode, "invalid", bad)
            XCTAssertEqual(r.errorField, "cloudkitRecordName", bad)
        }
        let s = try await signUp()
        let link = try await client.json("POST", "/v1/me/cloudkit", ["recordName": "a/b"], token: s.access)
        XCTAssertEqual(link.status, 422)
        XCTAssertEqual(link.errorField, "recordName")
        let ok = try await client.json("POST", "/v1/me/cloudkit", ["recordName": String(repeating: "r", count: 100)], token: s.access)
        XCTAssertEqual(ok.status, 200, "exactly 100 characters is allowed")
    }

    func testTheFirstLinkedRecordNameBecomesTheAppUserIdThenItStays() async throws {
        let s = try await signUp()  // Android/web first; under `local` the fresh id holds no store purchase
        let first = "_" + UUID().uuidString.prefix(12)
        let second = "_" + UUID().uuidString.prefix(12)
        var answers: [[String: Any]] = []
        for record in [first, second, first] {  // several names; linking again is fine
            let r = try await client.json("POST", "/v1/me/cloudkit", ["recordName": record], token: s.access)
            XCTAssertEqual(r.status, 200, r.text)
            XCTAssertEqual(try r.json()["appUserId"] as? String, first)
            answers.append(try r.json())
        }
        XCTAssertEqual(answers.map { $0["changed"] as? Bool }, [true, false, false])
        XCTAssertEqual(answers[0]["previousAppUserId"] as? String, s.appUserId)
        XCTAssertEqual(answers.map { $0["keptBecause"] as? String }, [nil, "recordNameAlready", "alreadyThisId"])
        let me = try await client.get("/v1/me", token: s.access).json()
        XCTAssertEqual(me["appUserId"] as? String, first)
        XCTAssertTrue(me["managementUrl"] is NSNull, "no store under local")
        let linked = (me["identities"] as? [[String: Any]] ?? []).compactMap { $0["recordName"] as? String }
        XCTAssertEqual(Set(linked), [first, second])
        // Another account can't link a name that is taken, as a link or as an appUserId.
        let other = try await signUp()
        for taken in [first, s.appUserId] {
            let r = try await client.json("POST", "/v1/me/cloudkit", ["recordName": taken], token: other.access)
            XCTAssertEqual(r.status, 409, taken)
            XCTAssertEqual(r.errorCode, "recordNameInUse")
        }
    }

    func testConcurrentLinksOfOneRecordNameToDifferentAccountsLetExactlyOneWin() async throws {
        var sessions: [Session] = []
        for _ in 0..<6 { sessions.append(try await signUp()) }
        let record = "_race" + UUID().uuidString.prefix(10)
        let client = self.client
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for s in sessions {
                group.addTask { try await client.json("POST", "/v1/me/cloudkit", ["recordName": record], token: s.access).status }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        XCTAssertEqual(statuses.filter { $0 == 200 }.count, 1, "\(statuses)")
        XCTAssertEqual(statuses.filter { $0 == 409 }.count, 5, "\(statuses)")
    }

    // MARK: - Sessions and tokens

    func refresh(_ token: String) async throws -> HTTPClient.Response {
        try await client.json("POST", "/v1/sessions/refresh", ["refreshToken": token])
    }

    func testARefreshTokenReusedAfterTheGraceWindowRevokesTheSession() async throws {
        let s = try await signUp()
        let r1 = try await refresh(s.refresh)
        XCTAssertEqual(r1.status, 200)
        let s1 = try session(r1)
        XCTAssertNotEqual(s1.refresh, s.refresh)
        let v1 = try await client.get("/v1/me", token: s1.access).status
        XCTAssertEqual(v1, 200)
        // Well past the window (the database's clock decides, and it has moved at least this far).
        try await Task.sleep(for: .seconds(Self.refreshGrace + 1))
        // The spent token again: refused, and the whole session is revoked.
        let replay = try await refresh(s.refresh)
        XCTAssertEqual(replay.status, 401)
        XCTAssertEqual(replay.errorCode, "invalidToken")
        let newest = try await refresh(s1.refresh)
        XCTAssertEqual(newest.status, 401, "the rotated token dies with its session")
        let revoked = try await Self.stack.eventually(2) { try await self.client.get("/v1/me", token: s1.access).status == 401 }
        XCTAssertTrue(revoked, "the session's access token still works")
        let garbage = try await refresh("rt_nope")
        XCTAssertEqual(garbage.status, 401)
    }

    /// A phone whose refresh answer was lost retries with the same token.
    func testARefreshRetriedWithinTheGraceWindowGetsTheSamePairAndTheSessionLives() async throws {
        let s = try await signUp()
        let first = try await refresh(s.refresh)
        XCTAssertEqual(first.status, 200, first.text)
        let retry = try await refresh(s.refresh)  // at once: well inside the window
        XCTAssertEqual(retry.status, 200, retry.text)
        let (a, b) = (try session(first), try session(retry))
        XCTAssertEqual(b.refresh, a.refresh, "the retry answers the same refresh token")
        XCTAssertEqual(b.access, a.access, "and the same access token")
        let expiry = { (r: HTTPClient.Response) in (try? r.decode(AccountSessionBody.self))?.session.expiresAt }
        XCTAssertNotNil(expiry(first))
        XCTAssertEqual(expiry(retry), expiry(first), "and the same expiry")
        XCTAssertEqual(b.accountId, s.accountId)
        // The session lives: the new access token works, and the new refresh token rotates normally.
        let me = try await client.get("/v1/me", token: b.access).status
        XCTAssertEqual(me, 200)
        let next = try await refresh(b.refresh)
        XCTAssertEqual(next.status, 200, next.text)
        let c = try session(next)
        XCTAssertNotEqual(c.refresh, b.refresh)
        let stillIn = try await client.get("/v1/me", token: c.access).status
        XCTAssertEqual(stillIn, 200, "no revocation was published for the retry")
        // The first token's successor has been used since: presenting the first token now is a
        // replay, even inside the window, and revokes the session.
        let late = try await refresh(s.refresh)
        XCTAssertEqual(late.status, 401)
        XCTAssertEqual(late.errorCode, "invalidToken")
        let revoked = try await Self.stack.eventually(2) { try await self.client.get("/v1/me", token: c.access).status == 401 }
        XCTAssertTrue(revoked, "the session's access token still works after the replay")
    }

    func testConcurrentRefreshesWithOneTokenAllGetTheSamePair() async throws {
        let s = try await signUp()
        let client = self.client
        let answers = try await withThrowingTaskGroup(of: (Int, String?).self) { group in
            for _ in 0..<6 {
                group.addTask {
                    let r = try await client.json("POST", "/v1/sessions/refresh", ["refreshToken": s.refresh])
                    return (r.status, (try? r.decode(AccountSessionBody.self))?.session.refreshToken)
                }
            }
            return try await group.reduce(into: [(Int, String?)]()) { $0.append($1) }
        }
        XCTAssertEqual(answers.map(\.0), Array(repeating: 200, count: 6), "\(answers.map(\.0))")
        let tokens = Set(answers.compactMap(\.1))
        XCTAssertEqual(tokens.count, 1, "one rotation, answered to every request")
        let token = try XCTUnwrap(tokens.first)
        Self.secrets.add(token)
        let next = try await refresh(token)
        XCTAssertEqual(next.status, 200, "the session survived the race")
        _ = try session(next)
    }

    func testSignOutStopsTheTokenOnEveryGatewayWithinASecond() async throws {
        let port = try Project.freePort(), ops = try Project.freePort()
        try Self.stack.startService("gateway", overrides: ["REDEEM_HTTP_PORT": String(port), "REDEEM_GATEWAY_HTTP_PORT": String(ops)])
        let second = HTTPClient(base: URL(string: "http://127.0.0.1:\(port)")!)
        let secondOps = HTTPClient(base: URL(string: "http://127.0.0.1:\(ops)")!)
        let up = try await Self.stack.eventually(15) { try await secondOps.get("/backends").status == 200 }
        XCTAssertTrue(up, "second gateway did not become ready")
        let s = try await signUp()
        let v2 = try await second.get("/v1/me", token: s.access).status
        XCTAssertEqual(v2, 200)
        let out = try await client.send("DELETE", "/v1/sessions/current", headers: ["Authorization": "Bearer \(s.access)"])
        XCTAssertEqual(out.status, 204)
        let started = ContinuousClock.now
        let refused = try await Self.stack.eventually(1) { try await second.get("/v1/me", token: s.access).status == 401 }
        XCTAssertTrue(refused, "the other gateway still accepted the token after \(ContinuousClock.now - started)")
        let v3 = try await client.get("/v1/me", token: s.access).status
        XCTAssertEqual(v3, 401)
        let refresh = try await client.json("POST", "/v1/sessions/refresh", ["refreshToken": s.refresh])
        XCTAssertEqual(refresh.status, 401, "signed-out sessions can't be refreshed")
    }

    func testTamperedExpiredAndForeignTokensAreRefused() async throws {
        let s = try await signUp()
        // The service's own signing key, from accounts' key store, mints a valid and an expired token.
        let signing = try Self.stack.signingKey()
        let (key, kid) = (signing.key, signing.kid)
        let parts = s.access.split(separator: ".")
        let claims = try JSONDecoder().decode(AccessClaims.self, from: Data(try XCTUnwrap(Base64URL.decode(parts[1]))))
        let account = try XCTUnwrap(claims.accountId), session = try XCTUnwrap(claims.sessionId)
        let valid = try JWT.sign(AccessClaims(account: account, appUserId: claims.app, session: session, issuedAt: Date(), expiresAt: Date().addingTimeInterval(60)), key: key, kid: kid)
        let v4 = try await client.get("/v1/me", token: valid).status
        XCTAssertEqual(v4, 200, "control: a token from the real key works")
        let expired = try JWT.sign(AccessClaims(account: account, appUserId: claims.app, session: session, issuedAt: Date().addingTimeInterval(-120), expiresAt: Date().addingTimeInterval(-60)), key: key, kid: kid)
        let foreignKey = try XCTUnwrap(AsymmetricKey.generateRSA())
        let foreign = try JWT.sign(claims, key: foreignKey, kid: kid)
        // An EdDSA token under the RSA key's id: the key decides the algorithm, not the token.
        let swapped = try JWT.sign(claims, key: try XCTUnwrap(AsymmetricKey.ed25519(privateKey: Crypto.randomBytes(32))), kid: kid)
        var otherClaims = claims
        otherClaims.sub = UUID().uuidString.lowercased()
        let tampered = "\(parts[0]).\(Base64URL.encode(try JSONEncoder().encode(otherClaims))).\(parts[2])"
        let none = Base64URL.encode(Array(#"{"alg":"none","kid":"\#(kid)"}"#.utf8)) + ".\(parts[1])."
        for (name, token) in [("expired", expired), ("foreign key", foreign), ("swapped algorithm", swapped), ("tampered", tampered), ("alg none", none), ("garbage", "abc.def.ghi")] {
            let r = try await client.get("/v1/me", token: token)
            XCTAssertEqual(r.status, 401, name)
            XCTAssertEqual(r.errorCode, "invalidToken", name)
        }
        let noToken = try await client.get("/v1/me")
        XCTAssertEqual(noToken.status, 401)
        XCTAssertEqual(noToken.errorCode, "notIdentified")
    }

    // MARK: - API keys and guards

    func testAPIKeysAreShownOnceListedByPrefixAndRevocable() async throws {
        let admin = Self.stack.adminKey
        let created = try await client.json("POST", "/v1/api-keys", ["name": "support desk", "role": "readonly", "mode": "test"], token: admin)
        XCTAssertEqual(created.status, 201, created.text)
        let o = try created.json()
        let key = try XCTUnwrap(o["key"] as? String)
        Self.secrets.add(key)
        XCTAssertTrue(key.hasPrefix("sk_test_"))
        let id = try XCTUnwrap(o["id"] as? String)
        let list = try await client.get("/v1/api-keys", token: admin)
        XCTAssertEqual(list.status, 200)
        XCTAssertFalse(list.text.contains(key), "the secret is never listed")
        let listed = (try list.json()["data"] as? [[String: Any]] ?? []).first { $0["id"] as? String == id }
        XCTAssertEqual(listed?["prefix"] as? String, String(key.prefix(12)))
        XCTAssertEqual(listed?["role"] as? String, "readonly")
        // A readonly key can't write; a user token can't use operator routes; no token is 401.
        let write = try await client.json("POST", "/v1/api-keys", ["name": "x", "role": "admin", "mode": "live"], token: key)
        XCTAssertEqual(write.status, 403)
        XCTAssertEqual(write.errorCode, "forbidden")
        let user = try await signUp()
        let v5 = try await client.get("/v1/api-keys", token: user.access).errorCode
        XCTAssertEqual(v5, "forbidden")
        let v6 = try await client.get("/v1/api-keys").errorCode
        XCTAssertEqual(v6, "notIdentified")
        // An operator key is not a user.
        let v7 = try await client.get("/v1/me", token: key).status
        XCTAssertEqual(v7, 403)
        // Revoked: refused at once.
        let del = try await client.send("DELETE", "/v1/api-keys/\(id)", headers: ["Authorization": "Bearer \(admin)"])
        XCTAssertEqual(del.status, 204)
        let after = try await client.json("POST", "/v1/api-keys", ["name": "x", "role": "admin", "mode": "live"], token: key)
        XCTAssertEqual(after.status, 401)
        XCTAssertEqual(after.errorCode, "invalidToken")
        let v8 = try await client.get("/v1/api-keys", token: "sk_live_made_up_key_0000000000").status
        XCTAssertEqual(v8, 401)
        let bad = try await client.json("POST", "/v1/api-keys", ["name": "x", "role": "owner", "mode": "live"], token: admin)
        XCTAssertEqual(bad.status, 422)
        XCTAssertEqual(bad.errorField, "role")
    }

    // MARK: - Sign in with Apple

    func apple(_ claims: AppleIdentityProvider.Claims, recordName: String? = nil, provider: AppleIdentityProvider? = nil) async throws -> HTTPClient.Response {
        let token = (provider ?? Self.apple).token(claims)
        Self.secrets.add(token)
        var body: [String: Any] = ["identityToken": token]
        if let recordName { body["cloudkitRecordName"] = recordName }
        return try await client.json("POST", "/v1/sessions/apple", body)
    }

    func testSignInWithAppleCreatesOnceThenSignsIn() async throws {
        let sub = "001234." + UUID().uuidString.prefix(8)
        let record = "_apple" + UUID().uuidString.prefix(8)
        let email = Self.email()
        let first = try await apple(.init(aud: Self.clientId, sub: sub, email: email, emailVerified: true), recordName: record)
        XCTAssertEqual(first.status, 201, first.text)
        let s1 = try session(first)
        XCTAssertEqual(s1.appUserId, record, "iOS-first via Apple adopts the record name")
        let again = try await apple(.init(aud: Self.clientId, sub: sub))
        XCTAssertEqual(again.status, 200)
        XCTAssertEqual(try session(again).accountId, s1.accountId)
        let me = try await client.get("/v1/me", token: s1.access).json()
        XCTAssertEqual(me["email"] as? String, email)
        XCTAssertTrue((me["identities"] as? [[String: Any]] ?? []).contains { $0["type"] as? String == "apple" })
    }

    func testAVerifiedAppleEmailJoinsOnlyAnAccountWhoseEmailAppleProved() async throws {
        let email = Self.email()
        let first = try await apple(.init(aud: Self.clientId, sub: "p." + UUID().uuidString.prefix(8), email: email, emailVerified: true))
        XCTAssertEqual(first.status, 201, first.text)
        let owner = try session(first)
        // Another Apple identity with the same verified email: Apple proved that email for both.
        let verified = try await apple(.init(aud: Self.clientId, sub: "v." + UUID().uuidString.prefix(8), email: email.lowercased(), emailVerified: true))
        XCTAssertEqual(verified.status, 200, verified.text)
        XCTAssertEqual(try session(verified).accountId, owner.accountId)
        let unverified = try await apple(.init(aud: Self.clientId, sub: "u." + UUID().uuidString.prefix(8), email: email, emailVerified: false))
        XCTAssertEqual(unverified.status, 409)
        XCTAssertEqual(unverified.errorCode, "emailInUse")
        // A password sign-up can't take an email Apple proved either.
        let signUp = try await client.json("POST", "/v1/accounts", ["email": email, "password": "correct horse battery"])
        XCTAssertEqual(signUp.status, 409)
        XCTAssertEqual(signUp.errorCode, "emailInUse")
    }

    /// Account pre-hijacking (docs/security.md): whoever typed an email and a password never proved the
    /// email, so Apple's proof of it doesn't open that account; the Apple user gets an account of
    /// their own.
    func testAppleSignInNeverJoinsAPasswordAccountWhoseEmailWasNotProven() async throws {
        let email = Self.email()
        let password = "typed by whoever came first"
        let preRegistered = try await signUp(email, password: password)
        let sub = "h." + UUID().uuidString.prefix(8)
        let first = try await apple(.init(aud: Self.clientId, sub: sub, email: email.lowercased(), emailVerified: true))
        XCTAssertEqual(first.status, 201, "Sign in with Apple makes its own account: \(first.text)")
        let appleSession = try session(first)
        XCTAssertNotEqual(appleSession.accountId, preRegistered.accountId)
        XCTAssertNotEqual(appleSession.appUserId, preRegistered.appUserId)
        // The password still opens the password account, which has gained no Apple identity.
        let signIn = try await client.json("POST", "/v1/sessions", ["email": email, "password": password])
        XCTAssertEqual(signIn.status, 200, signIn.text)
        let passwordSession = try session(signIn)
        XCTAssertEqual(passwordSession.accountId, preRegistered.accountId)
        let passwordMe = try await client.get("/v1/me", token: passwordSession.access).json()
        XCTAssertEqual(passwordMe["email"] as? String, email)
        XCTAssertEqual((passwordMe["identities"] as? [[String: Any]] ?? []).compactMap { $0["type"] as? String }, ["email"])
        // The Apple account keeps the email on its Apple identity; the account's own email (the
        // unique one that password sign-in uses) stays with the password account.
        let appleMe = try await client.get("/v1/me", token: appleSession.access).json()
        XCTAssertNil(appleMe["email"] as? String)
        let identities = appleMe["identities"] as? [[String: Any]] ?? []
        XCTAssertEqual(identities.count, 1, "\(identities)")
        XCTAssertEqual(identities.first?["type"] as? String, "apple")
        XCTAssertEqual(identities.first?["email"] as? String, email.lowercased())
        // The next Apple sign-in finds the Apple account by its subject.
        let again = try await apple(.init(aud: Self.clientId, sub: sub, email: email, emailVerified: true))
        XCTAssertEqual(again.status, 200, again.text)
        XCTAssertEqual(try session(again).accountId, appleSession.accountId)
        // Another Apple identity with the same email: the password account's email is still unproven.
        let other = try await apple(.init(aud: Self.clientId, sub: "h2." + UUID().uuidString.prefix(8), email: email, emailVerified: true))
        XCTAssertEqual(other.status, 201, other.text)
        XCTAssertNotEqual(try session(other).accountId, preRegistered.accountId)
    }

    /// The bundle id and the Services ID are both audiences: one Apple user, one account.
    func testEitherListedAudienceSignsInToTheSameAccount() async throws {
        let sub = "aud." + UUID().uuidString.prefix(8)
        let native = try await apple(.init(aud: Self.clientId, sub: sub))
        XCTAssertEqual(native.status, 201, native.text)
        let web = try await apple(.init(aud: Self.servicesId, sub: sub))
        XCTAssertEqual(web.status, 200, web.text)
        XCTAssertEqual(try session(web).accountId, try session(native).accountId)
        let both = try await apple(.init(aud: "com.example.redeem.web, com.example.redeem", sub: sub))
        XCTAssertEqual(both.status, 401, "an audience is one id, never the setting's text")
    }

    /// This suite's stack has no SMTP settings: verification and reset are not offered, and say
    /// so alike for every email (no account enumeration either way).
    func testWithoutSMTPVerificationAndResetAnswerMailNotConfigured() async throws {
        let email = Self.email()
        let s = try await signUp(email)
        let verify = try await client.json("POST", "/v1/me/email/verify", [:], token: s.access)
        XCTAssertEqual(verify.status, 403)
        XCTAssertEqual(verify.errorCode, "mailNotConfigured")
        let known = try await client.json("POST", "/v1/sessions/password/reset", ["email": email])
        let unknown = try await client.json("POST", "/v1/sessions/password/reset", ["email": Self.email()])
        XCTAssertEqual(known.status, 403)
        XCTAssertEqual(known.errorCode, "mailNotConfigured")
        XCTAssertEqual(known.body, unknown.body)
        let confirm = try await client.json("POST", "/v1/sessions/password/reset/confirm", ["token": "pr_nothing", "password": "a brand new passphrase"])
        XCTAssertEqual(confirm.status, 401)
        XCTAssertEqual(confirm.errorCode, "invalidToken")
        let me = try await client.get("/v1/me", token: s.access).json()
        XCTAssertEqual(me["emailVerified"] as? Bool, false)
    }

    func testAppleTokensThatFailVerificationAre401() async throws {
        let sub = "bad." + UUID().uuidString.prefix(8)
        let stranger = AppleIdentityProvider(kid: Self.apple.kid)  // same kid, different key
        var expired = AppleIdentityProvider.Claims(aud: Self.clientId, sub: sub)
        expired.exp = Int(Date().timeIntervalSince1970) - 10
        var wrongIssuer = AppleIdentityProvider.Claims(aud: Self.clientId, sub: sub)
        wrongIssuer.iss = "https://evil.example.com"
        let cases: [(String, HTTPClient.Response)] = [
            ("another key", try await apple(.init(aud: Self.clientId, sub: sub), provider: stranger)),
            ("expired", try await apple(expired)),
            ("another audience", try await apple(.init(aud: "com.other.app", sub: sub))),
            ("another issuer", try await apple(wrongIssuer)),
            ("alg none", try await client.json("POST", "/v1/sessions/apple", ["identityToken": Self.apple.unsignedToken(.init(aud: Self.clientId, sub: sub))])),
            ("garbage", try await client.json("POST", "/v1/sessions/apple", ["identityToken": "not-a-jwt"])),
        ]
        for (name, r) in cases {
            XCTAssertEqual(r.status, 401, name)
            XCTAssertEqual(r.errorCode, "invalidIdentityToken", name)
        }
    }
}

/// Secrets seen by the tests (thread-safe).
final class SecretLog: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [String] = []
    func add(_ s: String...) { lock.lock(); values += s; lock.unlock() }
    var all: [String] { lock.lock(); defer { lock.unlock() }; return values }
}
