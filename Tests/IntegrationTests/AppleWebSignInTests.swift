import Core
import Cryptography
import Database
import Foundation
import Runtime
import TestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Sign in with Apple on the web and Android, and deleting its account, over HTTP, against a fake Apple (`FakeAppleID`, a real HTTP server that
/// checks client secrets and signs id_tokens): Sign in with Apple's REST flow for the web and
/// Android, the one-time sign-in code, both audiences, linking Apple to an account, and the
/// revocation of Apple's token when an account is deleted (also with Apple down, and across a
/// restart). The tests play the browser: they carry the cookie and post Apple's form themselves;
/// the browser test drives the redeem page in headless Chromium.
final class AppleWebSignInTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var apple: FakeAppleID!
    nonisolated(unsafe) static var key: TestAppleAPIKey!
    static let bundleId = "com.example.pilot"
    static let servicesId = "com.example.pilot.web"
    static let teamId = "TEAM4PILOT"
    static let deepLink = "com.example.pilot:/apple-signed-in"
    static let secrets = SecretLog()

    override class func startSuite() throws {
        key = try TestAppleAPIKey(keyId: "SIWAKEY123")
        apple = try FakeAppleID(teamId: teamId, keyId: key.keyId, clientSecretKey: key.key)
        let port = try Project.freePort()
        stack = try Stack(environment: [
            "REDEEM_HTTP_PORT": String(port),
            "REDEEM_APPLE_CLIENT_ID": "\(bundleId), \(servicesId)",
            "REDEEM_APPLE_SERVICES_ID": servicesId,
            "REDEEM_APPLE_TEAM_ID": teamId,
            "REDEEM_APPLE_KEY_ID": key.keyId,
            "REDEEM_APPLE_PRIVATE_KEY": key.privateKeyFile.path,
            "REDEEM_APPLE_REDIRECT_URI": "http://127.0.0.1:\(port)/v1/sessions/apple/callback",
            "REDEEM_APPLE_JWKS": apple.keysURL.absoluteString,
            "REDEEM_APPLE_AUTHORIZE_URL": apple.authorizeURL.absoluteString,
            "REDEEM_APPLE_TOKEN_URL": apple.tokenURL.absoluteString,
            "REDEEM_APPLE_REVOKE_URL": apple.revokeURL.absoluteString,
            "REDEEM_APPLE_RETURN_URLS": "\(deepLink), https://app.example.com/apple/*"
        ])
    }

    override class func stopSuite() {
        let logs = stack?.logs() ?? ""
        let leaked = secrets.all.filter { logs.contains($0) }
        stack?.stop()
        let done = DispatchSemaphore(value: 0)
        Task {
            await apple?.stop()
            done.signal()
        }
        done.wait()
        precondition(leaked.isEmpty, "secrets found in the service logs: \(leaked.map { String($0.prefix(12)) + "…" })")
    }

    override func setUp() async throws {
        Self.apple.setDown(false)
    }

    var client: HTTPClient { Self.stack.client }
    /// A browser that does not follow redirects and keeps no cookie: the test carries them.
    var browser: HTTPClient { HTTPClient(base: Self.stack.gateway, followRedirects: false) }

    // MARK: - Helpers

    static func user() -> FakeAppleID.User {
        FakeAppleID.User(
            sub: "001122." + UUID().uuidString.prefix(12).lowercased(),
            email: "apple-\(UUID().uuidString.prefix(8).lowercased())@privaterelay.example.com")
    }

    static func query(_ url: String) -> [String: String] {
        Dictionary(
            (URLComponents(string: url)?.queryItems ?? []).map { ($0.name, $0.value ?? "") },
            uniquingKeysWith: { a, _ in a })
    }

    static func encoded(_ s: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return s.addingPercentEncoding(withAllowedCharacters: allowed)!
    }

    struct Begun {
        var cookie: String
        var setCookie: String
        var authorize: String
        /// What Apple's page posts back: code, state, and user the first time.
        var fields: [String: String]
        var action: String
    }

    /// Start → Apple's authorize page → the form it would post, as a browser gets there.
    func begin(return back: String, as user: FakeAppleID.User, challenge: String? = nil) async throws -> Begun {
        Self.apple.signInNext(user)
        let pkce = challenge.map { "&code_challenge=\($0)&code_challenge_method=S256" } ?? ""
        let start = try await browser.get("/v1/sessions/apple/start?return=" + Self.encoded(back) + pkce)
        XCTAssertEqual(start.status, 302, start.text)
        let location = try XCTUnwrap(start.header("Location"))
        let setCookie = try XCTUnwrap(start.header("Set-Cookie"))
        let prefix = "__Host-redeem-apple="
        XCTAssertTrue(setCookie.hasPrefix(prefix), setCookie)
        let cookie = String(setCookie.dropFirst(prefix.count).prefix { $0 != ";" })
        let page = try await HTTPClient(base: Self.apple.url).get(location)
        XCTAssertEqual(page.status, 200, page.text)
        let form = try XCTUnwrap(FakeAppleID.formOf(page.text), page.text)
        return Begun(
            cookie: cookie, setCookie: setCookie, authorize: location, fields: form.fields, action: form.action)
    }

    func callback(_ fields: [String: String], cookie: String?) async throws -> HTTPClient.Response {
        let body = fields.map { "\(Self.encoded($0.key))=\(Self.encoded($0.value))" }.joined(separator: "&")
        var headers = ["Content-Type": "application/x-www-form-urlencoded"]
        if let cookie { headers["Cookie"] = "other=1; __Host-redeem-apple=\(cookie)" }
        return try await browser.send("POST", "/v1/sessions/apple/callback", body: Data(body.utf8), headers: headers)
    }

    /// The whole web flow: answers the one-time code from the redirect back, and the cookie of
    /// the browser that started it (which its exchange needs).
    func signInCode(
        return back: String = AppleWebSignInTests.deepLink, as user: FakeAppleID.User
    ) async throws -> (code: String, cookie: String) {
        let begun = try await begin(return: back, as: user)
        let answer = try await callback(begun.fields, cookie: begun.cookie)
        XCTAssertEqual(answer.status, 303, answer.text)
        let location = try XCTUnwrap(answer.header("Location"))
        XCTAssertTrue(location.hasPrefix(back + (back.contains("?") ? "&" : "?") + "code="), location)
        let code = try XCTUnwrap(Self.query(location)["code"])
        Self.secrets.add(code)
        return (code, begun.cookie)
    }

    /// An exchange as a browser makes it (with the flow's cookie) or an app (with its verifier).
    func exchange(_ code: String, cookie: String? = nil, verifier: String? = nil) async throws -> HTTPClient.Response {
        var body = ["code": code]
        if let verifier { body["codeVerifier"] = verifier }
        var headers = ["Content-Type": "application/json"]
        if let cookie { headers["Cookie"] = "__Host-redeem-apple=\(cookie); other=1" }
        // `browser` keeps no cookie jar, so the cookie sent is exactly this one.
        return try await browser.send(
            "POST", "/v1/sessions/exchange", body: try JSONSerialization.data(withJSONObject: body), headers: headers)
    }

    func exchange(_ signIn: (code: String, cookie: String)) async throws -> HTTPClient.Response {
        try await exchange(signIn.code, cookie: signIn.cookie)
    }

    /// A PKCE pair as an app makes one (RFC 7636 S256): the verifier and its challenge.
    static func pkce() -> (verifier: String, challenge: String) {
        let verifier = Crypto.randomToken(bytes: 32)
        return (verifier, Base64URL.encode(Crypto.sha256(Array(verifier.utf8))))
    }

    struct Session {
        var accountId: String
        var access: String
    }

    /// `GET /v1/me`'s identities.
    struct Identities: Decodable {
        struct Identity: Decodable { let type: String }
        let identities: [Identity]
    }

    func session(_ r: HTTPClient.Response) throws -> Session {
        let o = try r.decode(AccountSessionBody.self)
        Self.secrets.add(o.session.accessToken, try XCTUnwrap(o.session.refreshToken))
        return Session(accountId: o.account.id, access: o.session.accessToken)
    }

    func sql(_ text: String, _ params: [any PGBindable] = []) async throws -> PGResult {
        let database = try Self.stack.adminDatabaseURL()
        nonisolated(unsafe) let p = params
        return try await offThePool { try PGConnection(url: database).query(text, p) }
    }

    // MARK: - Start

    func testStartRedirectsToAppleWithFormPostStateAndNonceBoundToACookie() async throws {
        let begun = try await begin(return: "/redeem", as: Self.user())
        XCTAssertTrue(begun.authorize.hasPrefix(Self.apple.authorizeURL.absoluteString + "?"), begun.authorize)
        let q = Self.query(begun.authorize)
        XCTAssertEqual(q["client_id"], Self.servicesId)
        XCTAssertEqual(q["redirect_uri"], "\(Self.stack.gateway.absoluteString)/v1/sessions/apple/callback")
        XCTAssertEqual(q["response_type"], "code id_token")
        XCTAssertEqual(q["response_mode"], "form_post")
        XCTAssertEqual(q["scope"], "name email")
        XCTAssertTrue(
            begun.authorize.contains("scope=name%20email"),
            "the scope's space is %20, as Apple wants: \(begun.authorize)")
        let state = try XCTUnwrap(q["state"]), nonce = try XCTUnwrap(q["nonce"])
        XCTAssertGreaterThanOrEqual(state.count, 40)
        XCTAssertGreaterThanOrEqual(nonce.count, 40)
        XCTAssertNotEqual(state, nonce)
        XCTAssertEqual(begun.fields["state"], state, "Apple echoes the state")
        // The cookie: short-lived, not for scripts, HTTPS only, and sent with Apple's cross-site post.
        for attribute in ["Path=/", "Max-Age=600", "HttpOnly", "Secure", "SameSite=None"] {
            XCTAssertTrue(begun.setCookie.contains(attribute), "\(attribute) in \(begun.setCookie)")
        }
        XCTAssertFalse(begun.authorize.contains(begun.cookie.prefix(43)), "the cookie's secret never goes to Apple")
        // A second start is another binding.
        let again = try await begin(return: "/redeem", as: Self.user())
        XCTAssertNotEqual(Self.query(again.authorize)["state"], state)
    }

    func testAReturnURLNotOnTheListIs400() async throws {
        for back in [
            "https://evil.example.com/cb", "//evil.example.com/redeem", "/redeemer", "https://app.example.com/apple",
            "https://app.example.com/apple/../steal", "\(Self.deepLink)x", "\(Self.deepLink)#x", "/dashboard", ""
        ] {
            let r = try await browser.get("/v1/sessions/apple/start?return=" + Self.encoded(back))
            XCTAssertEqual(r.status, 400, "\(back): \(r.text)")
            XCTAssertEqual(r.errorCode, "returnNotAllowed", back)
            XCTAssertNil(r.header("Set-Cookie"), back)
        }
        let none = try await browser.get("/v1/sessions/apple/start")
        XCTAssertEqual(none.status, 400)
        XCTAssertEqual(none.errorCode, "returnNotAllowed")
        for back in ["/redeem", "/redeem?apple=1&coupon=X", Self.deepLink, "https://app.example.com/apple/done?x=1"] {
            let r = try await browser.get("/v1/sessions/apple/start?return=" + Self.encoded(back))
            XCTAssertEqual(r.status, 302, "\(back): \(r.text)")
        }
    }

    // MARK: - The flow, and the one-time code (Android)

    func testAndroidFlowHandsBackAOneTimeCodeThatOpensOneSession() async throws {
        let user = Self.user()
        let app = Self.pkce()
        let begun = try await begin(return: Self.deepLink, as: user, challenge: app.challenge)
        XCTAssertNotNil(begun.fields["user"], "Apple sends the user's name and email the first time")
        XCTAssertEqual(begun.action, "\(Self.stack.gateway.absoluteString)/v1/sessions/apple/callback")
        let answer = try await callback(begun.fields, cookie: begun.cookie)
        XCTAssertEqual(answer.status, 303, answer.text)
        let location = try XCTUnwrap(answer.header("Location"))
        let code = try XCTUnwrap(Self.query(location)["code"])
        XCTAssertEqual(location, Self.deepLink + "?code=" + code, "only the one-time code travels in the URL, no token")
        XCTAssertEqual(code.count, 43)
        XCTAssertTrue(
            answer.header("Set-Cookie")?.contains("Max-Age=120") == true, "the binding cookie lives on for the exchange"
        )
        Self.secrets.add(code)

        let first = try await exchange(code, verifier: app.verifier)
        XCTAssertTrue(
            first.header("Set-Cookie")?.contains("Max-Age=0") == true, "the binding cookie is cleared once used")
        XCTAssertEqual(first.status, 200, first.text)
        let s = try session(first)
        XCTAssertEqual(try first.decode(AccountSessionBody.self).account.email, user.email, "Apple verified the email")
        let me = try await client.get("/v1/me", token: s.access)
        XCTAssertEqual(me.status, 200)
        XCTAssertTrue(try me.decode(Identities.self).identities.contains { $0.type == "apple" }, me.text)

        // The same code again: refused, with its own machine code.
        let replay = try await exchange(code, verifier: app.verifier)
        XCTAssertEqual(replay.status, 401, replay.text)
        XCTAssertEqual(replay.errorCode, "signInCodeUsed")
        let unknown = try await exchange("not-a-code-we-gave")
        XCTAssertEqual(unknown.status, 401)
        XCTAssertEqual(unknown.errorCode, "invalidSignInCode")

        // The same Apple user again (no `user` field now): the same account.
        let again = try await begin(return: "/redeem?apple=1", as: user)
        XCTAssertNil(again.fields["user"])
        let back = try await callback(again.fields, cookie: again.cookie)
        XCTAssertEqual(back.status, 303, back.text)
        let location2 = try XCTUnwrap(back.header("Location"))
        XCTAssertTrue(location2.hasPrefix("/redeem?apple=1&code="), location2)
        let second = try await exchange(try XCTUnwrap(Self.query("http://x" + location2)["code"]), cookie: again.cookie)
        XCTAssertEqual(second.status, 200, second.text)
        XCTAssertEqual(try session(second).accountId, s.accountId)
    }

    /// No login CSRF: a code opens a session only for whoever started its flow. A browser's code
    /// needs that browser's cookie, an app's code the verifier of its challenge; a refused
    /// exchange leaves the code unused, so someone who only saw it can't spend it either.
    func testASignInCodeIsBoundToWhoStartedItsFlow() async throws {
        let web = try await signInCode(return: "/redeem?apple=1", as: Self.user())
        let other = try await begin(return: "/redeem?apple=1", as: Self.user())
        for (name, cookie) in [
            ("no cookie", nil), ("another browser's cookie", other.cookie), ("not a cookie", "garbage")
        ] as [(String, String?)] {
            let r = try await exchange(web.code, cookie: cookie)
            XCTAssertEqual(r.status, 400, "\(name): \(r.text)")
            XCTAssertEqual(r.errorCode, "stateMismatch", name)
        }
        let withVerifier = try await exchange(web.code, verifier: Self.pkce().verifier)
        XCTAssertEqual(withVerifier.status, 400, "a verifier is no cookie")
        let mine = try await exchange(web)
        XCTAssertEqual(mine.status, 200, mine.text)

        let app = Self.pkce()
        let begun = try await begin(return: Self.deepLink, as: Self.user(), challenge: app.challenge)
        let answer = try await callback(begun.fields, cookie: begun.cookie)
        let code = try XCTUnwrap(Self.query(try XCTUnwrap(answer.header("Location")))["code"])
        Self.secrets.add(code)
        for (name, verifier) in [("no verifier", nil), ("another verifier", Self.pkce().verifier)]
            as [(String, String?)]
        {
            let r = try await exchange(code, verifier: verifier)
            XCTAssertEqual(r.status, 400, "\(name): \(r.text)")
            XCTAssertEqual(r.errorCode, "stateMismatch", name)
        }
        let malformed = try await exchange(code, verifier: "short")
        XCTAssertEqual(malformed.status, 422, malformed.text)
        let right = try await exchange(code, verifier: app.verifier)
        XCTAssertEqual(right.status, 200, right.text)

        // The start takes S256 challenges only.
        for query in [
            "&code_challenge=\(app.challenge)&code_challenge_method=plain", "&code_challenge=tooshort",
            "&code_challenge_method=S256"
        ] {
            let r = try await browser.get("/v1/sessions/apple/start?return=" + Self.encoded(Self.deepLink) + query)
            XCTAssertEqual(r.status, 422, "\(query): \(r.text)")
        }
    }

    func testAnExpiredSignInCodeIsRefused() async throws {
        let code = try await signInCode(as: Self.user())
        try await sql(
            "UPDATE accounts.sign_in_codes SET expires_at = now() - interval '1 second' WHERE code_hash = $1",
            [PGBytes(Data(Crypto.sha256(Array(code.code.utf8))))])
        let r = try await exchange(code)
        XCTAssertEqual(r.status, 401, r.text)
        XCTAssertEqual(r.errorCode, "signInCodeExpired")
    }

    func testAUserWhoCancelsAtAppleIsSentBackWithTheError() async throws {
        let begun = try await begin(return: Self.deepLink, as: Self.user())
        let r = try await callback(
            ["state": begun.fields["state"]!, "error": "user_cancelled_authorize"], cookie: begun.cookie)
        XCTAssertEqual(r.status, 303, r.text)
        XCTAssertEqual(r.header("Location"), Self.deepLink + "?error=user_cancelled_authorize")
    }

    // MARK: - What the callback refuses

    func testAForgedStateOrAMissingCookieIsRefused() async throws {
        let begun = try await begin(return: Self.deepLink, as: Self.user())
        var forged = begun.fields
        forged["state"] = "forged-by-someone-else"
        let other = try await begin(return: Self.deepLink, as: Self.user())
        let cases: [(String, [String: String], String?)] = [
            ("forged state", forged, begun.cookie),
            ("no cookie", begun.fields, nil),
            ("another browser's cookie", begun.fields, other.cookie),
            ("a cookie that is not one", begun.fields, "garbage")
        ]
        for (name, fields, cookie) in cases {
            let r = try await callback(fields, cookie: cookie)
            XCTAssertEqual(r.status, 400, "\(name): \(r.text)")
            XCTAssertEqual(r.errorCode, "stateMismatch", name)
        }
        // The genuine post still works: nothing above spent the code.
        let good = try await callback(begun.fields, cookie: begun.cookie)
        XCTAssertEqual(good.status, 303, good.text)
        let json = try await browser.send(
            "POST", "/v1/sessions/apple/callback", body: Data("{}".utf8), headers: ["Content-Type": "application/json"])
        XCTAssertEqual(json.status, 415)
    }

    func testAnIDTokenWithAnotherNonceOrAudienceIsRefused() async throws {
        let changes: [(String, @Sendable (inout AppleIdentityProvider.Claims) -> Void)] = [
            ("another nonce", { $0.nonce = "a-nonce-of-another-sign-in" }),
            ("no nonce", { $0.nonce = nil }),
            ("another audience", { $0.aud = "com.other.app" }),
            ("the native app's audience", { $0.aud = AppleWebSignInTests.bundleId }),
            ("expired", { $0.exp = Int(Date().timeIntervalSince1970) - 10 }),
            ("another issuer", { $0.iss = "https://evil.example.com" })
        ]
        for (name, change) in changes {
            let begun = try await begin(return: Self.deepLink, as: Self.user())
            Self.apple.tamperNextIDToken(change)
            let r = try await callback(begun.fields, cookie: begun.cookie)
            XCTAssertEqual(r.status, 401, "\(name): \(r.text)")
            XCTAssertEqual(r.errorCode, "invalidIdentityToken", name)
        }
        XCTAssertTrue(Self.apple.refusals.isEmpty, "Apple took every client secret: \(Self.apple.refusals)")
    }

    // MARK: - Native sign-in and linking

    func testBothListedAudiencesSignInNatively() async throws {
        let sub = "native." + UUID().uuidString.prefix(8)
        let ios = try await client.json(
            "POST", "/v1/sessions/apple",
            ["identityToken": Self.apple.identity.token(.init(aud: Self.bundleId, sub: sub))])
        XCTAssertEqual(ios.status, 201, ios.text)
        let web = try await client.json(
            "POST", "/v1/sessions/apple",
            ["identityToken": Self.apple.identity.token(.init(aud: Self.servicesId, sub: sub))])
        XCTAssertEqual(web.status, 200, web.text)
        XCTAssertEqual(try session(web).accountId, try session(ios).accountId)
        let other = try await client.json(
            "POST", "/v1/sessions/apple",
            ["identityToken": Self.apple.identity.token(.init(aud: "com.other.app", sub: sub))])
        XCTAssertEqual(other.status, 401)
        XCTAssertEqual(other.errorCode, "invalidIdentityToken")
    }

    func testLinkingAppleToAnAccount() async throws {
        func signUp() async throws -> Session {
            let r = try await client.json(
                "POST", "/v1/accounts",
                ["email": "link-\(UUID().uuidString.prefix(8))@example.com", "password": "correct horse battery"])
            XCTAssertEqual(r.status, 201, r.text)
            return try session(r)
        }
        let owner = try await signUp(), other = try await signUp()
        let sub = "link." + UUID().uuidString.prefix(8)
        let token = Self.apple.identity.token(
            .init(aud: Self.bundleId, sub: sub, email: "linked@privaterelay.example.com", emailVerified: true))
        let linked = try await client.json("POST", "/v1/me/apple", ["identityToken": token], token: owner.access)
        XCTAssertEqual(linked.status, 200, linked.text)
        XCTAssertTrue(try linked.decode(Identities.self).identities.contains { $0.type == "apple" }, linked.text)
        let again = try await client.json("POST", "/v1/me/apple", ["identityToken": token], token: owner.access)
        XCTAssertEqual(again.status, 200, "linking twice is harmless: \(again.text)")
        let taken = try await client.json("POST", "/v1/me/apple", ["identityToken": token], token: other.access)
        XCTAssertEqual(taken.status, 409, taken.text)
        XCTAssertEqual(taken.errorCode, "appleIdInUse")
        // Sign in with Apple now opens the account it was linked to.
        let signIn = try await client.json("POST", "/v1/sessions/apple", ["identityToken": token])
        XCTAssertEqual(signIn.status, 200, signIn.text)
        XCTAssertEqual(try session(signIn).accountId, owner.accountId)
        let forged = try await client.json(
            "POST", "/v1/me/apple",
            ["identityToken": Self.apple.identity.unsignedToken(.init(aud: Self.bundleId, sub: "x"))],
            token: owner.access)
        XCTAssertEqual(forged.status, 401)
        XCTAssertEqual(forged.errorCode, "invalidIdentityToken")
        let anonymous = try await client.json("POST", "/v1/me/apple", ["identityToken": token])
        XCTAssertEqual(anonymous.status, 401)
    }

    // MARK: - Deletion revokes Apple's token

    func testDeletingAnAccountRevokesApplesToken() async throws {
        let user = Self.user()
        let s = try session(try await exchange(try await signInCode(as: user)))
        let deleted = try await client.send("DELETE", "/v1/me", headers: ["Authorization": "Bearer \(s.access)"])
        XCTAssertEqual(deleted.status, 204, deleted.text)
        let revoked = try await Self.stack.eventually(20) { Self.apple.revokedSubjects.contains(user.sub) }
        XCTAssertTrue(revoked, "Apple's refresh token was revoked")
        let left = try await sql("SELECT count(*) AS n FROM accounts.apple_revocations WHERE subject = $1", [user.sub])
            .first?.decode("n", as: Int.self)
        XCTAssertEqual(left, 0, "the outbox forgets a revoked token")
    }

    /// Apple down: the deletion still succeeds at once; the revocation waits in the outbox, is
    /// tried again, survives accounts being killed, and happens once Apple is back.
    func testDeletionRevokesAtAppleOnceAppleIsBackEvenAfterARestart() async throws {
        let user = Self.user()
        let s = try session(try await exchange(try await signInCode(as: user)))
        Self.apple.setDown(true)
        let before = Self.apple.revokeAttemptsWhileDown
        let started = Date()
        let deleted = try await client.send("DELETE", "/v1/me", headers: ["Authorization": "Bearer \(s.access)"])
        XCTAssertEqual(deleted.status, 204, deleted.text)
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "deletion does not wait for Apple")
        let tried = try await Self.stack.eventually(20) { Self.apple.revokeAttemptsWhileDown > before }
        XCTAssertTrue(tried, "the revocation was tried while Apple was down")
        XCTAssertFalse(Self.apple.revokedSubjects.contains(user.sub))
        // Killed while an attempt is out, a revocation waits out its 60 s claim; this test kills
        // accounts once Apple's 503 is recorded (the next try set by the backoff, seconds away).
        let recorded = try await Self.stack.eventually(20) {
            try await self.sql(
                "SELECT count(*) AS n FROM accounts.apple_revocations WHERE subject = $1 AND next_attempt_at < now() + interval '30 seconds'",
                [user.sub]
            ).first?.decode("n", as: Int.self) == 1
        }
        XCTAssertTrue(recorded, "the failed attempt's backoff was recorded")

        let killed = try Self.stack.pid("accounts")
        kill(killed, SIGKILL)
        let gone = try await Self.stack.gone(killed)
        XCTAssertTrue(gone, "the killed accounts is gone")
        try await Self.stack.restart("accounts")
        Self.apple.setDown(false)
        let revoked = try await Self.stack.eventually(45) { Self.apple.revokedSubjects.contains(user.sub) }
        XCTAssertTrue(revoked, "revoked after Apple came back, by the restarted accounts")
        let me = try await client.get("/v1/me", token: s.access)
        XCTAssertEqual(me.status, 401, "the deleted account's session stays revoked")
    }

    // MARK: - The redeem page in a browser

    func testTheRedeemPageSignsInWithAppleAndRedeemsInChromium() async throws {
        let code = "APPLE-" + UUID().uuidString.prefix(6)
        let made = try await client.json(
            "POST", "/v1/coupons", ["code": code, "kind": "freePeriod", "duration": ["unit": "month", "count": 1]],
            token: Self.stack.adminKey)
        XCTAssertEqual(made.status, 201, made.text)
        let user = Self.user()
        Self.apple.signInNext(user)
        let dir = Project.root.appendingPathComponent("test-output")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let shot = dir.appendingPathComponent("redeem-apple-signed-in.png")
        let out = try Subprocess.run(
            "/usr/bin/python3",
            [
                Project.root.appendingPathComponent("Tests/Browser/apple_flow.py").path,
                Self.stack.gateway.absoluteString, code, shot.path
            ])
        struct Flow: Decodable {
            let ok: Bool
            let button: Bool?
            let signedInAs: String?
            let appleHiddenWhenSignedIn: Bool?
            let search: String?
            let result: String?
        }
        let result: Flow
        do {
            result = try JSONDecoder().decode(
                Flow.self, from: Data((out.split(separator: "\n").last.map(String.init) ?? "").utf8))
        } catch { throw TestFailure("\(error): \(out)") }
        XCTAssertEqual(result.ok, true, "\(result)")
        XCTAssertEqual(result.button, true, "the page shows Sign in with Apple")
        XCTAssertEqual(result.signedInAs, user.email)
        XCTAssertEqual(result.appleHiddenWhenSignedIn, true)
        XCTAssertEqual(result.search, "?code=\(code)", "the one-time code left the address bar; the coupon stayed")
        XCTAssertTrue((result.result ?? "").hasPrefix("Pro until "), "\(result)")
        XCTAssertTrue(FileManager.default.fileExists(atPath: shot.path))
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: shot.path.replacingOccurrences(of: ".png", with: "-button.png")))
        XCTAssertTrue(
            Self.apple.authorizations.contains { $0.query["nonce"] != nil && $0.query["response_mode"] == "form_post" })
    }
}
