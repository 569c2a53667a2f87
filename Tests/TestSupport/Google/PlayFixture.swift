import Foundation

/// Google Play as a stack's suites meet it: a test service account, the fake Google token endpoint,
/// the fake Play Developer API behind it, the Pub/Sub push signer, and RevenueCat (whose
/// subscribers' Play subscriptions make `alreadyOwned`), with the stack settings that point at
/// them. Offers settle in 1 s; grants retries for at most 1 s and waits 2 s for a provider.
public final class PlayFixture: Sendable {
    public let account: TestGoogleServiceAccount
    public let oauth: FakeGoogleOAuth
    public let play: FakePlayDeveloperAPI
    public let pusher: GooglePushSender
    public let revenueCat: FakeRevenueCat
    public let package: String

    public init(package: String = "com.example.redeem") throws {
        self.package = package
        account = try TestGoogleServiceAccount()
        oauth = try FakeGoogleOAuth(account: account)
        play = try FakePlayDeveloperAPI(oauth: oauth, packageName: package)
        pusher = try GooglePushSender()
        revenueCat = try FakeRevenueCat()
    }

    /// The stack's environment for these fakes.
    public var environment: [String: String] {
        [
            "REDEEM_ENTITLEMENT_PROVIDER": "revenuecat", "REDEEM_REVENUECAT_URL": revenueCat.url.absoluteString,
            "REDEEM_REVENUECAT_KEY": "sk_rc_play",
            "REDEEM_PLAY_SERVICE_ACCOUNT": account.keyFile.path, "REDEEM_PLAY_PACKAGE_NAME": package,
            "REDEEM_GOOGLE_TOKEN_URL": oauth.url.absoluteString, "REDEEM_PLAY_API_URL": play.url.absoluteString,
            "REDEEM_PLAY_OFFER_SETTLE": "1", "REDEEM_GOOGLE_JWKS": pusher.jwksFile.path,
            "REDEEM_PLAY_PUSH_AUDIENCE": pusher.audience, "REDEEM_PLAY_PUSH_SERVICE_ACCOUNT": pusher.serviceAccount,
            "REDEEM_GRANT_MAX_RETRY_SECONDS": "1", "REDEEM_PROVIDER_TIMEOUT_SECONDS": "2",
        ]
    }

    public func stop() async {
        await play.stop()
        await oauth.stop()
        await revenueCat.stop()
    }
}
