import Foundation
import Synchronization
import Testing
import TestSupport
@testable import Core
@testable import Cryptography
@testable import GrantsService
@testable import Runtime

/// Grants' App Store Connect client and provisioner against the fake App Store Connect, a real
/// HTTP server on loopback that checks Redeem's tokens and answers in Apple's JSON:API shapes.
/// Pauses are recorded instead of slept.
@Suite struct AppStoreConnectTests {
    static let subscription = "6450000001"
    static let other = "6450000002"

    /// The pauses the client asked for, none of them slept.
    final class Pauses: Sendable {
        let taken = Mutex<[Duration]>([])
        var sleep: Background.Sleep { { d in self.taken.withLock { $0.append(d) } } }
        var all: [Duration] { taken.withLock { $0 } }
    }

    struct World {
        let fake: FakeAppStoreConnect
        let client: AppStoreConnectClient
        let provisioner: OfferProvisioner
        let pauses: Pauses

        func point(_ territory: String, _ price: String, subscription: String = AppStoreConnectTests.subscription) -> String {
            fake.pricePoints(of: subscription).first { $0.territory == territory && $0.customerPrice == price }!.id
        }

        func calls(_ method: String, _ path: String) -> Int { fake.received.filter { $0.method == method && $0.path == path }.count }
    }

    func world() throws -> World {
        let key = try TestAppleAPIKey()
        let fake = try FakeAppStoreConnect(key: key)
        for id in [Self.subscription, Self.other] {
            fake.addSubscription(id, [
                .init(territory: "USA", currency: "USD", current: "9.99", points: ["0.99", "2.99", "4.49", "4.99", "5.99", "7.99", "9.99"]),
                .init(territory: "GBR", currency: "GBP", current: "8.99", points: ["0.99", "4.49", "4.99", "8.99"]),
                .init(territory: "JPN", currency: "JPY", current: "1200", points: ["120", "500", "650", "1200"]),
            ])
        }
        let pauses = Pauses()
        let client = AppStoreConnectClient(base: fake.url, token: key.issuer(.appStoreConnect), timeout: Project.callTimeout,
                                           retry: AppleRetry(policy: RetryPolicy(initial: 1, max: 300), sleep: pauses.sleep, random: { 0.5 }))
        return World(fake: fake, client: client, provisioner: OfferProvisioner(client: client), pauses: pauses)
    }

    static func spec(_ name: String = "redeem-offer-1", code: String = "SPRING-25", subscription: String = subscription, kind: CouponKind = .percentOff,
                     percentOff: Int? = 50, amountOff: Money? = nil, duration: CouponDuration = .init(unit: "month", count: 1), periodCount: Int = 3,
                     newCustomersOnly: Bool = true, maxRedemptions: Int? = 500, expiresAt: Date? = Date() + 30 * 86_400) -> AppStoreOfferSpec {
        AppStoreOfferSpec(subscriptionId: subscription, offerName: name, code: code, kind: kind, percentOff: percentOff, amountOff: amountOff,
                          duration: duration, periodCount: periodCount, newCustomersOnly: newCustomersOnly, maxRedemptions: maxRedemptions,
                          expiresAt: expiresAt)
    }

    static let keep: OfferProvisioner.Record = { _ in }

    static func done(_ outcome: AppStoreTaskOutcome) throws -> AppStoreOfferProgress {
        guard case .done(let progress) = outcome else { throw Unexpected(outcome: outcome) }
        return progress
    }

    struct Unexpected: Error { var outcome: AppStoreTaskOutcome }

    // MARK: Provisioning

