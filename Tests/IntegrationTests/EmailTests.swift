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
        let o = try resp.json()
        let account = try XCTUnwrap(o["account"] as? [String: Any])
        let s = try XCTUnwrap(o["session"] as? [String: Any])
        let result = Session(accountId: try XCTUnwrap(account["id"] as? String), access: try XCTUnwrap(s["accessToken"] as? String),
                             refresh: try XCTUnwrap(s["refreshToken"] as? String))
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
        try await Task.sleep(for: .seconds(2))
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
        kill(try Self.stack.pid("accounts"), SIGKILL)
        try await Task.sleep(for: .milliseconds(300))
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
        try await Task.sleep(for: .seconds(3))
        XCTAssertEqual(emails.map { sink.messages(to: $0).count }, Array(repeating: 1, count: emails.count), "each mail sent exactly once")
        let ready = try await Self.stack.eventually(20) { try await self.client.json("POST", "/v1/sessions", ["email": emails[0], "password": "correct horse battery"]).status == 200 }
        XCTAssertTrue(ready, "accounts answers again")
    }
}
