import Foundation
import TestSupport
import XCTest

/// The Kotlin client (Clients/android) against the real stack: its JUnit 5 suite, built and run by
/// `Clients/android/build.sh test`, talks to a stack with Google Play set up as `PlayStoreTests`
/// has it (the fake Play Developer API behind the fake token endpoint, and RevenueCat). Its fake
/// `PlayBillingLauncher` buys through `FakePlayBilling`, which records the purchase at the fake
/// Play Developer API as Play would. The stack also mails to an SMTP sink the Kotlin tests read
/// over HTTP (`SMTPMailbox`), signs in with Apple's web flow against `FakeAppleID`, and gives
/// access tokens 5 s, so the client refreshes sessions throughout the run. This suite checks the
/// JUnit run's summary and report, and, from the fakes' side, that the client launched real offers
/// and the server acknowledged them.
final class AndroidClientTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var fixture: PlayFixture?
    nonisolated(unsafe) static var billing: FakePlayBilling?
    nonisolated(unsafe) static var mailbox: SMTPMailbox?
    nonisolated(unsafe) static var apple: FakeAppleID?
    static let playProduct = "premium_sub"
    static let basePlan = "android-monthly"
    static let servicesId = "dev.redeem.android.test.web"
    static let appleReturn = "dev.redeem.android.test:/apple-signed-in"

    override class func startSuite() throws {
        let fixture = try PlayFixture()
        Self.fixture = fixture
        billing = try FakePlayBilling(play: fixture.play)
        fixture.play.addBasePlan(productId: playProduct, basePlanId: basePlan, [.init("US", "USD", "9.99")])
        let mailbox = try SMTPMailbox()
        Self.mailbox = mailbox
        let key = try TestAppleAPIKey(keyId: "DROIDKEY12")
        let apple = try FakeAppleID(teamId: "TEAM4DROID", keyId: key.keyId, clientSecretKey: key.key)
        Self.apple = apple
        let port = try Project.freePort()
        let signInWithApple = [
            "REDEEM_HTTP_PORT": String(port),
            "REDEEM_APPLE_CLIENT_ID": servicesId,
            "REDEEM_APPLE_SERVICES_ID": servicesId,
            "REDEEM_APPLE_TEAM_ID": "TEAM4DROID",
            "REDEEM_APPLE_KEY_ID": key.keyId,
            "REDEEM_APPLE_PRIVATE_KEY": key.privateKeyFile.path,
            "REDEEM_APPLE_REDIRECT_URI": "http://127.0.0.1:\(port)/v1/sessions/apple/callback",
            "REDEEM_APPLE_JWKS": apple.keysURL.absoluteString,
            "REDEEM_APPLE_AUTHORIZE_URL": apple.authorizeURL.absoluteString,
            "REDEEM_APPLE_TOKEN_URL": apple.tokenURL.absoluteString,
            "REDEEM_APPLE_REVOKE_URL": apple.revokeURL.absoluteString,
            "REDEEM_APPLE_RETURN_URLS": appleReturn,
        ]
        let environment = fixture.environment.merging(mailbox.environment) { a, _ in a }
            .merging(signInWithApple) { a, _ in a }.merging(["REDEEM_ACCESS_TOKEN_TTL": "5"]) { a, _ in a }
        stack = try Stack(environment: environment)
    }

    override class func stopSuite() {
        stack?.stop()
        let done = DispatchSemaphore(value: 0)
        Task {
            await billing?.stop()
            await fixture?.stop()
            await mailbox?.stop()
            await apple?.stop()
            done.signal()
        }
        done.wait()
    }

    /// The JUnit tests that must have run and passed, the contract test among them: with
    /// `REDEEM_REQUIRE_EXAMPLES=1` an operation the client calls without an example fails it.
    static let kotlinTests = [
        "signUpThenSignInOnAnotherClientReachesTheSameAccount",
        "aPlaySubscriberSeesWhereToManageItAndItsStoreEntitlement",
        "validateNamesTheBasePlansWhoseOfferIsLive", "aPlayDiscountIsBoughtPostedAndAwaitedToCompleted",
        "itemAlreadyOwnedGivesTheUseBack", "anOfferNotLiveYetIsOfferNotAvailableYet",
        "aFreePeriodIsGrantedWithoutPlayAndShowsInEntitlements", "aPendingRedemptionSurvivesARelaunch",
        "theChallengeIsRfc7636sS256", "theStartUrlCarriesTheReturnAndTheChallenge",
        "theCodeIsReadFromTheDeepLinkAndAnErrorIsThrown", "anUnknownCodeIsRefusedByTheServerWithItsCode",
        "theWebFlowWithPkceEndsInASessionThatReadsTheAccount",
        "anExpiredAccessTokenIsRefreshedOnceForCallsRefusedTogether", "aRefusedRefreshSignsTheClientOut",
        "anEmailIsVerifiedWithTheMailedCode", "aForgottenPasswordIsResetWithTheMailedCode",
        "validatesWebOnlyRefusalCarriesTheRedeemPage", "redeemsWebOnlyErrorCarriesTheRedeemPage",
        "everyExampleBodyOfTheDocumentDecodes",
    ]

    func testTheKotlinClientPassesItsSuiteAgainstTheStack() async throws {
        let fixture = try XCTUnwrap(Self.fixture), billing = try XCTUnwrap(Self.billing)
        // An account RevenueCat holds a Play subscription for: the client reads its managementUrl.
        let email = "android-subscriber-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let password = "a long subscriber passphrase"
        let made = try await Self.stack.client.json("POST", "/v1/accounts", ["email": email, "password": password])
        XCTAssertEqual(made.status, 201, made.text)
        let subscriber = try made.decode(AccountSessionBody.self).account
        fixture.revenueCat.addStorePurchase(
            try XCTUnwrap(subscriber.appUserId),
            .init(productId: Self.playProduct, store: "play_store", entitlementId: "pro",
                  expires: Date().addingTimeInterval(20 * 86_400), basePlanId: Self.basePlan))

        let client = Project.root.appendingPathComponent("Clients/android")
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("redeem-android-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: state) }
        var environment = ProcessInfo.processInfo.environment
        environment["REDEEM_GATEWAY_URL"] = Self.stack.gateway.absoluteString
        environment["REDEEM_ADMIN_KEY"] = Self.stack.adminKey
        environment["REDEEM_TEST_PLAY_BILLING_URL"] = billing.url.absoluteString
        environment["REDEEM_TEST_PLAY_PRODUCT"] = Self.playProduct
        environment["REDEEM_TEST_PLAY_BASE_PLAN"] = Self.basePlan
        environment["REDEEM_TEST_SUBSCRIBER_EMAIL"] = email
        environment["REDEEM_TEST_SUBSCRIBER_PASSWORD"] = password
        environment["REDEEM_TEST_STATE_DIR"] = state.path
        environment["REDEEM_TEST_MAILBOX_URL"] = try XCTUnwrap(Self.mailbox).url.absoluteString
        environment["REDEEM_TEST_APPLE_RETURN"] = Self.appleReturn
        environment["REDEEM_REQUIRE_EXAMPLES"] = "1"
        let out = state.appendingPathComponent("junit.out").path
        let run = try Subprocess("/bin/bash", [client.appendingPathComponent("build.sh").path, "test"],
                                 environment: environment, stdout: out, stderr: out)
        let status = run.wait()
        let output = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
        let summary = JUnitSummary(output)
        XCTAssertEqual(status, 0, output)
        XCTAssertEqual(summary.count("tests failed"), 0, output)
        XCTAssertEqual(summary.count("tests aborted") ?? 0, 0, "nothing skipped: \(output)")
        XCTAssertGreaterThanOrEqual(summary.count("tests successful") ?? 0, Self.kotlinTests.count, output)

        let reportFile = client.appendingPathComponent("build/test-reports/TEST-junit-jupiter.xml")
        let report = (try? String(contentsOf: reportFile, encoding: .utf8)) ?? ""
        let cases = report.components(separatedBy: "<testcase ").dropFirst()
        for test in Self.kotlinTests {
            let found = cases.first { $0.hasPrefix("name=\"\(test)()\"") }
            XCTAssertNotNil(found, "\(test) did not run: \(output)")
            let bad = ["<failure", "<error", "<skipped"].filter { found?.contains($0) == true }
            XCTAssertEqual(bad, [], "\(test): \(found ?? "")")
        }
        XCTAssertFalse(report.contains("<failure"), report)

        // From the fakes' side: the client launched ready offers with the account's obfuscated id,
        // Play refused one as already owned, and the server acknowledged every purchase it posted.
        let launches = billing.launches
        XCTAssertTrue(launches.contains { $0.responseCode == "ITEM_ALREADY_OWNED" }, "\(launches)")
        let bought = launches.filter { $0.responseCode == "OK" }
        XCTAssertGreaterThanOrEqual(bought.count, 3, "\(launches)")
        XCTAssertTrue(launches.allSatisfy { $0.obfuscatedAccountId.count == 64 && $0.basePlanId == Self.basePlan })
        let acknowledged = fixture.play.received.filter { $0.path.hasSuffix(":acknowledge") && $0.status == 200 }
        XCTAssertGreaterThanOrEqual(acknowledged.count, bought.count)
    }
}

/// The counts of the JUnit console launcher's summary (`[        12 tests successful      ]`).
struct JUnitSummary {
    let counts: [String: Int]

    init(_ output: String) {
        var counts: [String: Int] = [:]
        for line in output.split(separator: "\n") {
            let inner = line.trimmingCharacters(in: .whitespaces)
            guard inner.hasPrefix("["), inner.hasSuffix("]") else { continue }
            let words = inner.dropFirst().dropLast().split(separator: " ")
            guard words.count >= 3, let n = Int(words[0]) else { continue }
            counts[words.dropFirst().joined(separator: " ")] = n
        }
        self.counts = counts
    }

    func count(_ name: String) -> Int? { counts[name] }
}
