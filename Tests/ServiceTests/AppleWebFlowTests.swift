import Cryptography
import Foundation
import Testing
import TestSupport
@testable import AccountsService
@testable import GatewayService
@testable import Core
@testable import Runtime

/// The pure parts of Sign in with Apple's web flow: which return URLs are allowed,
/// the binding of state and nonce to the browser's cookie (time as an input), the client secret
/// and the settings' checks.
@Suite struct AppleWebFlowTests {
    @Test func returnURLsAreTheRedeemPageOrListedOnes() throws {
        let rule = try ReturnURLRule(["com.example.app:/apple", "https://app.example.com/apple/*"])
        for fine in ["/redeem", "/redeem?apple=1&coupon=SPRING", "com.example.app:/apple", "https://app.example.com/apple/", "https://app.example.com/apple/done?x=1"] {
            #expect(try rule.check(fine) == fine)
        }
        for refused in ["", "/redeemx", "//evil.example.com", "/redeem#x", "/redeem?a=b c", "com.example.app:/apple2", "com.example.app:/apple?x=1",
                        "https://app.example.com/apple", "https://app.example.com/apple/../x", "https://app.example.com.evil.example.com/apple/",
                        "https://evil.example.com/?https://app.example.com/apple/", "/redeem\n?x", String(repeating: "a", count: 3000)] {
            #expect(throws: ServiceError.self, "\(refused.prefix(60).debugDescription)") { try rule.check(refused) }
            do { _ = try rule.check(refused) } catch let e as ServiceError { #expect(e.code == .returnNotAllowed) }
        }
        #expect(throws: ConfigError.self) { try ReturnURLRule(["not a url"]) }
        #expect(throws: ConfigError.self) { try ReturnURLRule(["https://app.example.com/cb#frag"]) }
        #expect(throws: ConfigError.self) { try ReturnURLRule(["https://app.example.com*"]) }
        #expect(ReturnURLRule.appending("/redeem", "code", "a b") == "/redeem?code=a%20b")
        #expect(ReturnURLRule.appending("/redeem?apple=1", "code", "x_y-z") == "/redeem?apple=1&code=x_y-z")
    }

    @Test func theCookieBindsStateAndNonceAndExpires() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let binding = AppleSignInBinding(returnURL: "/redeem?apple=1", now: now)
        let read = try #require(AppleSignInBinding(cookie: binding.cookie, now: now.addingTimeInterval(599)))
        #expect(read == binding)
        #expect(read.matches(state: binding.state))
        #expect(!read.matches(state: binding.nonce))
        #expect(binding.state != binding.nonce)
        #expect(!binding.cookie.contains(binding.state) && !binding.cookie.contains(binding.nonce))
        #expect(AppleSignInBinding(cookie: binding.cookie, now: now.addingTimeInterval(601)) == nil, "older than 10 minutes")
        let other = AppleSignInBinding(returnURL: "/redeem?apple=1", now: now)
        #expect(!read.matches(state: other.state), "another browser's state")
        // A cookie whose return was changed derives other values: the state no longer matches.
        let parts = binding.cookie.split(separator: ".")
        let altered = "\(parts[0]).\(parts[1]).\(Base64URL.encode(Array("com.evil:/x".utf8)))"
        #expect(AppleSignInBinding(cookie: altered, now: now).map { $0.matches(state: binding.state) } == false)
        for garbage in ["", "a.b", "x.1.y", String(repeating: "A", count: 43) + ".notanumber.Lw"] {
            #expect(AppleSignInBinding(cookie: garbage, now: now) == nil)
        }
    }

    /// The code's binding: a browser's verifier comes from its cookie's secret; an app's
    /// challenge rides in the cookie, bound into the state, and only its verifier matches.
    @Test func theSignInCodeIsBoundToTheBrowserOrTheAppsVerifier() throws {
        let now = Date()
        let browser = AppleSignInBinding(returnURL: "/redeem?apple=1", now: now)
        #expect(AppleSignInBinding.verifies(browser.verifier, challenge: browser.exchangeChallenge))
        let read = try #require(AppleSignInBinding(cookie: browser.cookie, now: now.addingTimeInterval(700), grace: 120))
        #expect(read.verifier == browser.verifier, "the exchange, after the callback, still reads the cookie")
        #expect(AppleSignInBinding(cookie: browser.cookie, now: now.addingTimeInterval(700)) == nil)
        let another = AppleSignInBinding(returnURL: "/redeem?apple=1", now: now)
        #expect(!AppleSignInBinding.verifies(another.verifier, challenge: browser.exchangeChallenge))

        let verifier = Crypto.randomToken(bytes: 32)
        let challenge = Base64URL.encode(Crypto.sha256(Array(verifier.utf8)))
        let app = AppleSignInBinding(returnURL: "myapp://signed-in", challenge: challenge, now: now)
        let back = try #require(AppleSignInBinding(cookie: app.cookie, now: now))
        #expect(back == app && back.challenge == challenge)
        #expect(AppleSignInBinding.verifies(verifier, challenge: app.exchangeChallenge))
        #expect(!AppleSignInBinding.verifies(app.verifier, challenge: app.exchangeChallenge), "the cookie alone doesn't exchange an app's code")
        // A challenge swapped in the cookie changes the state Apple echoes.
        let swapped = String(app.cookie.dropLast(43)) + Base64URL.encode(Crypto.sha256(Array("mine".utf8)))
        #expect(try #require(AppleSignInBinding(cookie: swapped, now: now)).matches(state: app.state) == false)
        #expect(AppleSignInBinding.isChallenge(challenge) && !AppleSignInBinding.isChallenge("short"))
        #expect(AppleSignInBinding.isVerifier(verifier) && !AppleSignInBinding.isVerifier("short") && !AppleSignInBinding.isVerifier(verifier + " "))
    }

