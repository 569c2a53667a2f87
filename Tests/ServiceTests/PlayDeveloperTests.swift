import Foundation
import Synchronization
import Testing
import TestSupport
@testable import Core
@testable import Cryptography
@testable import GrantsService
@testable import Runtime

/// Grants' Google auth and Play Developer API client against the fake token endpoint and the fake
/// Play Developer API: real HTTP servers on loopback that check the service account's assertion
/// and the access token, and answer in Google's shapes. Pauses are recorded instead of slept.
@Suite struct PlayDeveloperTests {
    static let product = "premium"
    static let monthly = "monthly"

    struct World {
        let account: TestGoogleServiceAccount
        let oauth: FakeGoogleOAuth
        let play: FakePlayDeveloperAPI
        let client: PlayDeveloperClient
        let pauses: AppStoreConnectTests.Pauses

        func stop() async {
            await play.stop()
            await oauth.stop()
        }
    }

    func world(account: TestGoogleServiceAccount? = nil, signer: GoogleServiceAccount? = nil, maxAttempts: Int = 5) throws -> World {
        let account = try account ?? TestGoogleServiceAccount()
        let oauth = try FakeGoogleOAuth(account: account)
        let play = try FakePlayDeveloperAPI(oauth: oauth)
        play.addBasePlan(productId: Self.product, basePlanId: Self.monthly, [.init("US", "USD", "9.99"), .init("DE", "EUR", "8.99"), .init("GB", "GBP", "7.99")])
        let pauses = AppStoreConnectTests.Pauses()
        let retry = AppleRetry(policy: RetryPolicy(initial: 1, max: 300), maxAttempts: maxAttempts, sleep: pauses.sleep, random: { 0.5 })
        let tokens = GoogleAccessTokens(account: try signer ?? account.account(), tokenURL: oauth.url, timeout: Project.callTimeout, retry: retry)
        let client = PlayDeveloperClient(base: play.url, packageName: play.packageName, tokens: tokens, timeout: Project.callTimeout, retry: retry)
        return World(account: account, oauth: oauth, play: play, client: client, pauses: pauses)
    }

    static let terms = StoreOfferTerms(kind: .percentOff, percentOff: 25, amountOff: nil, duration: .init(unit: "month", count: 1), periodCount: 3)

    // MARK: Auth

    @Test func theKeyFileSignsAnAssertionGoogleTakes() throws {
        let account = try TestGoogleServiceAccount()
        let read = try account.account()
        #expect(read.email == account.email && read.keyId == account.keyId && read.key.algorithm == .rs256)
        let now = Date()
        let assertion = try read.assertion(scope: GoogleServiceAccount.androidPublisherScope, audience: "https://oauth2.googleapis.com/token", now: now,
                                           lifetime: 7200)
        let (header, claims) = try JWT.verify(assertion, as: GoogleServiceAccount.Claims.self, algorithm: .rs256) { $0 == account.keyId ? account.key : nil }
        #expect(header.alg == "RS256" && header.kid == account.keyId)
        #expect(claims.iss == account.email && claims.aud == "https://oauth2.googleapis.com/token")
        #expect(claims.scope == "https://www.googleapis.com/auth/androidpublisher")
        #expect(claims.exp - claims.iat == 3600, "cut to Google's hour")
    }

    @Test func aKeyFileWithoutAnRSAKeyIsRefused() throws {
        let bad = Data(#"{"type":"service_account","client_email":"a@b.iam.gserviceaccount.com","private_key":"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}"#.utf8)
        #expect(throws: GoogleServiceAccount.Failure.self) { try GoogleServiceAccount(json: bad) }
        #expect(throws: GoogleServiceAccount.Failure.self) { try GoogleServiceAccount(json: Data(#"{"type":"authorized_user"}"#.utf8)) }
    }

    @Test func oneTokenServesManyCallsUntilShortlyBeforeItExpires() async throws {
        let w = try world()
        defer { Task { await w.stop() } }
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<6 { group.addTask { _ = try? await w.client.basePlans(productId: Self.product) } }
        }
        #expect(w.oauth.exchanges == 1, "concurrent callers wait for one exchange")
        // A token with less than a minute left is renewed before it is sent.
        w.oauth.setTokenLifetime(30)
        await w.client.tokens.invalidateAll()
        _ = try await w.client.basePlans(productId: Self.product)
        _ = try await w.client.basePlans(productId: Self.product)
        #expect(w.oauth.exchanges == 3)
    }

