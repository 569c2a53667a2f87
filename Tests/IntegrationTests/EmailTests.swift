import Core
import Database
import Foundation
import TestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Mailed codes through the gateway over HTTP: email verification and password reset, each by a
/// code mailed through accounts' outbox to a real SMTP server on loopback (`SMTPSink`), and the
/// rule that a verified email is what lets Sign in with Apple join a password account.
final class EmailTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var sink: SMTPSink!
    nonisolated(unsafe) static var apple: AppleIdentityProvider!
    nonisolated(unsafe) static var jwksDirectory: URL?
    static let clientId = "com.example.redeem"
    static let secrets = SecretLog()

    override class func startSuite() throws {
        sink = try SMTPSink()
        apple = AppleIdentityProvider()
        let dir = try Project.temporaryDirectory("jwks")
        jwksDirectory = dir
        let jwks = dir.appendingPathComponent("apple-jwks.json")
        try apple.jwks().write(to: jwks)
        stack = try Stack(environment: ["REDEEM_SMTP_URL": "smtp+insecure://127.0.0.1:\(sink.port)", "REDEEM_MAIL_FROM": "no-reply@redeem.test",
                                        "REDEEM_APPLE_CLIENT_ID": clientId, "REDEEM_APPLE_JWKS": jwks.path])
    }

    override class func stopSuite() {
        let logs = stack?.logs() ?? ""
        let leaked = secrets.all.filter { logs.contains($0) }
        stack?.stop()
        sink?.stop()
        if let jwksDirectory { try? FileManager.default.removeItem(at: jwksDirectory) }
        precondition(leaked.isEmpty, "secrets found in the service logs: \(leaked.map { String($0.prefix(12)) + "…" })")
    }

    var client: HTTPClient { Self.stack.client }
    var sink: SMTPSink { Self.sink }

    // MARK: - Helpers

    static func email() -> String { "pilot-\(UUID().uuidString.prefix(8))@Example.com" }

    struct Session {
        var accountId: String, access: String, refresh: String
    }

    func session(_ resp: HTTPClient.Response) throws -> Session {
        let o = try resp.decode(AccountSessionBody.self)
        let result = Session(
            accountId: o.account.id, access: o.session.accessToken, refresh: try XCTUnwrap(o.session.refreshToken))
        Self.secrets.add(result.access, result.refresh)
        return result
    }

    func signUp(_ email: String, password: String = "correct horse battery") async throws -> Session {
        Self.secrets.add(password)
        let r = try await client.json("POST", "/v1/accounts", ["email": email, "password": password])
        XCTAssertEqual(r.status, 201, r.text)
        return try session(r)
    }

    func me(_ token: String) async throws -> [String: Any] {
        let r = try await client.get("/v1/me", token: token)
        XCTAssertEqual(r.status, 200, r.text)
        return try r.json()
    }

    /// Waits for the `count`-th mail to `recipient` and answers the code it carries.
    func code(mailedTo recipient: String, count: Int = 1, seconds: Double = 20) async throws -> String {
        let arrived = try await Self.stack.eventually(seconds) { self.sink.messages(to: recipient).count >= count }
        XCTAssertTrue(arrived, "no mail to \(recipient) within \(seconds) s")
        let mail = try XCTUnwrap(sink.messages(to: recipient).last)
        let regex = try NSRegularExpression(pattern: #"\b((?:ev|pr)_[A-Za-z0-9_-]{40,})"#)
        let match = try XCTUnwrap(regex.firstMatch(in: mail.data, range: NSRange(mail.data.startIndex..., in: mail.data)))
        let code = String(mail.data[Range(match.range(at: 1), in: mail.data)!])
        Self.secrets.add(code)
        return code
    }

    func sql(_ text: String, _ params: [any PGBindable] = []) async throws -> PGResult {
        let database = try Self.stack.adminDatabaseURL()
        nonisolated(unsafe) let p = params
        return try await offThePool { try PGConnection(url: database).query(text, p) }
    }

    func requestReset(_ email: String) async throws -> HTTPClient.Response {
        try await client.json("POST", "/v1/sessions/password/reset", ["email": email])
    }

    func confirmReset(_ token: String, _ password: String) async throws -> HTTPClient.Response {
        Self.secrets.add(password)
        return try await client.json("POST", "/v1/sessions/password/reset/confirm", ["token": token, "password": password])
    }

    // MARK: - Member invitations

    /// With mail, an invitation is mailed to the invited email; its link is the one the admin was
    /// shown, and its token makes the member once.
    func testAMemberInvitationIsMailedAndItsLinkMakesTheMember() async throws {
        let email = Self.email()
        let invited = try await client.json(
            "POST", "/v1/members", ["email": email, "role": "support"], token: Self.stack.adminKey)
        XCTAssertEqual(invited.status, 201, invited.text)
        let body = try invited.json()
        XCTAssertEqual(body["mailed"] as? Bool, true)
        let url = try XCTUnwrap(body["inviteUrl"] as? String)
        let token = try XCTUnwrap(url.components(separatedBy: "#invite=").last)
        Self.secrets.add(token)
        let arrived = try await Self.stack.eventually(20) { self.sink.messages(to: email).count >= 1 }
        XCTAssertTrue(arrived, "no invitation mailed to \(email)")
        let mail = try XCTUnwrap(sink.messages(to: email).last)
        XCTAssertEqual(mail.from, "no-reply@redeem.test")
        XCTAssertTrue(mail.data.contains("Subject: You are invited to the Redeem dashboard"), mail.data)
        XCTAssertTrue(mail.data.contains("with the role support."), mail.data)
        XCTAssertTrue(mail.data.contains(url), "the mail carries the link the admin was shown:\n\(mail.data)")

        let accepted = try await client.json(
            "POST", "/v1/members/accept", ["token": token, "password": "correct horse battery staple"])
        XCTAssertEqual(accepted.status, 201, accepted.text)
        let members = try await client.get("/v1/members", token: Self.stack.adminKey)
        let listed = try XCTUnwrap(try members.json()["data"] as? [[String: Any]])
        let member = listed.first { ($0["email"] as? String)?.lowercased() == email.lowercased() }
        XCTAssertEqual(member?["role"] as? String, "support", members.text)
        // Sent once, by the outbox: no second mail for it.
        XCTAssertEqual(sink.messages(to: email).count, 1)
    }

    /// The dashboard's "Forgot your password?" in Chromium (Tests/Browser/dashboard_reset.py): the
    /// member asks for a code, a wrong one is refused next to its field, and the mailed one with a
    /// new password signs them in; the old password no longer works.
    func testAMemberResetsTheirPasswordOnTheDashboard() async throws {
        let email = Self.email().lowercased()
        let invited = try await client.json(
            "POST", "/v1/members", ["email": email, "role": "readonly"], token: Self.stack.adminKey)
        let token = try XCTUnwrap(try invited.json()["token"] as? String)
        Self.secrets.add(token)
        let joined = try await client.json(
            "POST", "/v1/members/accept", ["token": token, "password": "the first long passphrase"])
        XCTAssertEqual(joined.status, 201, joined.text)
        // The invitation's mail comes first; the reset's is the second.
        let invitationMailed = try await Self.stack.eventually(20) { self.sink.messages(to: email).count == 1 }
        XCTAssertTrue(invitationMailed)

        let directory = try Project.temporaryDirectory("reset")
        let codeFile = directory.appendingPathComponent("code")
        let out = directory.appendingPathComponent("out").path
        let screenshots = Project.root.appendingPathComponent("test-output")
        try? FileManager.default.createDirectory(at: screenshots, withIntermediateDirectories: true)
        let browser = try Subprocess(
            "/usr/bin/python3",
            [Project.root.appendingPathComponent("Tests/Browser/dashboard_reset.py").path,
             Self.stack.gateway.absoluteString, email, "the second long passphrase", codeFile.path, screenshots.path],
            stdout: out)
        let code = try await code(mailedTo: email, count: 2, seconds: 40)
        try code.write(to: codeFile, atomically: true, encoding: .utf8)
        guard browser.wait(seconds: 90) != nil else {
            browser.signal(SIGKILL)
            return XCTFail("the browser did not finish in 90 s")
        }
        let printed = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
        let r = try XCTUnwrap(
            try JSONSerialization.jsonObject(
                with: Data((printed.split(separator: "\n").last.map(String.init) ?? "").utf8)) as? [String: Any],
            printed)
        XCTAssertEqual(r["ok"] as? Bool, true, "\(r)")
        XCTAssertEqual(r["who"] as? String, email)
        XCTAssertEqual(r["codeFocused"] as? Bool, true)
        XCTAssertEqual(r["wrongCodeError"] as? String, "This code is not right, was used, or has expired.")
        XCTAssertEqual(r["exceptions"] as? [String], [])
        let old = try await client.json(
            "POST", "/v1/sessions", ["email": email, "password": "the first long passphrase"])
        XCTAssertEqual(old.status, 401, old.text)
        let new = try await client.json(
            "POST", "/v1/sessions", ["email": email, "password": "the second long passphrase"])
        XCTAssertEqual(new.status, 200, new.text)
    }

    // MARK: - Email verification

    func testAVerificationCodeVerifiesTheEmailOnceAndMeShowsIt() async throws {
        let email = Self.email()
        let s = try await signUp(email)
        do { let got = try await me(s.access)["emailVerified"] as? Bool; XCTAssertEqual(got, false) }
        let sent = try await client.json("POST", "/v1/me/email/verify", [:], token: s.access)
        XCTAssertEqual(sent.status, 202, sent.text)
        let code = try await code(mailedTo: email)
        let mail = try XCTUnwrap(sink.messages(to: email).last)
        XCTAssertEqual(mail.from, "no-reply@redeem.test")
        XCTAssertTrue(mail.data.contains("Subject: Confirm your email address"), mail.data)
        XCTAssertTrue(code.hasPrefix("ev_"))

        let wrong = try await client.json("POST", "/v1/accounts/email/confirm", ["token": "ev_" + String(code.dropFirst(3).reversed())])
        XCTAssertEqual(wrong.status, 401)
        XCTAssertEqual(wrong.errorCode, "invalidToken")
        let reset = try await client.json("POST", "/v1/sessions/password/reset/confirm", ["token": code, "password": "a brand new passphrase"])
        XCTAssertEqual(reset.status, 401, "a verification code is no reset code")
        do { let got = try await me(s.access)["emailVerified"] as? Bool; XCTAssertEqual(got, false) }

        let confirmed = try await client.json("POST", "/v1/accounts/email/confirm", ["token": code])
        XCTAssertEqual(confirmed.status, 204, confirmed.text)
        do { let got = try await me(s.access)["emailVerified"] as? Bool; XCTAssertEqual(got, true) }
        let again = try await client.json("POST", "/v1/accounts/email/confirm", ["token": code])
        XCTAssertEqual(again.status, 401, "a code works once")
        XCTAssertEqual(again.errorCode, "invalidToken")
        let more = try await client.json("POST", "/v1/me/email/verify", [:], token: s.access)
        XCTAssertEqual(more.status, 409)
        XCTAssertEqual(more.errorCode, "invalidState")
        // Only the hash is stored.
        let stored = try await sql("SELECT count(*)::int AS n FROM accounts.email_tokens WHERE encode(token_hash, 'escape') LIKE $1", ["%" + code + "%"])
        XCTAssertEqual(try stored.rows.first?.decode("n", as: Int.self), 0)
    }

    func testAnExpiredVerificationOrResetCodeIsRefused() async throws {
        let email = Self.email()
        let s = try await signUp(email)
        do { let got = try await client.json("POST", "/v1/me/email/verify", [:], token: s.access).status; XCTAssertEqual(got, 202) }
        let verify = try await code(mailedTo: email)
        do { let got = try await requestReset(email).status; XCTAssertEqual(got, 202) }
        let reset = try await code(mailedTo: email, count: 2)
        let lifetimes = try await sql("""
            SELECT purpose, extract(epoch FROM expires_at - created_at)::int AS seconds FROM accounts.email_tokens
            WHERE account_id = $1 ORDER BY purpose
            """, [UUID(uuidString: s.accountId)!]).rows.map { (try $0.decode("purpose", as: String.self), try $0.decode("seconds", as: Int.self)) }
        XCTAssertEqual(lifetimes.map(\.0), ["resetPassword", "verifyEmail"])
        XCTAssertEqual(lifetimes.map(\.1), [3600, 86400])
        try await sql("UPDATE accounts.email_tokens SET expires_at = now() - interval '1 second' WHERE account_id = $1", [UUID(uuidString: s.accountId)!])
        let late = try await client.json("POST", "/v1/accounts/email/confirm", ["token": verify])
        XCTAssertEqual(late.status, 401)
        XCTAssertEqual(late.errorCode, "invalidToken")
        let lateReset = try await confirmReset(reset, "a brand new passphrase")
        XCTAssertEqual(lateReset.status, 401)
        do { let got = try await me(s.access)["emailVerified"] as? Bool; XCTAssertEqual(got, false) }
        let old = try await client.json("POST", "/v1/sessions", ["email": email, "password": "correct horse battery"])
        XCTAssertEqual(old.status, 200, "the password is unchanged")
    }

    // MARK: - Password reset

    func testAResetAnswersAlikeForAnyEmailAndMailsOnlyAnAccount() async throws {
        let known = Self.email(), unknown = Self.email()
        _ = try await signUp(known)
        let a = try await requestReset(known.uppercased())
        let b = try await requestReset(unknown)
        XCTAssertEqual(a.status, 202)
        XCTAssertEqual(b.status, 202)
        XCTAssertEqual(a.body, b.body, "the same answer whether or not the email has an account")
        XCTAssertEqual(a.header("Content-Type"), b.header("Content-Type"))
        let code = try await code(mailedTo: known)
        XCTAssertTrue(code.hasPrefix("pr_"))
        // Time for a second mail, or one to the unknown address, which must not come: no condition
        // says that it never will.
        try await Task.sleep(for: .seconds(2))
        XCTAssertEqual(sink.messages(to: known).count, 1)
        XCTAssertEqual(sink.messages(to: unknown).count, 0, "no mail for an email without an account")
        let queued = try await sql("SELECT count(*)::int AS n FROM accounts.mail_outbox WHERE lower(recipient) = lower($1)", [unknown])
        XCTAssertEqual(try queued.rows.first?.decode("n", as: Int.self), 0)
        let bad = try await requestReset("not an email")
        XCTAssertEqual(bad.status, 422)
    }

    func testAResetSetsThePasswordEndsEverySessionAndWorksOnce() async throws {
        let email = Self.email()
        let first = try await signUp(email, password: "the old passphrase here")
        let second = try session(try await client.json("POST", "/v1/sessions", ["email": email, "password": "the old passphrase here"]))
        do { let got = try await requestReset(email).status; XCTAssertEqual(got, 202) }
        let code = try await code(mailedTo: email)

        let weak = try await confirmReset(code, "password123")
        XCTAssertEqual(weak.status, 422, "the sign-up rules")
        XCTAssertEqual(weak.errorCode, "weakPassword")
        let done = try await confirmReset(code, "a brand new passphrase")
        XCTAssertEqual(done.status, 200, "a weak password does not spend the code: \(done.text)")
        let fresh = try session(done)
        XCTAssertEqual(fresh.accountId, first.accountId)
        do { let got = try await me(fresh.access)["emailVerified"] as? Bool; XCTAssertEqual(got, true, "the reset proved the mailbox") }

        for old in [first, second] {
            let refused = try await Self.stack.eventually(5) { try await self.client.get("/v1/me", token: old.access).status == 401 }
            XCTAssertTrue(refused, "an earlier session's access token still works")
            let refresh = try await client.json("POST", "/v1/sessions/refresh", ["refreshToken": old.refresh])
            XCTAssertEqual(refresh.status, 401)
        }
        let oldPassword = try await client.json("POST", "/v1/sessions", ["email": email, "password": "the old passphrase here"])
        XCTAssertEqual(oldPassword.status, 401)
        let newPassword = try await client.json("POST", "/v1/sessions", ["email": email, "password": "a brand new passphrase"])
        XCTAssertEqual(newPassword.status, 200)
        _ = try session(newPassword)
        let reused = try await confirmReset(code, "yet another passphrase")
        XCTAssertEqual(reused.status, 401, "a code works once")
        XCTAssertEqual(reused.errorCode, "invalidToken")
    }

    func testAResetRetiresTheAccountsOtherResetCodes() async throws {
        let email = Self.email()
        _ = try await signUp(email)
        do { let got = try await requestReset(email).status; XCTAssertEqual(got, 202) }
        let older = try await code(mailedTo: email)
        do { let got = try await requestReset(email).status; XCTAssertEqual(got, 202) }
        let newer = try await code(mailedTo: email, count: 2)
        XCTAssertNotEqual(older, newer)
        do { let got = try await confirmReset(newer, "a brand new passphrase").status; XCTAssertEqual(got, 200) }
        do { let got = try await confirmReset(older, "another new passphrase").status; XCTAssertEqual(got, 401) }
    }

    // MARK: - Sign in with Apple

    func apple(sub: String, email: String) async throws -> HTTPClient.Response {
        let token = Self.apple.token(.init(aud: Self.clientId, sub: sub, email: email, emailVerified: true))
        Self.secrets.add(token)
        return try await client.json("POST", "/v1/sessions/apple", ["identityToken": token])
    }

    /// A verified email is what lets Sign in with Apple join a password account:
    /// before, an Apple identity with that email gets an account of its own; after, it joins.
    func testAppleJoinsAPasswordAccountOnlyOnceItsEmailIsVerified() async throws {
        let email = Self.email()
        let password = try await signUp(email)
        let before = try await apple(sub: "b." + UUID().uuidString.prefix(8), email: email.lowercased())
        XCTAssertEqual(before.status, 201, before.text)
        XCTAssertNotEqual(try session(before).accountId, password.accountId)

        do { let got = try await client.json("POST", "/v1/me/email/verify", [:], token: password.access).status; XCTAssertEqual(got, 202) }
        let code = try await code(mailedTo: email)
        do { let got = try await client.json("POST", "/v1/accounts/email/confirm", ["token": code]).status; XCTAssertEqual(got, 204) }

        let after = try await apple(sub: "a." + UUID().uuidString.prefix(8), email: email.lowercased())
        XCTAssertEqual(after.status, 200, after.text)
        let joined = try session(after)
        XCTAssertEqual(joined.accountId, password.accountId)
        let identities = (try await me(joined.access)["identities"] as? [[String: Any]] ?? []).compactMap { $0["type"] as? String }
        XCTAssertEqual(identities, ["email", "apple"])
    }

    // MARK: - A reset takes the whole account back

    func appleToken(sub: String, email: String) -> String {
        let token = Self.apple.token(.init(aud: Self.clientId, sub: sub, email: email, emailVerified: true))
        Self.secrets.add(token)
        return token
    }

    func identityTypes(_ token: String) async throws -> [String] {
        (try await me(token)["identities"] as? [[String: Any]] ?? []).compactMap { $0["type"] as? String }
    }

    /// Pre-hijacking through a reset (docs/security.md): an attacker signs up with the victim's
    /// email, links their own Apple ID and record name (and, a member of old, makes an API key);
    /// the victim's reset takes all of it away, so the attacker's Apple sign-in no longer opens
    /// the account, their key no longer works, and the appUserId is the account's own again.
    func testAResetOfAnUnprovenEmailRemovesEverythingAddedMeanwhile() async throws {
        let email = Self.email()
        let attacker = try await signUp(email, password: "the attacker's passphrase")
        let before = try await me(attacker.access)
        let original = try XCTUnwrap(before["appUserId"] as? String)
        let attackerApple = appleToken(sub: "atk." + UUID().uuidString.prefix(8), email: "attacker-\(UUID().uuidString.prefix(6))@example.net")
        let linked = try await client.json("POST", "/v1/me/apple", ["identityToken": attackerApple], token: attacker.access)
        XCTAssertEqual(linked.status, 200, linked.text)
        let record = "_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let ck = try await client.json("POST", "/v1/me/cloudkit", ["recordName": record], token: attacker.access)
        XCTAssertEqual(ck.status, 200, ck.text)
        XCTAssertEqual(try ck.json()["appUserId"] as? String, record)
        // A member from before invitations needed a proven email: its key names it in the audit log.
        try await sql("INSERT INTO accounts.members (account_id) VALUES ($1)", [UUID(uuidString: attacker.accountId)!])
        try await sql(
            "INSERT INTO accounts.member_apps (account_id, app_id, role) VALUES ($1, $2, 'admin')",
            [UUID(uuidString: attacker.accountId)!, DefaultApp.id])
        let asMember = try session(try await client.json("POST", "/v1/sessions", ["email": email, "password": "the attacker's passphrase"]))
        let made = try await client.json("POST", "/v1/api-keys", ["name": "attacker's", "role": "admin"], token: asMember.access)
        XCTAssertEqual(made.status, 201, made.text)
        let key = try XCTUnwrap(try made.json()["key"] as? String)
        Self.secrets.add(key)
        do { let got = try await client.get("/v1/api-keys", token: key).status; XCTAssertEqual(got, 200) }
        do { let got = try await identityTypes(attacker.access); XCTAssertEqual(got, ["email", "apple", "cloudkit"]) }

        do { let got = try await requestReset(email).status; XCTAssertEqual(got, 202) }
        let victim = try session(try await confirmReset(try await code(mailedTo: email), "the victim's new passphrase"))
        XCTAssertEqual(victim.accountId, attacker.accountId)
        let view = try await me(victim.access)
        XCTAssertEqual(view["emailVerified"] as? Bool, true)
        do { let got = try await identityTypes(victim.access); XCTAssertEqual(got, ["email"], "the Apple and CloudKit links are gone") }
        XCTAssertEqual(view["appUserId"] as? String, original, "the appUserId is the account's own again")

        let viaApple = try await client.json("POST", "/v1/sessions/apple", ["identityToken": attackerApple])
        XCTAssertEqual(viaApple.status, 201, "the attacker's Apple ID makes an account of its own: \(viaApple.text)")
        XCTAssertNotEqual(try session(viaApple).accountId, victim.accountId)
        let keyRefused = try await Self.stack.eventually(5) { try await self.client.get("/v1/api-keys", token: key).status == 401 }
        XCTAssertTrue(keyRefused, "the attacker's API key still works")
        for old in [attacker, asMember] {
            let refused = try await Self.stack.eventually(5) { try await self.client.get("/v1/me", token: old.access).status == 401 }
            XCTAssertTrue(refused)
        }
        let change = try await sql("SELECT current FROM accounts.app_user_id_changes WHERE account_id = $1 AND previous = $2",
                                   [UUID(uuidString: victim.accountId)!, record])
        XCTAssertEqual(try change.rows.first?.decode("current", as: String.self), original, "grants are told to move the holder back")
    }

    /// The rule is for unproven emails only: a reset of a verified account keeps its Apple link.
    func testAResetOfAProvenEmailKeepsItsLinks() async throws {
        let email = Self.email()
        let owner = try await signUp(email)
        do { let got = try await client.json("POST", "/v1/me/email/verify", [:], token: owner.access).status; XCTAssertEqual(got, 202) }
        do { let got = try await client.json("POST", "/v1/accounts/email/confirm", ["token": try await code(mailedTo: email)]).status; XCTAssertEqual(got, 204) }
        let apple = appleToken(sub: "own." + UUID().uuidString.prefix(8), email: "owner-\(UUID().uuidString.prefix(6))@example.net")
        do { let got = try await client.json("POST", "/v1/me/apple", ["identityToken": apple], token: owner.access).status; XCTAssertEqual(got, 200) }
        do { let got = try await requestReset(email).status; XCTAssertEqual(got, 202) }
        let after = try session(try await confirmReset(try await code(mailedTo: email, count: 2), "a brand new passphrase"))
        do { let got = try await identityTypes(after.access); XCTAssertEqual(got, ["email", "apple"]) }
        let viaApple = try await client.json("POST", "/v1/sessions/apple", ["identityToken": apple])
        XCTAssertEqual(viaApple.status, 200, viaApple.text)
        XCTAssertEqual(try session(viaApple).accountId, owner.accountId)
    }

    /// Linking Apple or a record name to an account whose email is unproven needs the password
    /// within the last 5 minutes (a refreshed session is not a fresh sign-in); a proven email
    /// needs nothing more.
    func testLinkingToAnUnprovenEmailNeedsAFreshPassword() async throws {
        let email = Self.email()
        let s = try await signUp(email)
        try await sql("UPDATE accounts.sessions SET password_at = now() - interval '6 minutes' WHERE account_id = $1", [UUID(uuidString: s.accountId)!])
        let apple = appleToken(sub: "fr." + UUID().uuidString.prefix(8), email: "fresh-\(UUID().uuidString.prefix(6))@example.net")
        let record = "_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let stale = try await client.json("POST", "/v1/me/apple", ["identityToken": apple], token: s.access)
        XCTAssertEqual(stale.status, 403, stale.text)
        XCTAssertEqual(stale.errorCode, "reauthenticationRequired")
        let staleRecord = try await client.json("POST", "/v1/me/cloudkit", ["recordName": record], token: s.access)
        XCTAssertEqual(staleRecord.status, 403, staleRecord.text)
        XCTAssertEqual(staleRecord.errorCode, "reauthenticationRequired")
        let refreshed = try session(try await client.json("POST", "/v1/sessions/refresh", ["refreshToken": s.refresh]))
        do { let got = try await client.json("POST", "/v1/me/apple", ["identityToken": apple], token: refreshed.access).status; XCTAssertEqual(got, 403) }
        do { let got = try await identityTypes(refreshed.access); XCTAssertEqual(got, ["email"], "nothing was linked") }

        let again = try session(try await client.json("POST", "/v1/sessions", ["email": email, "password": "correct horse battery"]))
        do { let got = try await client.json("POST", "/v1/me/apple", ["identityToken": apple], token: again.access).status; XCTAssertEqual(got, 200) }
        do { let got = try await client.json("POST", "/v1/me/cloudkit", ["recordName": record], token: again.access).status; XCTAssertEqual(got, 200) }

        // Proven: a stale session links.
        let provenEmail = Self.email()
        let proven = try await signUp(provenEmail)
        do { let got = try await client.json("POST", "/v1/me/email/verify", [:], token: proven.access).status; XCTAssertEqual(got, 202) }
        do { let got = try await client.json("POST", "/v1/accounts/email/confirm", ["token": try await code(mailedTo: provenEmail)]).status; XCTAssertEqual(got, 204) }
        try await sql("UPDATE accounts.sessions SET password_at = NULL WHERE account_id = $1", [UUID(uuidString: proven.accountId)!])
        let other = appleToken(sub: "pv." + UUID().uuidString.prefix(8), email: "proven-\(UUID().uuidString.prefix(6))@example.net")
        do { let got = try await client.json("POST", "/v1/me/apple", ["identityToken": other], token: proven.access).status; XCTAssertEqual(got, 200) }
    }

    // MARK: - The outbox

    /// SMTP down: the mail waits in the outbox and is tried again with backoff; up again, it goes
    /// out, once.
    func testMailWaitsWhileSMTPIsDownAndGoesOutOnceItIsUp() async throws {
        let email = Self.email()
        _ = try await signUp(email)
        sink.stop()
        var restarted = false
        defer { if !restarted { try? sink.start() } }
        do { let got = try await requestReset(email).status; XCTAssertEqual(got, 202, "the answer does not wait for SMTP") }
        let tried = try await Self.stack.eventually(15) {
            let row = try await self.sql("SELECT attempts, last_error, sent_at IS NULL AS unsent FROM accounts.mail_outbox WHERE recipient = $1", [email]).rows.first
            return try row?.decode("attempts", as: Int.self) ?? 0 >= 2 && row?.decodeIfPresent("last_error", as: String.self) != nil
                && row?.decode("unsent", as: Bool.self) == true
        }
        XCTAssertTrue(tried, "the outbox tried at least twice and kept the mail")
        XCTAssertEqual(sink.messages(to: email).count, 0)
        try sink.start()
        restarted = true
        _ = try await code(mailedTo: email, seconds: 30)
        try await Task.sleep(for: .seconds(2))  // time for a second send, which must not come
        XCTAssertEqual(sink.messages(to: email).count, 1, "sent once")
        let row = try await sql("SELECT sent_at IS NOT NULL AS sent, body IS NULL AS cleared FROM accounts.mail_outbox WHERE recipient = $1", [email]).rows.first
        XCTAssertEqual(try row?.decode("sent", as: Bool.self), true)
        XCTAssertEqual(try row?.decode("cleared", as: Bool.self), true, "a sent mail's message (and its code) is not kept")
        XCTAssertTrue(Self.stack.logs().contains("mail not sent; it is tried again"))
        XCTAssertFalse(try String(contentsOf: Self.stack.stateDirectory.appendingPathComponent("env"), encoding: .utf8).contains("REDEEM_SMTP_URL"),
                       "the SMTP URL (it may hold a password) is not in the runner's wiring file")
        let port = try XCTUnwrap(Self.stack.wiring()["REDEEM_ACCOUNTS_HTTP_PORT"])
        let metrics = try await HTTPClient(base: URL(string: "http://127.0.0.1:\(port)")!).get("/metrics").text
        XCTAssertTrue(metrics.contains(#"redeem_mail_total{outcome="failed"}"#), metrics)
        XCTAssertTrue(metrics.contains(#"redeem_mail_total{outcome="sent"}"#), metrics)
    }

    /// A mail committed but not sent survives accounts being killed (-9): the next instance sends
    /// it, once. Two instances sending at once never send one mail twice.
    func testTheOutboxSurvivesAKillAndTwoInstancesSendEachMailOnce() async throws {
        let emails = (0..<8).map { _ in Self.email() }
        for e in emails { _ = try await signUp(e) }
        sink.stop()
        var restarted = false
        defer { if !restarted { try? sink.start() } }
        for e in emails { let got = try await requestReset(e).status; XCTAssertEqual(got, 202) }
        let committed = try await Self.stack.eventually(15) {
            let n = try await self.sql("""
                SELECT count(*)::int AS n FROM accounts.mail_outbox WHERE recipient = ANY($1::text[]) AND attempts >= 1 AND lease_token IS NULL AND sent_at IS NULL
                """, [PGArray(emails)]).rows.first?.decode("n", as: Int.self)
            return n == emails.count
        }
        XCTAssertTrue(committed, "every mail is in the outbox, tried and failed")
        let killed = try Self.stack.pid("accounts")
        kill(killed, SIGKILL)
        let gone = try await Self.stack.gone(killed)
        XCTAssertTrue(gone, "the killed accounts is gone before the mail server is back")
        try sink.start()
        restarted = true
        // The next instance, and a second one beside it, each with buses and ports of its own.
        // The runner's wiring leaves out the SMTP URL (it may hold a password).
        let smtp = ["REDEEM_SMTP_URL": "smtp+insecure://127.0.0.1:\(sink.port)"]
        try Self.stack.startService("accounts", overrides: smtp)
        try Self.stack.startService("accounts", overrides: smtp.merging(["REDEEM_ACCOUNTS_BUS_BIND": "tcp://127.0.0.1:\(try Project.freePort())",
                                                                         "REDEEM_ACCOUNTS_EVENTS_BIND": "tcp://127.0.0.1:\(try Project.freePort())",
                                                                         "REDEEM_ACCOUNTS_HTTP_PORT": String(try Project.freePort())]) { $1 })
        // A mail the killed instance had claimed in its last moment waits out its 60 s lease.
        let all = try await Self.stack.eventually(90) { emails.allSatisfy { !self.sink.messages(to: $0).isEmpty } }
        XCTAssertTrue(all, "every mail went out after the restart")
        try await Task.sleep(for: .seconds(3))  // time for a second send of any, which must not come
        XCTAssertEqual(emails.map { sink.messages(to: $0).count }, Array(repeating: 1, count: emails.count), "each mail sent exactly once")
        let ready = try await Self.stack.eventually(20) { try await self.client.json("POST", "/v1/sessions", ["email": emails[0], "password": "correct horse battery"]).status == 200 }
        XCTAssertTrue(ready, "accounts answers again")
    }
}
