import Foundation
import Testing
@testable import AccountsService
@testable import Core
@testable import Runtime

/// Password and record-name rules, and the session rules (docs/security.md), that need
/// no database.
@Suite struct AccountRulesTests {
    @Test func predictablePasswordsAreWeakWhateverTheirLength() {
        for weak in ["qwerty123456", "1qaz2wsx3edc", "abcdefghij", "a123456789", "          ", "\t\t\t\t\t\t\t\t\t\t", "zyxwvutsrqpo",
                     "aaaaabbbbbccccc", "9876543210x"] {
            #expect(throws: ServiceError.self, "\(weak.debugDescription)") { try AccountRules.checkPassword(weak) }
        }
        for fine in ["correct horse battery", "tr0ub4dor&3x", "qwerty-Lamp-Violet", "my 2 cats eat 9 mice"] {
            #expect(throws: Never.self, "\(fine)") { try AccountRules.checkPassword(fine) }
        }
    }

    // MARK: - Refresh retries

    static let rotation = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func aRetryWithinTheWindowIsAnsweredAgainAndAfterItRevokes() {
        let window: TimeInterval = 10
        let cases: [(TimeInterval, RefreshRetry.Decision)] = [(0, .answerAgain), (0.001, .answerAgain), (9.999, .answerAgain),
                                                              (10, .revoke), (10.001, .revoke), (60, .revoke), (86400, .revoke)]
        for (age, expected) in cases {
            let decision = RefreshRetry.decide(spentAt: Self.rotation, now: Self.rotation.addingTimeInterval(age), window: window, successorIsLive: true)
            #expect(decision == expected, "\(age) s after the rotation")
        }
    }

    @Test func aRetryRacingTheRotationItFollowsCountsAsInsideTheWindow() {
        // The retry's transaction began a moment before the exchange's did.
        #expect(RefreshRetry.decide(spentAt: Self.rotation, now: Self.rotation.addingTimeInterval(-0.05), window: 10, successorIsLive: true) == .answerAgain)
    }

    @Test func aRetryAfterTheNewTokenWasUsedOrTheSessionEndedRevokesEvenInsideTheWindow() {
        for age in [0.0, 1, 9.9] {
            #expect(RefreshRetry.decide(spentAt: Self.rotation, now: Self.rotation.addingTimeInterval(age), window: 10, successorIsLive: false) == .revoke)
        }
    }

    @Test func aWindowOfZeroTurnsRetriesOff() {
        #expect(RefreshRetry.decide(spentAt: Self.rotation, now: Self.rotation, window: 0, successorIsLive: true) == .revoke)
    }

    @Test func theDefaultWindowIsTenSecondsAndConfigurable() throws {
        #expect(try AccountsConfig(env: Environment([:])).refreshGrace == 10)
        #expect(try AccountsConfig(env: Environment(["REDEEM_REFRESH_GRACE": "1"])).refreshGrace == 1)
        #expect(try AccountsConfig(env: Environment(["REDEEM_REFRESH_GRACE": "0"])).refreshGrace == 0)
        #expect(throws: ConfigError.self) { try AccountsConfig(env: Environment(["REDEEM_REFRESH_GRACE": "61"])) }
        #expect(throws: ConfigError.self) { try AccountsConfig(env: Environment(["REDEEM_REFRESH_GRACE": "ten"])) }
    }

    @Test func theSealedPairOpensOnlyWithTheSpentTokenForItsSession() throws {
        let pair = SessionTokens(accessToken: "eyJ.access.sig", refreshToken: "rt_next", expiresAt: Date(timeIntervalSince1970: 1_800_000_900))
        let session = UUID.random()
        let sealed = try RefreshRetry.seal(pair, spentToken: "rt_spent", session: session)
        #expect(!String(decoding: sealed, as: UTF8.self).contains("rt_next"), "the new refresh token is not stored readable")
        let opened = try #require(RefreshRetry.open(sealed, spentToken: "rt_spent", session: session))
        #expect(opened.accessToken == pair.accessToken && opened.refreshToken == pair.refreshToken && opened.expiresAt == pair.expiresAt)
        #expect(RefreshRetry.open(sealed, spentToken: "rt_other", session: session) == nil)
        #expect(RefreshRetry.open(sealed, spentToken: "rt_spent", session: UUID.random()) == nil)
    }

    // MARK: - Sign in with Apple and existing emails

    @Test func appleJoinsOnlyAnAccountWhoseEmailWasProven() {
        // A password account's email was never proven: the Apple user gets an account of their own.
        #expect(AccountRules.appleEmailMatch(appleEmailVerified: true, accountEmailVerified: false) == .separateAccount)
        #expect(AccountRules.appleEmailMatch(appleEmailVerified: true, accountEmailVerified: true) == .join)
        // An email Apple did not verify proves nothing either way (409 emailInUse).
        #expect(AccountRules.appleEmailMatch(appleEmailVerified: false, accountEmailVerified: true) == .refuse)
        #expect(AccountRules.appleEmailMatch(appleEmailVerified: false, accountEmailVerified: false) == .refuse)
    }
}