    @Test func anAssertionSignedByAnotherKeyGetsNoTokenAndNoCallIsMade() async throws {
        let stranger = try TestGoogleServiceAccount()
        let owner = try TestGoogleServiceAccount()
        // The right email and key id, the wrong key.
        let forged = GoogleServiceAccount(email: owner.email, keyId: owner.keyId, key: try stranger.account().key)
        let w = try world(account: owner, signer: forged)
        defer { Task { await w.stop() } }
        await #expect(throws: AppleCallError.refused(status: 400, message: "Google refused the service account's assertion (400): invalid_grant: Invalid JWT Signature.")) {
            _ = try await w.client.basePlans(productId: Self.product)
        }
        #expect(w.oauth.refusals == 1 && w.play.received.isEmpty)
    }

    @Test func aRevokedTokenIsReplacedOnce() async throws {
        let w = try world()
        defer { Task { await w.stop() } }
        _ = try await w.client.basePlans(productId: Self.product)
        w.oauth.revokeAll()
        let plans = try await w.client.basePlans(productId: Self.product)
        #expect(plans.map(\.basePlanId) == [Self.monthly] && w.oauth.exchanges == 2)
        #expect(w.play.received.map(\.status) == [200, 401, 200])
    }

    // MARK: Offers

    @Test func anOfferIsMadeAsADraftThenActivatedAndDeactivated() async throws {
        let w = try world()
        defer { Task { await w.stop() } }
        let plans = try await w.client.basePlans(productId: Self.product)
        let plan = try #require(plans.first)
        #expect(plan.prices["US"] == PlayMoney(currencyCode: "USD", units: "9", nanos: 990_000_000))
        let request = try PlayOfferRequest(productId: Self.product, offerId: "spring25-1a2b3c4d", terms: Self.terms, basePlan: plan)
        #expect(try await w.client.offer(productId: Self.product, basePlanId: Self.monthly, offerId: request.offerId) == nil)
        let made = try await w.client.createOffer(productId: Self.product, basePlanId: Self.monthly, offerId: request.offerId,
                                                  document: request.document(packageName: w.play.packageName))
        #expect(made.state == "DRAFT" && made.offerId == "spring25-1a2b3c4d")
        let offer = try #require(w.play.offers.first)
        #expect(offer.regionalConfigs.keys.sorted() == ["DE", "GB", "US"])
        #expect(offer.regionalConfigs["US"]?["relativeDiscount"] as? Double == 0.25)
        #expect(offer.tags == ["redeem-coupon"] && offer.document["targeting"] == nil)
        let phase = try #require((offer.document["phases"] as? [[String: any Sendable]])?.first)
        #expect(phase["recurrenceCount"] as? Int == 3 && phase["duration"] as? String == "P1M")

        #expect(try await w.client.setOffer(productId: Self.product, basePlanId: Self.monthly, offerId: made.offerId, active: true).state == "ACTIVE")
        #expect(try await w.client.setOffer(productId: Self.product, basePlanId: Self.monthly, offerId: made.offerId, active: true).state == "ACTIVE")
        #expect(try await w.client.offer(productId: Self.product, basePlanId: Self.monthly, offerId: made.offerId)?.state == "ACTIVE")
        #expect(try await w.client.setOffer(productId: Self.product, basePlanId: Self.monthly, offerId: made.offerId, active: false).state == "INACTIVE")

        // Made twice: Google's 409 with its message.
        await #expect(throws: AppleCallError.refused(status: 409, message: "Offer with ID spring25-1a2b3c4d already exists.")) {
            _ = try await w.client.createOffer(productId: Self.product, basePlanId: Self.monthly, offerId: made.offerId,
                                               document: request.document(packageName: w.play.packageName))
        }
    }

    @Test func anAmountOffIsTakenOffInItsCurrencyOnlyAndAFreePeriodIsFree() throws {
        let plan = PlayBasePlan(basePlanId: "monthly", state: "ACTIVE", prices: [
            "US": .init(currencyCode: "USD", units: "9", nanos: 990_000_000), "CA": .init(currencyCode: "USD", units: "12", nanos: nil),
            "DE": .init(currencyCode: "EUR", units: "8", nanos: 990_000_000),
        ])
        let amount = StoreOfferTerms(kind: .amountOff, percentOff: nil, amountOff: Money(amount: "2.50", currency: "usd"),
                                     duration: .init(unit: "week", count: 2), periodCount: 2)
        let off = try PlayOfferRequest(productId: "premium", offerId: "x", terms: amount, basePlan: plan)
        #expect(off.regions == ["US": .absolute(.init(currencyCode: "USD", units: "2", nanos: 500_000_000)),
                                "CA": .absolute(.init(currencyCode: "USD", units: "2", nanos: 500_000_000))])
        #expect(off.omitted == ["DE"] && off.duration == "P2W" && off.recurrenceCount == 2)
        let euros = StoreOfferTerms(kind: .amountOff, percentOff: nil, amountOff: Money(amount: "1", currency: "JPY"),
                                    duration: .init(unit: "month", count: 1), periodCount: 1)
        #expect(throws: OfferPricing.Problem.self) { try PlayOfferRequest(productId: "premium", offerId: "x", terms: euros, basePlan: plan) }
        let free = StoreOfferTerms(kind: .freePeriod, percentOff: nil, amountOff: nil, duration: .init(unit: "month", count: 3), periodCount: 1)
        let trial = try PlayOfferRequest(productId: "premium", offerId: "x", terms: free, basePlan: plan)
        #expect(trial.regions.values.allSatisfy { $0 == .free } && trial.duration == "P3M" && trial.recurrenceCount == 1)
    }

    @Test func readsAre429dAndRetriedWithBackoffAMakeOnlyAfterA429() async throws {
        let w = try world()
        defer { Task { await w.stop() } }
        w.play.throttleNext(2)
        let plans = try await w.client.basePlans(productId: Self.product)
        #expect(plans.count == 1 && w.pauses.all == [.milliseconds(1000), .milliseconds(2000)])

        let request = try PlayOfferRequest(productId: Self.product, offerId: "after-a-500", terms: Self.terms, basePlan: plans[0])
        w.play.failNext(1, status: 503)
        await #expect(throws: AppleCallError.retryLater(after: nil, reason: "Google Play answered 503")) {
            _ = try await w.client.createOffer(productId: Self.product, basePlanId: Self.monthly, offerId: request.offerId,
                                               document: request.document(packageName: w.play.packageName))
        }
        w.play.throttleNext(1)
        _ = try await w.client.createOffer(productId: Self.product, basePlanId: Self.monthly, offerId: request.offerId,
                                           document: request.document(packageName: w.play.packageName))
        #expect(w.play.offers.count == 1)
    }

    // MARK: Purchases

    @Test func aPurchaseIsReadInGooglesShapeAndAcknowledged() async throws {
        let w = try world()
        defer { Task { await w.stop() } }
        w.play.addPurchase(token: "token-1", .init(productId: Self.product, basePlanId: Self.monthly, offerId: "spring25-1a2b3c4d",
                                                   obfuscatedAccountId: "acct-1", testPurchase: true, linkedPurchaseToken: "token-0"))
        let purchase = try await w.client.purchase(token: "token-1")
        let item = try #require(purchase.lineItems.first)
        #expect(item.productId == Self.product && item.offerDetails?.offerId == "spring25-1a2b3c4d" && item.offerDetails?.basePlanId == Self.monthly)
        #expect(item.offerDetails?.offerTags == ["redeem-coupon"] && item.autoRenewingPlan?.recurringPrice?.milliunits == 9990)
        #expect(purchase.testPurchase != nil && purchase.linkedPurchaseToken == "token-0")
        #expect(purchase.externalAccountIdentifiers?.obfuscatedExternalAccountId == "acct-1" && !purchase.isAcknowledged)

        try await w.client.acknowledge(productId: Self.product, token: "token-1")
        #expect(try await w.client.purchase(token: "token-1").isAcknowledged && w.play.purchase("token-1")?.acknowledged == true)
        await #expect(throws: AppleCallError.refused(status: 400, message: "The purchase token was not found.")) {
            _ = try await w.client.purchase(token: "nobody-bought-this")
        }
    }

    /// The recorded price is the offer phase's (docs/stores.md): `subscriptionsv2` names the phase
    /// but carries only the base plan's recurring price, so in an offer's phase the price is the
    /// offer's own for the purchase's region, from the offer Google holds.
    @Test func aPurchaseInItsOffersPhasePaysTheOffersPriceNotTheBasePlans() async throws {
        let w = try world()
        defer { Task { await w.stop() } }
        let plan = try #require(try await w.client.basePlans(productId: Self.product).first)
        let request = try PlayOfferRequest(productId: Self.product, offerId: "spring25-1a2b3c4d", terms: Self.terms, basePlan: plan)
        _ = try await w.client.createOffer(productId: Self.product, basePlanId: Self.monthly, offerId: request.offerId,
                                           document: request.document(packageName: w.play.packageName))
        func price(_ token: String) async throws -> (PlayPhasePrice.Price?, String?) {
            let purchase = try await w.client.purchase(token: token)
            return try await PlayPhasePrice.read(purchase, try #require(purchase.lineItems.first), client: w.client)
        }
        // 25 % off 9.99 USD is 7.4925: 7.49 paid, where Google reports 9.99 recurring.
        w.play.addPurchase(token: "us", .init(productId: Self.product, basePlanId: Self.monthly, offerId: request.offerId, obfuscatedAccountId: "a"))
        let us = try await price("us")
        #expect(us.0 == .init(milliunits: 7490, currency: "USD") && us.1 == nil)
        #expect(try await w.client.purchase(token: "us").lineItems.first?.offerPhase?.introductoryPrice != nil)
        // In Germany, off the euro price.
        w.play.addPurchase(token: "de", .init(productId: Self.product, basePlanId: Self.monthly, offerId: request.offerId, obfuscatedAccountId: "a",
                                              recurringPrice: ("8", 990_000_000, "EUR"), regionCode: "DE"))
        #expect(try await price("de").0 == .init(milliunits: 6740, currency: "EUR"))
        // Past the offer's phase, or without an offer: the recurring price.
        w.play.addPurchase(token: "later", .init(productId: Self.product, basePlanId: Self.monthly, offerId: request.offerId, obfuscatedAccountId: "a",
                                                 offerPhase: "basePrice"))
        #expect(try await price("later").0 == .init(milliunits: 9990, currency: "USD"))
        w.play.addPurchase(token: "plain", .init(productId: Self.product, basePlanId: Self.monthly, offerId: nil, obfuscatedAccountId: "a"))
        #expect(try await price("plain").0 == .init(milliunits: 9990, currency: "USD"))
        // An offer Google no longer has, or a region it has no price for: the recurring price, and why.
        w.play.addPurchase(token: "gone", .init(productId: Self.product, basePlanId: Self.monthly, offerId: "gone-1", obfuscatedAccountId: "a"))
        let gone = try await price("gone")
        #expect(gone.0 == .init(milliunits: 9990, currency: "USD") && gone.1 != nil)
        w.play.addPurchase(token: "jp", .init(productId: Self.product, basePlanId: Self.monthly, offerId: request.offerId, obfuscatedAccountId: "a",
                                              recurringPrice: ("1200", 0, "JPY"), regionCode: "JP"))
        #expect(try await price("jp").0 == .init(milliunits: 1_200_000, currency: "JPY"))
    }

    /// Each of a phase's price forms, rounded to the currency's minor unit.
    @Test func anOfferPhasesPriceInEachForm() {
        func offer(_ config: PlayOffer.RegionalConfig) -> PlayOffer {
            PlayOffer(productId: "p", basePlanId: "b", offerId: "o", state: "ACTIVE", phases: [.init(recurrenceCount: 3, duration: "P1M", regionalConfigs: [config])])
        }
        let usd = PlayPhasePrice.Price(milliunits: 9990, currency: "USD"), yen = PlayPhasePrice.Price(milliunits: 1_234_000, currency: "JPY")
        let us = "US"
        #expect(PlayPhasePrice.offerPrice(offer(.init(regionCode: us, relativeDiscount: 0.3)), region: us, recurring: usd)?.milliunits == 6990)
        #expect(PlayPhasePrice.offerPrice(offer(.init(regionCode: us, relativeDiscount: 0.25)), region: us, recurring: yen)?.milliunits == 926_000)
        #expect(PlayPhasePrice.offerPrice(offer(.init(regionCode: us, absoluteDiscount: PlayMoney(currencyCode: "USD", units: "2", nanos: 500_000_000))),
                                          region: us, recurring: usd)?.milliunits == 7490)
        #expect(PlayPhasePrice.offerPrice(offer(.init(regionCode: us, absoluteDiscount: PlayMoney(currencyCode: "USD", units: "20", nanos: nil))),
                                          region: us, recurring: usd)?.milliunits == 0)
        #expect(PlayPhasePrice.offerPrice(offer(.init(regionCode: us, absoluteDiscount: PlayMoney(currencyCode: "EUR", units: "2", nanos: nil))),
                                          region: us, recurring: usd) == nil, "an amount in another currency is not taken off")
        #expect(PlayPhasePrice.offerPrice(offer(.init(regionCode: us, price: PlayMoney(currencyCode: "USD", units: "4", nanos: 990_000_000))),
                                          region: us, recurring: usd) == .init(milliunits: 4990, currency: "USD"))
        #expect(PlayPhasePrice.offerPrice(offer(.init(regionCode: us, free: .init())), region: us, recurring: usd) == .init(milliunits: 0, currency: "USD"))
        #expect(PlayPhasePrice.offerPrice(offer(.init(regionCode: us, relativeDiscount: 0.3)), region: "DE", recurring: usd) == nil)
    }
}
