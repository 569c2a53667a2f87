import Core
import Cryptography
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

    /// What `POST /v1/members` answers (the one-time token and URL only here).
    struct Invitation: Decodable {
        let token: String
        let inviteUrl: String?
        let role: String?
        let email: String?
        let mailed: Bool?
    }

    /// A member in `GET /v1/members`, or the answer to a change of role.
    struct Member: Decodable {
        let email: String?
        let role: String
    }

    /// An audit record, as far as these tests read it.
    struct AuditEntry: Decodable {
        struct Actor: Decodable {
            let type: String
            let id: String?
        }
        struct Snapshot: Decodable { let status: String? }
        let action: String
        let actor: Actor?
        let before: Snapshot?
    }

    func audit(_ r: HTTPClient.Response) throws -> [AuditEntry] {
        try r.decode(ListBody<AuditEntry>.self).data
    }

    /// Invites `email` as `role` and accepts: the member's account id and access token.
    func member(_ role: String, email: String = MembersTests.email()) async throws -> (id: String, token: String, email: String) {
        let invited = try await call("POST", "/v1/members", ["email": email, "role": role], token: admin)
        expect(201, invited)
        let token = try invited.decode(Invitation.self).token
        let accepted = try await call("POST", "/v1/members/accept", ["token": token, "password": Self.password], token: nil)
        expect(201, accepted)
        let o = try accepted.decode(AccountSessionBody.self)
        XCTAssertEqual(o.account.emailVerified, true, "the invitation link proved the email")
        return (o.account.id, o.session.accessToken, email)
    }

    func signIn(_ email: String) async throws -> String {
        let r = try await call("POST", "/v1/sessions", ["email": email, "password": Self.password], token: nil)
        expect(200, r)
        return try r.decode(AccountSessionBody.self).session.accessToken
    }

    func waitUntilRefused(_ token: String, file: StaticString = #filePath, line: UInt = #line) async throws {
        var last: HTTPClient.Response?
        let refused = try await Self.stack.eventually(4) {
            last = try await self.call("GET", "/v1/coupons", token: token)
            return last?.status == 401
        }
        XCTAssertTrue(refused, "the member's old session still works", file: file, line: line)
        XCTAssertEqual(last?.errorCode, "invalidToken", file: file, line: line)
    }

    func testAnInviteIsAOneTimeURLThatMakesAMemberOfItsRole() async throws {
        let email = Self.email()
        let invited = try await call("POST", "/v1/members", ["email": email, "role": "readonly"], token: admin)
        expect(201, invited)
        let o = try invited.decode(Invitation.self)
        let token = o.token
        XCTAssertEqual(
            o.inviteUrl, "http://\(Self.stack.gateway.host!):\(Self.stack.gateway.port!)/dashboard#invite=\(token)")
        XCTAssertEqual(o.role, "readonly")
        XCTAssertEqual(o.email, email)
        XCTAssertEqual(o.mailed, false, "this stack sends no mail: the URL is the only way")

        let weak = try await call("POST", "/v1/members/accept", ["token": token, "password": "short"], token: nil)
        expect(422, weak)
        let accepted = try await call("POST", "/v1/members/accept", ["token": token, "password": Self.password], token: nil)
        expect(201, accepted)
        let again = try await call("POST", "/v1/members/accept", ["token": token, "password": Self.password], token: nil)
        expect(401, again)
        XCTAssertEqual(again.errorCode, "invalidToken", "an invitation is used once")

        let session = try accepted.decode(AccountSessionBody.self).session.accessToken
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
        XCTAssertTrue(
            try list.decode(ListBody<Member>.self).data.contains { $0.email == email && $0.role == "readonly" },
            list.text)
    }

    func testAMembersModeIsItsHeaderAndItsChangesAreAuditedAsItself() async throws {
        let m = try await member("admin")
        let live = "LIVE-" + UUID().uuidString.prefix(6), test = "TEST-" + UUID().uuidString.prefix(6)
        expect(201, try await call("POST", "/v1/coupons", ["code": live, "kind": "freePeriod", "duration": ["unit": "day", "count": 1]], token: m.token))
        expect(201, try await call("POST", "/v1/coupons", ["code": test, "kind": "freePeriod", "duration": ["unit": "day", "count": 1]],
                                   token: m.token, mode: "test"))
        let liveCoupon = try await call("GET", "/v1/coupons/\(live)", token: m.token)
        expect(200, liveCoupon)
        XCTAssertEqual(try liveCoupon.decode(CouponBody.self).mode, "live")
        expect(404, try await call("GET", "/v1/coupons/\(test)", token: m.token))
        let testCoupon = try await call("GET", "/v1/coupons/\(test)", token: m.token, mode: "test")
        XCTAssertEqual(try testCoupon.decode(CouponBody.self).mode, "test")
        expect(422, try await call("GET", "/v1/coupons", token: m.token, mode: "staging"))
        // A key the member makes in test mode is a test key.
        let key = try await call("POST", "/v1/api-keys", ["name": "from a member", "role": "readonly"], token: m.token, mode: "test")
        expect(201, key)
        XCTAssertEqual(try key.decode(APIKeyBody.self).mode, "test")

        let audit = try await call("GET", "/v1/audit?objectId=\(live)", token: admin)
        let row = try XCTUnwrap(try self.audit(audit).first)
        XCTAssertEqual(row.action, "coupon.create")
        XCTAssertEqual(row.actor?.type, "member")
        XCTAssertEqual(row.actor?.id, m.id)
        let testAudit = try await call("GET", "/v1/audit?actorId=\(m.id)", token: m.token, mode: "test")
        XCTAssertEqual(try self.audit(testAudit).map(\.action), ["apiKey.create", "coupon.create"])
    }

    func testANewRoleOrARemovalEndsTheMembersSessions() async throws {
        let m = try await member("readonly")
        let changed = try await call("PATCH", "/v1/members/\(m.id)", ["role": "admin"], token: admin)
        expect(200, changed)
        XCTAssertEqual(try changed.decode(Member.self).role, "admin")
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
        XCTAssertEqual(try audit(rows).map(\.action), ["member.remove", "member.update", "member.join"])
    }

    func testOnlyLiveAdminsAndMembersManageMembers() async throws {
        let testKey = try await call("POST", "/v1/api-keys", ["name": "test admin", "role": "admin", "mode": "test"], token: admin)
        let test = try XCTUnwrap(try testKey.decode(APIKeyBody.self).key)
        expect(403, try await call("POST", "/v1/members", ["email": Self.email(), "role": "admin"], token: test))
        let roKey = try await call("POST", "/v1/api-keys", ["name": "ro", "role": "readonly"], token: admin)
        let ro = try XCTUnwrap(try roKey.decode(APIKeyBody.self).key)
        expect(403, try await call("POST", "/v1/members", ["email": Self.email(), "role": "admin"], token: ro))
        expect(401, try await call("GET", "/v1/members", token: nil))
        expect(422, try await call("POST", "/v1/members", ["email": "not an email", "role": "admin"], token: admin))
        expect(422, try await call("POST", "/v1/members", ["email": Self.email(), "role": "owner"], token: admin))
    }

    func testAMemberReadsAnyRedemptionOfItsModeAndConfirmsByHandAsSupport() async throws {
        let code = "MRD-" + UUID().uuidString.prefix(6)
        expect(201, try await call("POST", "/v1/coupons", ["code": code, "kind": "percentOff", "percentOff": 50, "productIds": ["pro.monthly"],
                                                           "duration": ["unit": "month", "count": 1], "periodCount": 1, "platforms": ["web"]],
                                   token: admin))
        let user = try Self.minter.user()
        let made = try await call("POST", "/v1/redemptions", ["code": code, "platform": "web"], token: user.token)
        expect(201, made)
        let id = try made.decode(RedemptionBody.self).redemptionId
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
        XCTAssertEqual(try confirmed.decode(RedemptionBody.self).status, "completed")
        let audit = try await call("GET", "/v1/audit?objectType=redemption&objectId=\(id)", token: admin)
        let row = try XCTUnwrap(try self.audit(audit).first)
        XCTAssertEqual(row.action, "redemption.confirm")
        XCTAssertEqual(row.actor?.id, support.id)
        XCTAssertEqual(row.before?.status, "reserved")
    }

    func testAnExistingAccountJoinsWithItsOwnPassword() async throws {
        let email = Self.email()
        let signUp = try await call("POST", "/v1/accounts", ["email": email, "password": Self.password], token: nil)
        expect(201, signUp)
        let accountId = try signUp.decode(AccountSessionBody.self).account.id
        let invited = try await call("POST", "/v1/members", ["email": email.uppercased(), "role": "support"], token: admin)
        let token = try invited.decode(Invitation.self).token
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
        let member = try joined.decode(AccountSessionBody.self)
        XCTAssertEqual(member.account.id, accountId, "the same account, now a member")
        let session = member.session.accessToken
        expect(200, try await call("GET", "/v1/coupons", token: session))
    }

    func sql(_ text: String, _ params: [any PGBindable] = []) async throws -> PGResult {
        let database = try Self.stack.adminDatabaseURL()
        nonisolated(unsafe) let p = params
        return try await offThePool { try PGConnection(url: database).query(text, p) }
    }

    /// Pending invitations are listed (without tokens), live 72 hours, and can be revoked: a
    /// revoked or expired one makes no member, and is no longer listed. Revoking is audited.
    func testInvitationsAreListedRevokedAndExpireAfter72Hours() async throws {
        let (kept, revoked, expired) = (Self.email(), Self.email(), Self.email())
        var ids: [String: String] = [:], tokens: [String: String] = [:]
        for email in [kept, revoked, expired] {
            let r = try await call("POST", "/v1/members", ["email": email, "role": "support"], token: admin)
            expect(201, r)
            let o = try r.json()
            ids[email] = try XCTUnwrap(o["id"] as? String)
            tokens[email] = try XCTUnwrap(o["token"] as? String)
            let made = try XCTUnwrap(Timestamp.parse(o["createdAt"] as? String ?? "")), ends = try XCTUnwrap(Timestamp.parse(o["expiresAt"] as? String ?? ""))
            XCTAssertEqual(ends.timeIntervalSince(made), 72 * 3600, accuracy: 1, "an invitation lives 72 hours")
        }
        func listed() async throws -> [[String: Any]] {
            let r = try await call("GET", "/v1/members/invites?limit=100", token: admin)
            expect(200, r)
            return try XCTUnwrap(try r.json()["data"] as? [[String: Any]])
        }
        let before = try await listed()
        for email in [kept, revoked, expired] {
            let row = try XCTUnwrap(before.first { $0["email"] as? String == email }, "\(email) is listed")
            XCTAssertEqual(row["role"] as? String, "support")
            XCTAssertNil(row["token"], "a listing never shows a token")
        }
        expect(403, try await call("GET", "/v1/members/invites", token: try await member("support").token))

        expect(204, try await call("DELETE", "/v1/members/invites/\(ids[revoked]!)", token: admin))
        expect(404, try await call("DELETE", "/v1/members/invites/\(ids[revoked]!)", token: admin))
        _ = try await sql("UPDATE accounts.member_invites SET expires_at = now() - interval '1 second' WHERE id = $1", [UUID(uuidString: ids[expired]!)!])
        let after = try await listed().compactMap { $0["email"] as? String }
        XCTAssertTrue(after.contains(kept))
        XCTAssertFalse(after.contains(revoked) || after.contains(expired), "\(after)")
        for email in [revoked, expired] {
            let r = try await call("POST", "/v1/members/accept", ["token": tokens[email]!, "password": Self.password], token: nil)
            expect(401, r)
            XCTAssertEqual(r.errorCode, "invalidToken")
        }
        expect(201, try await call("POST", "/v1/members/accept", ["token": tokens[kept]!, "password": Self.password], token: nil))
        let audit = try await call("GET", "/v1/audit?objectType=member&objectId=\(ids[revoked]!.uppercased())", token: admin)
        XCTAssertEqual((try audit.json()["data"] as? [[String: Any]])?.compactMap { $0["action"] as? String }, ["member.inviteRevoke", "member.invite"])
    }

    /// A demotion and a removal are in the audit log with the role before and after, and so is
    /// a member who leaves by deleting their account (which also ends the membership).
    func testDemotionsAndRemovalsAreAuditedEvenByDeletingTheAccount() async throws {
        let m = try await member("admin")
        expect(200, try await call("PATCH", "/v1/members/\(m.id)", ["role": "readonly"], token: admin))
        let leaving = try await member("support")
        expect(204, try await call("DELETE", "/v1/me", token: leaving.token))
        let members = try await call("GET", "/v1/members?limit=100", token: admin)
        XCTAssertFalse((try members.json()["data"] as? [[String: Any]] ?? []).contains { $0["id"] as? String == leaving.id },
                       "a deleted account is no member")
        let demoted = try await call("GET", "/v1/audit?objectType=member&objectId=\(m.id)", token: admin)
        let update = try XCTUnwrap((try demoted.json()["data"] as? [[String: Any]])?.first)
        XCTAssertEqual(update["action"] as? String, "member.update")
        XCTAssertEqual((update["before"] as? [String: Any])?["role"] as? String, "admin")
        XCTAssertEqual((update["after"] as? [String: Any])?["role"] as? String, "readonly")
        let left = try await call("GET", "/v1/audit?objectType=member&objectId=\(leaving.id)", token: admin)
        let rows = try XCTUnwrap(try left.json()["data"] as? [[String: Any]])
        XCTAssertEqual(rows.compactMap { $0["action"] as? String }, ["member.remove", "member.join"])
        XCTAssertEqual(((rows.first?["actor"] as? [String: Any])?["id"] as? String)?.lowercased(), leaving.id.lowercased())
    }

    /// The code an authenticator app shows at `step` for a base32 secret.
    func totp(_ secret: String, step: Int64) throws -> String {
        TOTP(secret: try XCTUnwrap(Base32.decode(secret))).code(step: step)
    }

    func signIn(_ email: String, code: String?) async throws -> HTTPClient.Response {
        var body: [String: Any] = ["email": email, "password": Self.password]
        if let code { body["totpCode"] = code }
        return try await call("POST", "/v1/sessions", body, token: nil)
    }

    /// Turns TOTP on for a member: the secret (base32), the recovery codes, and the step of the
    /// code that turned it on (taken, so the next code is for a later step).
    func turnOnTOTP(_ token: String, email: String) async throws -> (secret: String, recovery: [String], step: Int64) {
        let started = try await call("POST", "/v1/me/totp", token: token)
        expect(200, started)
        let secret = try XCTUnwrap(try started.json()["secret"] as? String)
        let uri = try XCTUnwrap(try started.json()["uri"] as? String)
        XCTAssertTrue(uri.hasPrefix("otpauth://totp/Redeem:") && uri.contains("secret=\(secret)") && uri.contains("digits=6&period=30"), uri)
        let step = TOTP.step(at: Date())
        let wrong = try await call("POST", "/v1/me/totp/confirm", ["code": try totp(secret, step: step + 20)], token: token)
        expect(401, wrong)
        let confirmed = try await call("POST", "/v1/me/totp/confirm", ["code": try totp(secret, step: step)], token: token)
        expect(200, confirmed)
        let recovery = try XCTUnwrap(try confirmed.json()["recoveryCodes"] as? [String])
        XCTAssertEqual(recovery.count, 10)
        XCTAssertEqual(Set(recovery).count, 10)
        return (secret, recovery, step)
    }

    /// TOTP: turned on with a first code, it ends the member's sessions; sign-in then needs a
    /// code (401 totpRequired without one), each code works once, and so does each recovery code.
    /// The secret is stored sealed, recovery codes as hashes.
    func testAMemberWithTOTPSignsInWithACodeOrARecoveryCode() async throws {
        let m = try await member("admin")
        let (secret, recovery, step) = try await turnOnTOTP(m.token, email: m.email)
        try await waitUntilRefused(m.token)

        let missing = try await signIn(m.email, code: nil)
        expect(401, missing)
        XCTAssertEqual(missing.errorCode, "totpRequired")
        let wrong = try await signIn(m.email, code: try totp(secret, step: step + 20))
        expect(401, wrong)
        XCTAssertEqual(wrong.errorCode, "invalidCredentials")
        let reused = try await signIn(m.email, code: try totp(secret, step: step))
        expect(401, reused)
        XCTAssertEqual(reused.errorCode, "invalidCredentials", "a code works once")
        // With the next code, the session carries the role.
        let withCode = try session(try await signIn(m.email, code: try totp(secret, step: step + 1)))
        expect(200, try await call("GET", "/v1/coupons", token: withCode))
        expect(409, try await call("POST", "/v1/me/totp", token: withCode))
        let recovered = try await signIn(m.email, code: recovery[0].uppercased())
        expect(200, recovered)
        expect(200, try await call("GET", "/v1/coupons", token: try session(recovered)))
        let again = try await signIn(m.email, code: recovery[0])
        expect(401, again)

        let stored = try await sql("SELECT secret FROM accounts.member_totp WHERE account_id = $1", [UUID(uuidString: m.id)!])
        let sealed = try XCTUnwrap(stored.first?.decode("secret", as: PGBytes.self)).data
        XCTAssertFalse(sealed.range(of: Data(try XCTUnwrap(Base32.decode(secret)))) != nil, "the secret is sealed")
        let hashes = try await sql("SELECT count(*) AS n FROM accounts.member_recovery_codes WHERE account_id = $1 AND code_hash = $2",
                                   [UUID(uuidString: m.id)!, PGBytes(Data(Crypto.sha256(Array(recovery[1].replacingOccurrences(of: "-", with: "").utf8))))])
        XCTAssertEqual(try hashes.first?.decode("n", as: Int.self), 1, "recovery codes are kept as their SHA-256")
        let audit = try await call("GET", "/v1/audit?objectType=member&objectId=\(m.id)", token: admin)
        XCTAssertTrue((try audit.json()["data"] as? [[String: Any]] ?? []).contains { $0["action"] as? String == "member.totpEnable" })
        let listed = try await call("GET", "/v1/members?limit=100", token: admin)
        let row = (try listed.json()["data"] as? [[String: Any]] ?? []).first { $0["id"] as? String == m.id }
        XCTAssertEqual(row?["totpEnabled"] as? Bool, true, "an admin sees who has TOTP on")
    }

    /// An admin requires TOTP of every member: sessions opened without it end, a member without
    /// it signs in with no role until they turn it on, and can't turn it off while required.
    func testAnAdminCanRequireTOTPOfEveryMember() async throws {
        let m = try await member("support")
        let required = try await call("PATCH", "/v1/members/settings", ["requireTotp": true], token: admin)
        expect(200, required)
        do {
            XCTAssertEqual(try required.json()["requireTotp"] as? Bool, true)
            try await waitUntilRefused(m.token)
            let roleless = try await signIn(m.email)
            expect(403, try await call("GET", "/v1/coupons", token: roleless))
            let (secret, recovery, step) = try await turnOnTOTP(roleless, email: m.email)
            let signedIn = try session(try await signIn(m.email, code: try totp(secret, step: step + 1)))
            expect(200, try await call("GET", "/v1/coupons", token: signedIn))
            let off = try await call("POST", "/v1/me/totp/disable", ["code": recovery[0]], token: signedIn)
            expect(409, off)
            let audit = try await call("GET", "/v1/audit?objectType=memberSettings", token: admin)
            XCTAssertEqual((try audit.json()["data"] as? [[String: Any]])?.first?["action"] as? String, "memberSettings.update")
        } catch {
            _ = try? await call("PATCH", "/v1/members/settings", ["requireTotp": false], token: admin)
            throw error
        }
        expect(200, try await call("PATCH", "/v1/members/settings", ["requireTotp": false], token: admin))
        let settings = try await call("GET", "/v1/members/settings", token: admin)
        XCTAssertEqual(try settings.json()["requireTotp"] as? Bool, false)
    }

    func session(_ r: HTTPClient.Response, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        XCTAssertEqual(r.status, 200, r.text, file: file, line: line)
        return try XCTUnwrap((try r.json()["session"] as? [String: Any])?["accessToken"] as? String)
    }
}