    @Test func aDiscountGetsTheNearestPricePointNotAboveItInEachTerritoryAndItsCode() async throws {
        let w = try world()
        defer { Task { await w.fake.stop() } }
        let expires = Date() + 40 * 86_400
        let progress = try Self.done(await w.provisioner.provision(Self.spec(expiresAt: expires), from: .init(), ownActiveOffers: 0, record: Self.keep))

        let offer = try #require(w.fake.offers.first)
        #expect(w.fake.offers.count == 1 && offer.id == progress.offerId && offer.name == "redeem-offer-1")
        // 9.99 × 50 % = 4.995 → 4.99 (5.99 is nearer above, never taken); 8.99 → 4.495 → 4.49; 1200 → 600 → 500.
        #expect(offer.prices == ["USA": w.point("USA", "4.99"), "GBR": w.point("GBR", "4.49"), "JPN": w.point("JPN", "500")])
        #expect(offer.attributes == ["offerMode": "PAY_AS_YOU_GO", "duration": "ONE_MONTH", "offerEligibility": "REPLACE_INTRO_OFFERS"])
        #expect(offer.customerEligibilities == ["NEW"] && offer.numberOfPeriods == 3)

        let code = try #require(w.fake.customCodes.first)
        #expect(w.fake.customCodes.count == 1 && code.id == progress.customCodeId && code.offerId == offer.id)
        // Apple's own limits, not the coupon's 500 uses and 40 days: Redeem switches the code off at those, and may move them.
        #expect(code.customCode == "SPRING-25" && code.numberOfCodes == AppStoreLimits.maxRedemptions)
        #expect(code.expirationDate == AppStoreConnectClient.day(AppStoreLimits.latestExpiry(madeAt: Date())))
        #expect(abs(try #require(progress.codeCreatedAt).timeIntervalSince(code.createdDate)) < 0.002, "Apple's createdDate, kept")
        // Every call carried a token the fake took.
        #expect(!w.fake.received.isEmpty && w.fake.received.allSatisfy { (200..<300).contains($0.status) })
        #expect(w.fake.received.map { "\($0.method) \($0.path)" } == [
            "GET /v1/subscriptions/\(Self.subscription)/offerCodes", "GET /v1/subscriptions/\(Self.subscription)/prices",
            "GET /v1/subscriptions/\(Self.subscription)/pricePoints", "POST /v1/subscriptionOfferCodes",
            "GET /v1/subscriptionOfferCodes/\(offer.id)/customCodes", "POST /v1/subscriptionOfferCodeCustomCodes",
        ])
    }

    @Test func anAmountOffComesOffInItsCurrencyAndIsTheSameShareElsewhere() async throws {
        let w = try world()
        defer { Task { await w.fake.stop() } }
        _ = try Self.done(await w.provisioner.provision(Self.spec(kind: .amountOff, percentOff: nil, amountOff: Money(amount: "2.00", currency: "USD"),
                                                                  newCustomersOnly: false), from: .init(), ownActiveOffers: 0, record: Self.keep))
        let offer = try #require(w.fake.offers.first)
        // USA 9.99 − 2.00 = 7.99; 2.00 is 20.02 % of 9.99: GBR 8.99 → 7.19 → 4.99, JPN 1200 → 959.76 → 650.
        #expect(offer.prices == ["USA": w.point("USA", "7.99"), "GBR": w.point("GBR", "4.99"), "JPN": w.point("JPN", "650")])
        #expect(offer.customerEligibilities == ["NEW", "EXISTING", "EXPIRED"])
    }

    @Test func aFreePeriodIsAFreeTrialWithATerritoryPerPriceAndNoPricePoint() async throws {
        let w = try world()
        defer { Task { await w.fake.stop() } }
        _ = try Self.done(await w.provisioner.provision(Self.spec(kind: .freePeriod, percentOff: nil, duration: .init(unit: "week", count: 2), periodCount: 1),
                                                        from: .init(), ownActiveOffers: 0, record: Self.keep))
        let offer = try #require(w.fake.offers.first)
        let noPoints: [String: String?] = ["USA": nil, "GBR": nil, "JPN": nil]
        #expect(offer.prices == noPoints)
        #expect(offer.attributes["offerMode"] == "FREE_TRIAL" && offer.attributes["duration"] == "TWO_WEEKS" && offer.numberOfPeriods == 1)
        #expect(w.calls("GET", "/v1/subscriptions/\(Self.subscription)/pricePoints") == 0, "a free trial needs no price points")
    }

    /// The pure choice: the highest point at or below the discounted price; a territory with none
    /// is left out, and with none anywhere there is no offer.
    @Test func thePriceChoiceIsNeverAboveTheDiscountedPrice() throws {
        func d(_ text: String) -> Decimal { Decimal(string: text)! }
        let current = [OfferPricing.Current(territory: "USA", currency: "USD", price: d("9.99")), .init(territory: "DEU", currency: "EUR", price: d("8.99"))]
        let points = [OfferPricing.Point(id: "u1", territory: "USA", price: d("0.99")), .init(id: "u2", territory: "USA", price: d("4.99")),
                      .init(id: "u3", territory: "USA", price: d("5.00")), .init(id: "d1", territory: "DEU", price: d("1.99"))]
        #expect(try OfferPricing.choose(current: current, points: points, discount: .percent(50)) == .init(prices: ["USA": "u2", "DEU": "d1"], leftOut: []))
        #expect(try OfferPricing.choose(current: current, points: points, discount: .percent(90)) == .init(prices: ["USA": "u1"], leftOut: ["DEU"]))
        #expect(throws: OfferPricing.Problem.self) { try OfferPricing.choose(current: current, points: points, discount: .percent(95)) }
        #expect(throws: OfferPricing.Problem.self) { try OfferPricing.choose(current: current, points: points, discount: .amount(1, currency: "JPY")) }
        let targets = try OfferPricing.targets(current, .amount(5, currency: "EUR"))
        #expect(targets["DEU"] == d("3.99") && targets["USA"] == d("9.99") * (1 - 5 / d("8.99")))
    }

    @Test func a429IsWaitedOutAsAppleSaysAndMakesNoSecondOffer() async throws {
        let w = try world()
        defer { Task { await w.fake.stop() } }
        w.fake.throttleNext(2, retryAfter: 7)
        _ = try Self.done(await w.provisioner.provision(Self.spec(), from: .init(), ownActiveOffers: 0, record: Self.keep))
        #expect(w.pauses.all == [.seconds(7), .seconds(7)], "Retry-After, longer than the backoff's 1 s and 2 s")
        #expect(w.fake.received.prefix(3).map(\.status) == [429, 429, 200])

        // A make that is throttled is sent again: Apple did nothing but ask to wait.
        w.fake.throttleNext(1, retryAfter: 3)
        let spec = Self.spec("redeem-offer-2", code: "SPRING-26")
        _ = try Self.done(await w.provisioner.provision(spec, from: .init(), ownActiveOffers: 1, record: Self.keep))
        #expect(w.fake.offers.map(\.name) == ["redeem-offer-1", "redeem-offer-2"] && w.fake.customCodes.count == 2)
        #expect(w.calls("POST", "/v1/subscriptionOfferCodes") == 2)
    }

    @Test func aMakeThatFailsOnApple_sSideIsNotSentBlindlyAgain() async throws {
        let w = try world()
        defer { Task { await w.fake.stop() } }
        let offer = try await w.provisioner.offerPrices(Self.spec())
        let request = AppStoreOfferRequest(subscriptionId: Self.subscription, name: "redeem-offer-1", newCustomersOnly: true, mode: .payAsYouGo,
                                           duration: .oneMonth, numberOfPeriods: 1, prices: offer)
        w.fake.failNext(1, status: 503)
        await #expect(throws: AppleCallError.retryLater(after: nil, reason: "Apple answered 503")) { try await w.client.createOffer(request) }
        #expect(w.calls("POST", "/v1/subscriptionOfferCodes") == 1 && w.pauses.all.isEmpty, "not sent again: it may have been made")
        // A read is sent again after a 5xx, with the backoff.
        w.fake.failNext(2, status: 500)
        #expect(try await w.client.offers(subscriptionId: Self.subscription).isEmpty)
        #expect(w.pauses.all == [.seconds(1), .seconds(2)])
    }

    @Test func aRestartAfterTheOfferFindsItByNameAndMakesOnlyTheCode() async throws {
        let w = try world()
        defer { Task { await w.fake.stop() } }
        struct Crash: Error {}
        // The offer is made, but its id is never stored (killed before the write).
        let first = await w.provisioner.provision(Self.spec(), from: .init(), ownActiveOffers: 0, record: { _ in throw Crash() })
        guard case .retryLater(_, _, let lost) = first else { throw Unexpected(outcome: first) }
        #expect(lost.offerId != nil && w.fake.offers.count == 1 && w.fake.customCodes.isEmpty)

        let stored = Mutex<[AppStoreOfferProgress]>([])
        let progress = try Self.done(await w.provisioner.provision(Self.spec(), from: .init(), ownActiveOffers: 0,
                                                                   record: { p in stored.withLock { $0.append(p) } }))
        #expect(w.fake.offers.count == 1 && w.calls("POST", "/v1/subscriptionOfferCodes") == 1, "found by name, not made again")
        #expect(w.fake.customCodes.count == 1 && progress.offerId == w.fake.offers[0].id && progress.customCodeId == w.fake.customCodes[0].id)
        #expect(stored.withLock { $0.map(\.offerId) } == [progress.offerId, progress.offerId] && stored.withLock { $0.last } == progress,
                "each id stored as soon as it is known")

        // Killed after the code was made but before its id was stored: it is found, not made again.
        let before = w.fake.received.count
        let again = try Self.done(await w.provisioner.provision(Self.spec(), from: .init(offerId: progress.offerId), ownActiveOffers: 0, record: Self.keep))
        #expect(again.customCodeId == progress.customCodeId && w.fake.customCodes.count == 1)
        #expect(w.fake.received.dropFirst(before).map(\.method) == ["GET"])
        // With every id stored, nothing is asked.
        let calls = w.fake.received.count
        #expect(try Self.done(await w.provisioner.provision(Self.spec(), from: progress, ownActiveOffers: 0, record: Self.keep)) == progress)
        #expect(w.fake.received.count == calls)
    }

    @Test func tenActiveOffersOfASubscriptionAreRefusedBeforeAnyCall() async throws {
        let w = try world()
        defer { Task { await w.fake.stop() } }
        let refused = await w.provisioner.provision(Self.spec(), from: .init(), ownActiveOffers: 10, record: Self.keep)
        guard case .failed(let message, _) = refused else { throw Unexpected(outcome: refused) }
        #expect(message.contains("at most 10 active offer codes") && w.fake.received.isEmpty)

        // Apple's own count (offers made by hand count too) is checked before the offer is made.
        for i in 1...10 {
            _ = try Self.done(await w.provisioner.provision(Self.spec("offer-\(i)", code: "CODE-\(i)", kind: .freePeriod, percentOff: nil, periodCount: 1),
                                                            from: .init(), ownActiveOffers: 0, record: Self.keep))
        }
        let eleventh = await w.provisioner.provision(Self.spec("offer-11", code: "CODE-11"), from: .init(), ownActiveOffers: 0, record: Self.keep)
        guard case .failed(let apple, _) = eleventh else { throw Unexpected(outcome: eleventh) }
        #expect(apple.contains("has 10") && w.calls("POST", "/v1/subscriptionOfferCodes") == 10)
        // Another subscription has room.
        _ = try Self.done(await w.provisioner.provision(Self.spec("offer-11", code: "CODE-11", subscription: Self.other), from: .init(),
                                                        ownActiveOffers: 0, record: Self.keep))
    }

    @Test func theCodesCapExpiryAndDurationAreCheckedBeforeAnyCall() async throws {
        let w = try world()
        defer { Task { await w.fake.stop() } }
        let cases: [(AppStoreOfferSpec, String)] = [
            (Self.spec(maxRedemptions: 25_001), "App Store offer codes allow at most 25000 redemptions"),
            (Self.spec(maxRedemptions: nil), "App Store offer codes need maxRedemptions (at most 25000)"),
            (Self.spec(expiresAt: nil), "App Store offer codes need an expiresAt at most 6 months out"),
            (Self.spec(expiresAt: Date() + 200 * 86_400), "App Store offer codes expire at most 6 calendar months after they are made"),
            (Self.spec(expiresAt: Date() - 60), "the coupon expired before its App Store offer was made"),
            (Self.spec(duration: .init(unit: "day", count: 5)), "App Store offers last 3 days, 1 or 2 weeks, 1, 2, 3 or 6 months, or 1 year"),
        ]
        for (spec, expected) in cases {
            #expect(await w.provisioner.provision(spec, from: .init(), ownActiveOffers: 0, record: Self.keep) == .failed(expected, .init()))
        }
        #expect(w.fake.received.isEmpty)
    }

    @Test func apple_sRefusalIsTheFailureMessage() async throws {
        let w = try world()
        defer { Task { await w.fake.stop() } }
        _ = try Self.done(await w.provisioner.provision(Self.spec(), from: .init(), ownActiveOffers: 0, record: Self.keep))
        // The same code for a second plan: Apple's custom codes are unique.
        let second = await w.provisioner.provision(Self.spec("redeem-offer-2", subscription: Self.other), from: .init(), ownActiveOffers: 0, record: Self.keep)
        guard case .failed(let message, let progress) = second else { throw Unexpected(outcome: second) }
        #expect(message == "This custom code is already in use.")
        #expect(progress.offerId == w.fake.offers.last?.id && progress.customCodeId == nil, "the offer made is kept for the switch-off")

        let unknown = await w.provisioner.provision(Self.spec("redeem-offer-3", code: "OTHER", subscription: "999"), from: .init(), ownActiveOffers: 0,
                                                    record: Self.keep)
        #expect(unknown == .failed("The path provided does not match a defined resource type: /v1/subscriptions/999/offerCodes", .init()))
    }

    @Test func switchingOffTurnsOffTheCodeThenTheOfferAndMayBeRepeated() async throws {
        let w = try world()
        defer { Task { await w.fake.stop() } }
        let made = try Self.done(await w.provisioner.provision(Self.spec(), from: .init(), ownActiveOffers: 0, record: Self.keep))
        let off = try Self.done(await w.provisioner.switchTo(active: false, subscriptionId: Self.subscription, offerName: "redeem-offer-1", code: "SPRING-25",
                                                              from: made, record: Self.keep))
        #expect(off.codeSwitched && off.offerSwitched)
        #expect(w.fake.offers.allSatisfy { !$0.active } && w.fake.customCodes.allSatisfy { !$0.active })
        let patches = w.fake.received.filter { $0.method == "PATCH" }.map(\.path)
        #expect(patches == ["/v1/subscriptionOfferCodeCustomCodes/\(made.customCodeId!)", "/v1/subscriptionOfferCodes/\(made.offerId!)"])

        // Without the ids (a restart that lost them): found by name and code, switched off again.
        _ = try Self.done(await w.provisioner.switchTo(active: false, subscriptionId: Self.subscription, offerName: "redeem-offer-1", code: "spring-25",
                                                        from: .init(), record: Self.keep))
        #expect(w.fake.received.filter { $0.method == "PATCH" }.count == 4 && w.fake.received.allSatisfy { $0.status < 300 })
        // An offer never made needs nothing.
        let calls = w.fake.received.count
        #expect(await w.provisioner.switchTo(active: false, subscriptionId: nil, offerName: "never", code: "NEVER", from: .init(), record: Self.keep) == .done(.init()))
        #expect(w.fake.received.count == calls)
    }

    // MARK: The retry rule, pure

    @Test func theRetryRuleSendsReadsAgainAndMakesOnlyAfterA429() async {
        func run(_ answers: [AppleAnswer], idempotent: Bool, deadline: Date? = nil) async -> (AppleOutcome, Int, [Duration]) {
            let pauses = Pauses()
            let retry = AppleRetry(policy: RetryPolicy(initial: 1, max: 300), maxAttempts: 4, sleep: pauses.sleep, random: { 0.5 })
            let sent = Mutex(0)
            let outcome = await retry.run(idempotent: idempotent, deadline: deadline, now: { Date() }) {
                let i = sent.withLock { n in defer { n += 1 }; return n }
                return answers[min(i, answers.count - 1)]
            }
            return (outcome, sent.withLock { $0 }, pauses.all)
        }
        let ok = AppleAnswer.http(status: 200, retryAfter: nil, body: Data("{}".utf8))
        let busy = AppleAnswer.http(status: 429, retryAfter: "5", body: Data())
        let down = AppleAnswer.http(status: 502, retryAfter: nil, body: Data())
        #expect(await run([busy, down, .unreachable, ok], idempotent: true) == (.success(Data("{}".utf8)), 4, [.seconds(5), .seconds(2), .seconds(4)]))
        #expect(await run([busy, ok], idempotent: false) == (.success(Data("{}".utf8)), 2, [.seconds(5)]))
        #expect(await run([down, ok], idempotent: false).1 == 1)
        #expect(await run([.unreachable, ok], idempotent: false).1 == 1)
        #expect(await run([.http(status: 409, retryAfter: nil, body: Data("x".utf8))], idempotent: true) == (.refused(status: 409, body: Data("x".utf8)), 1, []))
        let gaveUp = await run([busy], idempotent: true)
        #expect(gaveUp.0 == .retry(after: 5, reason: "Apple is limiting the request rate (429)") && gaveUp.1 == 4)
        #expect(await run([busy, ok], idempotent: true, deadline: Date() + 2).1 == 1, "a pause past the deadline is not taken")
        #expect(AppleOutcome.seconds(retryAfter: "Wed, 21 Oct 2015 07:28:30 GMT", now: Date(timeIntervalSince1970: 1_445_412_480)) == 30)
        #expect(AppleOutcome.seconds(retryAfter: "soon", now: Date()) == nil)
    }
}