    @Test func theClientSecretIsAnES256JWTOfTheTeamForTheServicesID() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let key = ES256Key.generate()
        let file = dir.appendingPathComponent("AuthKey.p8")
        try Data(PEM.encode(key.privateKeyPKCS8!, label: "PRIVATE KEY").utf8).write(to: file)
        var env: [String: String] = [
            "REDEEM_APPLE_SERVICES_ID": "com.example.web", "REDEEM_APPLE_TEAM_ID": "TEAM123456", "REDEEM_APPLE_KEY_ID": "KEY1234567",
            "REDEEM_APPLE_PRIVATE_KEY": file.path, "REDEEM_APPLE_REDIRECT_URI": "https://redeem.example.com/v1/sessions/apple/callback",
        ]
        let settings = try #require(try AppleWebSettings(env: Environment(env), clientIds: ["com.example.app", "com.example.web"], jwks: "https://x/keys"))
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let secret = try #require(settings.clientSecret(now: now))
        let jws = try #require(CompactJWS(secret))
        #expect(jws.isSigned(by: key))
        let header = try JSONDecoder().decode(JWT.Header.self, from: Data(jws.header))
        #expect(header.alg == "ES256" && header.kid == "KEY1234567")
        let claims = try JSONDecoder().decode(AppleClientSecretClaims.self, from: Data(jws.payload))
        #expect(claims.iss == "TEAM123456" && claims.sub == "com.example.web" && claims.aud == "https://appleid.apple.com")
        #expect(claims.iat == 1_800_000_000 && claims.exp == 1_800_000_300)

        let url = settings.authorize(AppleSignInBinding(returnURL: "/redeem", now: now))
        #expect(url.hasPrefix("https://appleid.apple.com/auth/authorize?client_id=com.example.web&"))
        #expect(url.contains("response_mode=form_post") && url.contains("scope=name%20email") && url.contains("response_type=code%20id_token"))

        // Off without the Services ID; with it, the rest is required, and it must be an audience.
        #expect(try AppleWebSettings(env: Environment([:]), clientIds: [], jwks: nil) == nil)
        #expect(throws: ConfigError.self) { try AppleWebSettings(env: Environment(env), clientIds: ["com.example.app"], jwks: "https://x/keys") }
        #expect(throws: ConfigError.self) { try AppleWebSettings(env: Environment(env), clientIds: ["com.example.web"], jwks: nil) }
        env["REDEEM_APPLE_PRIVATE_KEY"] = dir.appendingPathComponent("missing.p8").path
        #expect(throws: ConfigError.self) { try AppleWebSettings(env: Environment(env), clientIds: ["com.example.web"], jwks: "https://x/keys") }
        env["REDEEM_APPLE_PRIVATE_KEY"] = file.path
        env["REDEEM_APPLE_TEAM_ID"] = nil
        #expect(throws: ConfigError.self) { try AppleWebSettings(env: Environment(env), clientIds: ["com.example.web"], jwks: "https://x/keys") }
    }

    /// The redeem page's button shows only where the web flow is configured.
    @Test func theRedeemPageOffersAppleOnlyWhenConfigured() throws {
        #expect(RedeemPage.html.contains(#"<div id="apple-area" class="apple-area" hidden>"#))
        #expect(!RedeemPage.htmlWithApple.contains(#"class="apple-area" hidden"#))
        #expect(RedeemPage.htmlWithApple.contains(#"<button type="button" id="apple-sign-in" class="apple">Sign in with Apple</button>"#))
        let plain = ["REDEEM_BUS_SECURITY": "plain"]
        let off = try GatewayConfig(env: Environment(plain))
        #expect(!off.appleWebSignIn)
        #expect(try GatewayConfig(env: Environment(plain.merging(["REDEEM_APPLE_SERVICES_ID": "com.example.web"]) { $1 })).appleWebSignIn)
    }
}
