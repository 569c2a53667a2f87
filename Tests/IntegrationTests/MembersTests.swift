import Core
import Database
import Foundation
import TestSupport
import XCTest

/// Members: operator accounts with a role, invited by an admin with a one-time URL. A
/// member's session reaches the operator routes as a key of its role, in the mode its
/// `Redeem-Mode` header names; a change of role or a removal ends its sessions; each change is in
/// the audit log with the member as actor.
final class MembersTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!

    nonisolated(unsafe) static var minter: TokenMinter!

    override class func startSuite() throws {
        stack = try Stack()
        minter = try stack.minter()
    }
    override class func stopSuite() { stack?.stop() }

    var client: HTTPClient { Self.stack.client }
    var admin: String { Self.stack.adminKey }

    func call(_ method: String, _ path: String, _ body: [String: Any]? = nil, token: String?, mode: String? = nil) async throws -> HTTPClient.Response {
        var headers: [String: String] = [:]
        if let token { headers["Authorization"] = "Bearer \(token)" }
        if let mode { headers["Redeem-Mode"] = mode }
        if body != nil { headers["Content-Type"] = "application/json" }
        return try await client.send(method, path, body: try body.map { try JSONSerialization.data(withJSONObject: $0) }, headers: headers)
    }

    func expect(_ status: Int, _ r: HTTPClient.Response, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(r.status, status, r.text, file: file, line: line)
    }

    static func email() -> String { "op-\(UUID().uuidString.prefix(8).lowercased())@example.com" }
    static let password = "a long operator passphrase"

    /// Invites `email` as `role` and accepts: the member's account id and access token.
    func member(_ role: String, email: String = MembersTests.email()) async throws -> (id: String, token: String, email: String) {
        let invited = try await call("POST", "/v1/members", ["email": email, "role": role], token: admin)
        expect(201, invited)
        let token = try XCTUnwrap(try invited.json()["token"] as? String)
        let accepted = try await call("POST", "/v1/members/accept", ["token": token, "password": Self.password], token: nil)
        expect(201, accepted)
        let o = try accepted.json()
        XCTAssertEqual((o["account"] as? [String: Any])?["emailVerified"] as? Bool, true, "the invitation link proved the email")
        return (try XCTUnwrap((o["account"] as? [String: Any])?["id"] as? String),
                try XCTUnwrap((o["session"] as? [String: Any])?["accessToken"] as? String), email)
    }

    func signIn(_ email: String) async throws -> String {
        let r = try await call("POST", "/v1/sessions", ["email": email, "password": Self.password], token: nil)
        expect(200, r)
        return try XCTUnwrap((try r.json()["session"] as? [String: Any])?["accessToken"] as? String)
    }

    func waitUntilRefused(_ token: String, file: StaticString = #filePath, line: UInt = #line) async throws {
        for _ in 0..<40 {
            let r = try await call("GET", "/v1/coupons", token: token)
            if r.status == 401 { XCTAssertEqual(r.errorCode, "invalidToken", file: file, line: line); return }
            try await Task.sleep(for: .milliseconds(100))
        }
        XCTFail("the member's old session still works", file: file, line: line)
    }

    func test1_anInviteIsAOneTimeURLThatMakesAMemberOfItsRole() async throws {
        let email = Self.email()
        let invited = try await call("POST", "/v1/members", ["email": email, "role": "readonly"], token: admin)
        expect(201, invited)
        let o = try invited.json()
        let token = try XCTUnwrap(o["token"] as? String)
        XCTAssertEqual(o["inviteUrl"] as? String, "http://\(Self.stack.gateway.host!):\(Self.stack.gateway.port!)/dashboard#invite=\(token)")
        XCTAssertEqual(o["role"] as? String, "readonly")
        XCTAssertEqual(o["email"] as? String, email)

        let weak = try await call("POST", "/v1/members/accept", ["token": token, "password": "short"], token: nil)
        expect(422, weak)
        let accepted = try await call("POST", "/v1/members/accept", ["token": token, "password": Self.password], token: nil)
        expect(201, accepted)
        let again = try await call("POST", "/v1/members/accept", ["token": token, "password": Self.password], token: nil)
        expect(401, again)
        XCTAssertEqual(again.errorCode, "invalidToken", "an invitation is used once")

        let session = try XCTUnwrap((try accepted.json()["session"] as? [String: Any])?["accessToken"] as? String)
        expect(200, try await call("GET", "/v1/coupons", token: session))
        let create = try await call("POST", "/v1/coupons", ["code": "MEM-" + UUID().uuidString.prefix(6), "kind": "freePeriod",
                                                            "duration": ["unit": "day", "count": 1]], token: session)
        expect(403, create)
        XCTAssertEqual(create.errorCode, "forbidden", "a readonly member can't create coupons")
        expect(403, try await call("GET", "/v1/audit", token: session))
        // Signing in again gives a session with the role too; an end user's session reaches no operator route.
        expect(200, try await call("GET", "/v1/coupons", token: try await signIn(email)))
        expect(200, try await call("GET", "/v1/me", token: session))
        let list = try await call("GET", "/v1/members?limit=100", token: admin)
        expect(200, list)
        XCTAssertTrue((try list.json()["data"] as? [[String: Any]] ?? []).contains { $0["email"] as? String == email && $0["role"] as? String == "readonly" })
    }

    func test2_aMembersModeIsItsHeaderAndItsChangesAreAuditedAsItself() async throws {
        let m = try await member("admin")
        let live = "LIVE-" + UUID().uuidString.prefix(6), test = "TEST-" + UUID().uuidString.prefix(6)
        expect(201, try await call("POST", "/v1/coupons", ["code": live, "kind": "freePeriod", "duration": ["unit": "day", "count": 1]], token: m.token))
        expect(201, try await call("POST", "/v1/coupons", ["code": test, "kind": "freePeriod", "duration": ["unit": "day", "count": 1]],
                                   token: m.token, mode: "test"))
        let liveCoupon = try await call("GET", "/v1/coupons/\(live)", token: m.token)
        expect(200, liveCoupon)
        XCTAssertEqual(try liveCoupon.json()["mode"] as? String, "live")
        expect(404, try await call("GET", "/v1/coupons/\(test)", token: m.token))
        let testCoupon = try await call("GET", "/v1/coupons/\(test)", token: m.token, mode: "test")
        XCTAssertEqual(try testCoupon.json()["mode"] as? String, "test")
        expect(422, try await call("GET", "/v1/coupons", token: m.token, mode: "staging"))
        // A key the member makes in test mode is a test key.
        let key = try await call("POST", "/v1/api-keys", ["name": "from a member", "role": "readonly"], token: m.token, mode: "test")
        expect(201, key)
        XCTAssertEqual(try key.json()["mode"] as? String, "test")

        let audit = try await call("GET", "/v1/audit?objectId=\(live)", token: admin)
        let row = try XCTUnwrap((try audit.json()["data"] as? [[String: Any]])?.first)
        XCTAssertEqual(row["action"] as? String, "coupon.create")
        XCTAssertEqual((row["actor"] as? [String: Any])?["type"] as? String, "member")
        XCTAssertEqual((row["actor"] as? [String: Any])?["id"] as? String, m.id)
        let testAudit = try await call("GET", "/v1/audit?actorId=\(m.id)", token: m.token, mode: "test")
        XCTAssertEqual((try testAudit.json()["data"] as? [[String: Any]])?.compactMap { $0["action"] as? String }, ["apiKey.create", "coupon.create"])
    }

    func test3_aNewRoleOrARemovalEndsTheMembersSessions() async throws {
        let m = try await member("readonly")
        let changed = try await call("PATCH", "/v1/members/\(m.id)", ["role": "admin"], token: admin)
        expect(200, changed)
        XCTAssertEqual(try changed.json()["role"] as? String, "admin")
        try await waitUntilRefused(m.token)
        let promoted = try await signIn(m.email)
        expect(201, try await call("POST", "/v1/coupons", ["code": "PRO-" + UUID().uuidString.prefix(6), "kind": "freePeriod",
                                                           "duration": ["unit": "day", "count": 1]], token: promoted))

        expect(204, try await call("DELETE", "/v1/members/\(m.id)", token: admin))
        try await waitUntilRefused(promoted)
        let plain = try await signIn(m.email)
        expect(200, try await call("GET", "/v1/me", token: plain))
        expect(403, try await call("GET", "/v1/coupons", token: plain))
        expect(404, try await call("DELETE", "/v1/members/\(m.id)", token: admin))

        let rows = try await call("GET", "/v1/audit?objectType=member&objectId=\(m.id)", token: admin)
        XCTAssertEqual((try rows.json()["data"] as? [[String: Any]])?.compactMap { $0["action"] as? String },
                       ["member.remove", "member.update", "member.join"])
    }

    func test4_onlyLiveAdminsAndMembersManageMembers() async throws {
        let testKey = try await call("POST", "/v1/api-keys", ["name": "test admin", "role": "admin", "mode": "test"], token: admin)
        let test = try XCTUnwrap(try testKey.json()["key"] as? String)
        expect(403, try await call("POST", "/v1/members", ["email": Self.email(), "role": "admin"], token: test))
        let roKey = try await call("POST", "/v1/api-keys", ["name": "ro", "role": "readonly"], token: admin)
        let ro = try XCTUnwrap(try roKey.json()["key"] as? String)
        expect(403, try await call("POST", "/v1/members", ["email": Self.email(), "role": "admin"], token: ro))
        expect(401, try await call("GET", "/v1/members", token: nil))
        expect(422, try await call("POST", "/v1/members", ["email": "not an email", "role": "admin"], token: admin))
        expect(422, try await call("POST", "/v1/members", ["email": Self.email(), "role": "owner"], token: admin))
    }

    func test6_aMemberReadsAnyRedemptionOfItsModeAndConfirmsByHandAsSupport() async throws {
        let code = "MRD-" + UUID().uuidString.prefix(6)
        expect(201, try await call("POST", "/v1/coupons", ["code": code, "kind": "percentOff", "percentOff": 50, "productIds": ["pro.monthly"],
                                                           "duration": ["unit": "month", "count": 1], "periodCount": 1, "platforms": ["web"]],
                                   token: admin))
        let user = try Self.minter.user()
        let made = try await call("POST", "/v1/redemptions", ["code": code, "platform": "web"], token: user.token)
        expect(201, made)
        let id = try XCTUnwrap(try made.json()["redemptionId"] as? String)
        let readonly = try await member("readonly")
        expect(200, try await call("GET", "/v1/redemptions/\(id)", token: readonly.token))
        expect(404, try await call("GET", "/v1/redemptions/\(id)", token: readonly.token, mode: "test"))
        let refused = try await call("POST", "/v1/redemptions/\(id)/purchase", ["pricePaid": ["amount": "4.99", "currency": "EUR"],
                                                                                 "storeTransactionId": "tx-" + code], token: readonly.token)
        expect(403, refused)
        let support = try await member("support")
        let confirmed = try await call("POST", "/v1/redemptions/\(id)/purchase", ["pricePaid": ["amount": "4.99", "currency": "EUR"],
                                                                                   "storeTransactionId": "tx-" + code], token: support.token)
        expect(200, confirmed)
        XCTAssertEqual(try confirmed.json()["status"] as? String, "completed")
        let audit = try await call("GET", "/v1/audit?objectType=redemption&objectId=\(id)", token: admin)
        let row = try XCTUnwrap((try audit.json()["data"] as? [[String: Any]])?.first)
        XCTAssertEqual(row["action"] as? String, "redemption.confirm")
        XCTAssertEqual((row["actor"] as? [String: Any])?["id"] as? String, support.id)
        XCTAssertEqual((row["before"] as? [String: Any])?["status"] as? String, "reserved")
    }

    func test5_anExistingAccountJoinsWithItsOwnPassword() async throws {
        let email = Self.email()
        let signUp = try await call("POST", "/v1/accounts", ["email": email, "password": Self.password], token: nil)
        expect(201, signUp)
        let accountId = try XCTUnwrap((try signUp.json()["account"] as? [String: Any])?["id"] as? String)
        let invited = try await call("POST", "/v1/members", ["email": email.uppercased(), "role": "support"], token: admin)
        let token = try XCTUnwrap(try invited.json()["token"] as? String)
        let wrong = try await call("POST", "/v1/members/accept", ["token": token, "password": "not the password at all"], token: nil)
        expect(401, wrong)
        XCTAssertEqual(wrong.errorCode, "invalidCredentials")
        // Whoever signed up with the email may not own the mailbox (docs/security.md): the
        // existing account joins only once its email is verified, and the invitation waits.
        let unproven = try await call("POST", "/v1/members/accept", ["token": token, "password": Self.password], token: nil)
        expect(403, unproven)
        XCTAssertEqual(unproven.errorCode, "emailUnverified")
        // This suite's stack sends no mail: the verification the account would do is written directly.
        let database = try Self.stack.adminDatabaseURL()
        let id = try XCTUnwrap(UUID(uuidString: accountId))
        _ = try await offThePool { try PGConnection(url: database).query("UPDATE accounts.accounts SET email_verified = true WHERE id = $1", [id]) }
        let joined = try await call("POST", "/v1/members/accept", ["token": token, "password": Self.password], token: nil)
        expect(200, joined)
        XCTAssertEqual((try joined.json()["account"] as? [String: Any])?["id"] as? String, accountId, "the same account, now a member")
        let session = try XCTUnwrap((try joined.json()["session"] as? [String: Any])?["accessToken"] as? String)
        expect(200, try await call("GET", "/v1/coupons", token: session))
    }
}
