import Core
import Cryptography
import Database
import Foundation
import Runtime
import TestSupport
import XCTest

/// Google Play through the whole stack (docs/stores.md, "Google Play"): grants makes and activates
/// the offers at the fake Play Developer API (behind the fake token endpoint), Android validate
/// and redeem hand off, and purchases complete from what Google says only: the app's post of the
/// purchase token, and Pub/Sub's pushes signed by the test's own Google keys. Acknowledgement at
/// Google comes before anything is recorded, so a grants killed with SIGKILL leaves the push
/// unanswered, and its retry acknowledges and records it. The tests share one stack and the fakes;
/// each makes its own plans, base plans, coupons and holders, puts back any fake answer it changed,
/// and the one that kills grants starts it again.
final class PlayStoreTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var minter: TokenMinter!
    nonisolated(unsafe) static var account: TestGoogleServiceAccount!
    nonisolated(unsafe) static var oauth: FakeGoogleOAuth!
    nonisolated(unsafe) static var play: FakePlayDeveloperAPI!
    nonisolated(unsafe) static var pusher: GooglePushSender!
    /// The entitlement provider: its subscribers' Play subscriptions make `alreadyOwned`.
    nonisolated(unsafe) static var revenueCat: FakeRevenueCat!
    nonisolated(unsafe) static var fixture: PlayFixture?
    static let package = "com.example.redeem"
    static let playProduct = "premium_sub"

    override class func startSuite() throws {
        let fixture = try PlayFixture(package: package)
        Self.fixture = fixture
        account = fixture.account
        oauth = fixture.oauth
        play = fixture.play
        pusher = fixture.pusher
        revenueCat = fixture.revenueCat
        stack = try Stack(environment: fixture.environment)
        minter = try stack.minter()
    }

    override class func stopSuite() {
        stack?.stop()
        let done = DispatchSemaphore(value: 0)
        Task {
            await fixture?.stop()
            done.signal()
        }
        done.wait()
    }

    var client: HTTPClient { Self.stack.client }
    var admin: String { Self.stack.adminKey }
    var notifications: String { "/v1/stores/google/notifications" }

    // MARK: - Helpers

    /// A plan on a Play subscription with one base plan, and a 30 % off coupon on it for Android,
    /// waited for until its offer is `ready` (made, activated, and settled for 1 s).
    func coupon(platforms: [String] = ["android"]) async throws -> (code: String, plan: String, offerId: String) {
        let plan = "pro." + UUID().uuidString.prefix(6).lowercased()
        let basePlan = "monthly-" + UUID().uuidString.prefix(4).lowercased()
        Self.play.addBasePlan(productId: Self.playProduct, basePlanId: basePlan, [.init("US", "USD", "9.99"), .init("DE", "EUR", "8.99")])
        let p = try await client.json("POST", "/v1/plans", ["productId": plan, "name": "Pro",
                                                          "playStore": ["productId": Self.playProduct, "basePlanIds": [basePlan]]], token: admin)
        XCTAssertEqual(p.status, 201, p.text)
        let code = "PLAY" + UUID().uuidString.prefix(8).uppercased().replacingOccurrences(of: "-", with: "")
        let expires = Timestamp.iso8601(Date().addingTimeInterval(30 * 86_400))
        let c = try await client.json("POST", "/v1/coupons", ["code": code, "kind": "percentOff", "percentOff": 30, "duration": ["unit": "month", "count": 1],
                                                             "periodCount": 3, "productIds": [plan], "platforms": platforms, "maxRedemptions": 100,
                                                             "expiresAt": expires], token: admin)
        XCTAssertEqual(c.status, 201, c.text)
        let offers = try XCTUnwrap(try c.decode(CouponBody.self).storeOffers, c.text)
        XCTAssertEqual(offers.first?.store, "playStore")
        XCTAssertEqual(offers.first?.basePlanId, basePlan)
        let ready = try await Self.stack.eventually(20) { try await self.offer(code)?.state == "ready" }
        XCTAssertTrue(ready, Self.stack.logs())
        let offerId = try await offer(code)?.offerId
        return (code, plan, try XCTUnwrap(offerId))
    }

    func offer(_ code: String) async throws -> StoreOfferBody? {
        try await client.get("/v1/coupons/\(code)", token: admin).decode(CouponBody.self).storeOffers?.first
    }

    /// Redeems on Android: the redemption's id and the account's obfuscated id.
    func redeem(_ code: String, _ u: TokenMinter.User) async throws -> (id: String, obfuscated: String) {
        let r = try await client.json("POST", "/v1/redemptions", ["code": code, "platform": "android"], token: u.token)
        XCTAssertEqual(r.status, 201, r.text)
        let body = try r.decode(RedemptionBody.self)
        return (body.redemptionId, try XCTUnwrap(body.playStore?.obfuscatedAccountId, r.text))
    }

    /// A purchase of the coupon's offer, as Play records it after the billing flow.
    func purchase(_ offerId: String?, for obfuscated: String?, test: Bool = false, linked: String? = nil) -> String {
        let token = "gp-token-" + UUID().uuidString.lowercased()
        let basePlan = Self.play.offers.first { $0.offerId == offerId }?.basePlanId ?? "monthly"
        Self.play.addPurchase(token: token, .init(productId: Self.playProduct, basePlanId: basePlan, offerId: offerId, obfuscatedAccountId: obfuscated,
                                                  testPurchase: test, linkedPurchaseToken: linked))
        return token
    }

    func push(_ body: [String: Any], token: String?) async throws -> HTTPClient.Response {
        let data = try JSONSerialization.data(withJSONObject: body)
        var headers = ["Content-Type": "application/json"]
        if let token { headers["Authorization"] = "Bearer \(token)" }
        return try await client.send("POST", notifications, body: data, headers: headers)
    }

    func count(_ sql: String, _ params: [any PGBindable] = []) throws -> Int {
        let db = try PGConnection(url: try Self.stack.adminDatabaseURL())
        return try XCTUnwrap(try db.query("SELECT (\(sql))::int AS n", params).rows.first).decode("n")
    }

    // MARK: - Tests

    func testAndroidWaitsForTheOfferThenCompletesByItsTokenOncePerChain() async throws {
        let c = try await coupon()
        let offer = try XCTUnwrap(Self.play.offers.first { $0.offerId == c.offerId })
        XCTAssertEqual(offer.state, "ACTIVE")
        XCTAssertEqual(offer.tags, ["redeem-coupon"])
        let u = try Self.minter.user()
        let valid = try await client.json(
            "POST", "/v1/coupons/validate", ["code": c.code, "platform": "android"], token: u.token
        ).decode(ValidationBody.self)
        XCTAssertEqual(valid.valid, true, "\(valid)")
        XCTAssertEqual(valid.playStore?.offerId, c.offerId)
        XCTAssertEqual(valid.basePlanIds?[c.plan], [offer.basePlanId])
        let r = try await redeem(c.code, u)
        XCTAssertEqual(r.obfuscated.count, 64)

        let token = purchase(c.offerId, for: r.obfuscated)
        let posted = try await client.json("POST", "/v1/redemptions/\(r.id)/purchase", ["purchaseToken": token], token: u.token)
        XCTAssertEqual(posted.status, 200, posted.text)
        let completed = try posted.decode(RedemptionBody.self)
        XCTAssertEqual(completed.status, "completed")
        XCTAssertEqual(completed.sandbox, false)
        let paid = try XCTUnwrap(completed.pricePaid, posted.text)
        XCTAssertEqual(
            paid.amount, "6.99", "the offer phase's price (30 % off 9.99), not the base plan's 9.99 Google reports")
        XCTAssertEqual(paid.currency, "USD")
        XCTAssertEqual(Self.play.purchase(token)?.acknowledged, true, "acknowledged at Google")

        // Google's push of the same purchase: the same redemption, recorded once.
        let pushed = try await push(GooglePushSender.body(packageName: Self.package, purchaseToken: token), token: try Self.pusher.token())
        XCTAssertEqual(pushed.status, 200, pushed.text)
        XCTAssertEqual(try pushed.decode(StoreNotificationAnswer.self).redemptionId, r.id)
        // A re-subscription linked to it is the same chain: no second redemption, no second notice.
        let renewed = purchase(c.offerId, for: r.obfuscated, linked: token)
        let again = try await push(GooglePushSender.body(packageName: Self.package, purchaseToken: renewed), token: try Self.pusher.token())
        XCTAssertEqual(try again.decode(StoreNotificationAnswer.self).redemptionId, r.id, again.text)
        XCTAssertEqual(try count("SELECT count(*) FROM coupons.store_purchases WHERE store = 'playStore' AND redemption_id = $1::uuid", [r.id]), 1)
        XCTAssertEqual(try count("SELECT count(*) FROM coupons.redemptions WHERE code = $1", [c.code]), 1,
                       "one redemption for the chain, so one coupon.redeemed (keyed by it)")
    }

    func testATokenForAnotherAccountOrAnotherOfferIsRefused() async throws {
        let c = try await coupon()
        let other = try await coupon()
        let u = try Self.minter.user(), v = try Self.minter.user()
        let mine = try await redeem(c.code, u)
        let theirs = try await redeem(c.code, v)
        // Bought for v's account, posted by u.
        let token = purchase(c.offerId, for: theirs.obfuscated)
        let wrongAccount = try await client.json("POST", "/v1/redemptions/\(mine.id)/purchase", ["purchaseToken": token], token: u.token)
        XCTAssertEqual(wrongAccount.status, 422, wrongAccount.text)
        XCTAssertEqual(wrongAccount.errorField, "purchaseToken")
        // The offer of another coupon.
        let elsewhere = purchase(other.offerId, for: mine.obfuscated)
        let wrongOffer = try await client.json("POST", "/v1/redemptions/\(mine.id)/purchase", ["purchaseToken": elsewhere], token: u.token)
        XCTAssertEqual(wrongOffer.status, 422, wrongOffer.text)
        XCTAssertEqual(wrongOffer.errorField, "redemptionId")
        let unknown = try await client.json("POST", "/v1/redemptions/\(mine.id)/purchase", ["purchaseToken": "no-such-token"], token: u.token)
        XCTAssertEqual(unknown.status, 404, unknown.text)
        XCTAssertEqual(try count("SELECT count(*) FROM coupons.redemptions WHERE id = $1::uuid AND status = 'reserved'", [mine.id]), 1)
        // Someone else's redemption is 404 before Google is asked.
        let before = Self.play.received.count
        let notTheirs = try await client.json("POST", "/v1/redemptions/\(theirs.id)/purchase", ["purchaseToken": token], token: u.token)
        XCTAssertEqual(notTheirs.status, 404, notTheirs.text)
        XCTAssertEqual(Self.play.received.count, before)
    }

    func testAPushThatIsNotGooglesIs401AndANotificationCompletesTheReservation() async throws {
        let c = try await coupon()
        let u = try Self.minter.user()
        let r = try await redeem(c.code, u)
        let token = purchase(c.offerId, for: r.obfuscated)
        let body = GooglePushSender.body(packageName: Self.package, purchaseToken: token)
        let stranger = AsymmetricKey.generateRSA()!
        for forged in [try Self.pusher.token(signer: stranger), try Self.pusher.token(audience: "https://elsewhere.example.com"),
                       try Self.pusher.token(email: "someone@else.iam.gserviceaccount.com"), try Self.pusher.token(issuer: "https://evil.example.com"),
                       try Self.pusher.token(expiresIn: -60)] {
            let refused = try await push(body, token: forged)
            XCTAssertEqual(refused.status, 401, refused.text)
        }
        let bare = try await push(body, token: nil)
        XCTAssertEqual(bare.status, 401)
        XCTAssertEqual(Self.play.purchase(token)?.acknowledged, false, "nothing forged reaches Google")
        // Test notifications and other types are taken and ignored.
        let test = try await push(GooglePushSender.testBody(packageName: Self.package), token: try Self.pusher.token())
        XCTAssertEqual(test.status, 200, test.text)
        XCTAssertEqual(try test.decode(StoreNotificationAnswer.self).recorded, false)
        let renewed = try await push(GooglePushSender.body(packageName: Self.package, purchaseToken: token, type: 2), token: try Self.pusher.token())
        XCTAssertEqual(try renewed.decode(StoreNotificationAnswer.self).recorded, false)

        let message = UUID().uuidString
        let good = try await push(GooglePushSender.body(packageName: Self.package, purchaseToken: token, messageId: message), token: try Self.pusher.token())
        XCTAssertEqual(good.status, 200, good.text)
        XCTAssertEqual(try good.decode(StoreNotificationAnswer.self).recorded, true)
        XCTAssertEqual(
            try good.decode(StoreNotificationAnswer.self).redemptionId, r.id,
            "the account's reservation, named by its obfuscated id")
        XCTAssertEqual(Self.play.purchase(token)?.acknowledged, true)
        let repeated = try await push(GooglePushSender.body(packageName: Self.package, purchaseToken: token, messageId: message), token: try Self.pusher.token())
        XCTAssertEqual(try repeated.decode(StoreNotificationAnswer.self).redemptionId, r.id)
        let mine = try await client.get("/v1/redemptions/\(r.id)", token: u.token)
        XCTAssertEqual(try mine.decode(RedemptionBody.self).status, "completed", mine.text)
    }

    func testATestPurchaseIsASandboxRedemption() async throws {
        let c = try await coupon()
        let u = try Self.minter.user()
        let r = try await redeem(c.code, u)
        let token = purchase(c.offerId, for: r.obfuscated, test: true)
        let posted = try await client.json("POST", "/v1/redemptions/\(r.id)/purchase", ["purchaseToken": token], token: u.token)
        XCTAssertEqual(posted.status, 200, posted.text)
        XCTAssertEqual(try posted.decode(RedemptionBody.self).sandbox, true, "testPurchase, never the client's word")
        XCTAssertNotEqual(
            try posted.decode(RedemptionBody.self).redemptionId, r.id,
            "a sandbox redemption of its own; the live reservation stays")
        XCTAssertEqual(
            try count("SELECT count(*) FROM coupons.redemptions WHERE id = $1::uuid AND status = 'reserved'", [r.id]), 1
        )
    }

    func testGrantsKilledBeforeGoogleTookTheAcknowledgementRecordsNothingUntilThePushComesAgain() async throws {
        let c = try await coupon()
        let u = try Self.minter.user()
        let r = try await redeem(c.code, u)
        let token = purchase(c.offerId, for: r.obfuscated)
        let message = UUID().uuidString
        let body = GooglePushSender.body(packageName: Self.package, purchaseToken: token, messageId: message)
        // Google refuses every acknowledgement: grants keeps trying while the push waits.
        Self.play.failAcknowledgements(1_000)
        addTeardownBlock { Self.play.failAcknowledgements(0) }
        let data = try JSONSerialization.data(withJSONObject: body)
        let client = self.client, path = notifications, bearer = try Self.pusher.token()
        let first = Task {
            try await client.send("POST", path, body: data, headers: ["Content-Type": "application/json", "Authorization": "Bearer \(bearer)"])
        }
        let trying = try await Self.stack.eventually(10) { Self.play.received.contains { $0.path.hasSuffix("\(token):acknowledge") } }
        XCTAssertTrue(trying, Self.stack.logs())
        kill(try Self.stack.pid("grants"), SIGKILL)
        let cut = try await first.value
        XCTAssertGreaterThanOrEqual(cut.status, 500, "no 2xx: Pub/Sub pushes it again (\(cut.text))")
        XCTAssertEqual(try count("SELECT count(*) FROM coupons.store_purchases WHERE original_transaction_id = $1", [token]), 0)
        XCTAssertEqual(Self.play.purchase(token)?.acknowledged, false)

        Self.play.failAcknowledgements(0)
        try await Self.stack.restart("grants")
        // Pub/Sub's retry of the same message, once grants is back.
        var answer: HTTPClient.Response?
        let recorded = try await Self.stack.eventually(30) {
            answer = try await self.push(body, token: try Self.pusher.token())
            return answer?.status == 200
        }
        XCTAssertTrue(recorded, answer?.text ?? Self.stack.logs())
        XCTAssertEqual(try answer?.decode(StoreNotificationAnswer.self).redemptionId, r.id)
        XCTAssertEqual(Self.play.purchase(token)?.acknowledged, true)
        XCTAssertEqual(try count("SELECT count(*) FROM coupons.store_purchases WHERE original_transaction_id = $1", [token]), 1)
    }

    func testTheCapDeactivatesTheOffersWithinSeconds() async throws {
        let plan = try await coupon()
        let r = try await client.json("PATCH", "/v1/coupons/\(plan.code)", ["maxRedemptions": 1], token: admin)
        XCTAssertEqual(r.status, 200, r.text)
        let u = try Self.minter.user()
        let reserved = try await redeem(plan.code, u)
        // The last use waits for its Play purchase: the offer stays on until it arrives. (Half a
        // second for a switch-off that must not come: no condition says that it never will.)
        try await Task.sleep(for: .milliseconds(500))
        XCTAssertEqual(Self.play.offers.first { $0.offerId == plan.offerId }?.state, "ACTIVE")
        let token = purchase(plan.offerId, for: reserved.obfuscated)
        let posted = try await client.json("POST", "/v1/redemptions/\(reserved.id)/purchase", ["purchaseToken": token], token: u.token)
        XCTAssertEqual(posted.status, 200, posted.text)
        let started = Date()
        let off = try await Self.stack.eventually(10) { Self.play.offers.first { $0.offerId == plan.offerId }?.state == "INACTIVE" }
        XCTAssertTrue(off, Self.stack.logs())
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
    }

    func testAlreadyOwnedGivesTheUseBack() async throws {
        let c = try await coupon()
        let r = try await client.json("PATCH", "/v1/coupons/\(c.code)", ["maxRedemptions": 1], token: admin)
        XCTAssertEqual(r.status, 200, r.text)
        let u = try Self.minter.user(), v = try Self.minter.user()
        let mine = try await redeem(c.code, u)
        let full = try await client.json("POST", "/v1/redemptions", ["code": c.code, "platform": "android"], token: v.token)
        XCTAssertEqual(full.errorCode, "exhausted", full.text)
        // Someone else's redemption, and a reason that is not one, are refused.
        let notTheirs = try await client.json("POST", "/v1/redemptions/\(mine.id)/release", ["reason": "alreadyOwned"], token: v.token)
        XCTAssertEqual(notTheirs.status, 404, notTheirs.text)
        let unknown = try await client.json("POST", "/v1/redemptions/\(mine.id)/release", ["reason": "changedMyMind"], token: u.token)
        XCTAssertEqual(unknown.status, 422, unknown.text)
        // Play Billing answered ITEM_ALREADY_OWNED: nothing was bought, the use goes back.
        let released = try await client.json("POST", "/v1/redemptions/\(mine.id)/release", ["reason": "alreadyOwned"], token: u.token)
        XCTAssertEqual(released.status, 200, released.text)
        XCTAssertEqual(try released.decode(RedemptionBody.self).status, "released")
        let coupon = try await client.get("/v1/coupons/\(c.code)", token: admin).decode(CouponBody.self)
        XCTAssertEqual(coupon.remaining, 1)
        let twice = try await client.json("POST", "/v1/redemptions/\(mine.id)/release", ["reason": "alreadyOwned"], token: u.token)
        XCTAssertEqual(twice.status, 409, twice.text)
        let now = try await client.json("POST", "/v1/redemptions", ["code": c.code, "platform": "android"], token: v.token)
        XCTAssertEqual(now.status, 201, now.text)
    }

    func testAPlanHeldOnPlayIsAlreadyOwnedBeforeAnyPurchaseUnlessRevenueCatCantSay() async throws {
        let c = try await coupon()
        let month = Date().addingTimeInterval(20 * 86_400)
        func validate(_ u: TokenMinter.User) async throws -> ValidationBody {
            let v = try await client.json("POST", "/v1/coupons/validate", ["code": c.code, "platform": "android"], token: u.token)
            XCTAssertEqual(v.status, 200, v.text)
            return try v.decode()
        }
        func redeem(_ u: TokenMinter.User) async throws -> HTTPClient.Response {
            try await client.json("POST", "/v1/redemptions", ["code": c.code, "platform": "android"], token: u.token)
        }
        // RevenueCat's subscriber holds the plan's Play product (on any base plan): refused, nothing reserved.
        let owner = try Self.minter.user()
        Self.revenueCat.addStorePurchase(owner.appUserId, .init(productId: Self.playProduct, store: "play_store", entitlementId: "pro",
                                                                expires: month, basePlanId: "monthly-other"))
        let refused = try await validate(owner)
        XCTAssertEqual(refused.valid, false, "\(refused)")
        XCTAssertEqual(refused.reason, "alreadyOwned")
        XCTAssertNil(refused.playStore, "no offer handed to an account that can't buy it")
        let r = try await redeem(owner)
        XCTAssertEqual(r.status, 422, r.text)
        XCTAssertEqual(r.errorCode, "alreadyOwned", r.text)
        XCTAssertEqual(try count("SELECT count(*) FROM coupons.redemptions WHERE code = $1", [c.code]), 0)
        XCTAssertTrue(Self.revenueCat.reads.contains(owner.appUserId))

        // None, an App Store subscription only, or a Play subscription that lapsed: the hand-off and a reservation.
        let none = try Self.minter.user(), apple = try Self.minter.user(), lapsed = try Self.minter.user()
        Self.revenueCat.addStorePurchase(apple.appUserId, .init(productId: Self.playProduct, store: "app_store", entitlementId: "pro", expires: month))
        Self.revenueCat.addStorePurchase(lapsed.appUserId, .init(productId: Self.playProduct, store: "play_store", entitlementId: "pro",
                                                                 expires: Date().addingTimeInterval(-86_400), basePlanId: "monthly"))
        for u in [none, apple, lapsed] {
            let valid = try await validate(u)
            XCTAssertEqual(valid.valid, true, "\(valid)")
            XCTAssertEqual(valid.playStore?.offerId, c.offerId)
            let made = try await redeem(u)
            XCTAssertEqual(made.status, 201, made.text)
        }

        // RevenueCat holds the read: validate and redeem go on after its bounded wait, refusing nothing.
        Self.revenueCat.answerReads(.hang(seconds: 15))
        defer { Self.revenueCat.answerReads(.created) }
        let unknown = try Self.minter.user()
        Self.revenueCat.addStorePurchase(unknown.appUserId, .init(productId: Self.playProduct, store: "play_store", entitlementId: "pro",
                                                                  expires: month, basePlanId: "monthly"))
        let started = Date()
        let valid = try await validate(unknown)
        XCTAssertEqual(valid.valid, true, "\(valid)")
        let made = try await redeem(unknown)
        XCTAssertEqual(made.status, 201, made.text)
        XCTAssertLessThan(Date().timeIntervalSince(started), 10, "two reads of at most a few seconds each, not RevenueCat's 15")
        Self.revenueCat.answerReads(.status(503, body: "down"))
        let down = try Self.minter.user()
        Self.revenueCat.addStorePurchase(down.appUserId, .init(productId: Self.playProduct, store: "play_store", entitlementId: "pro",
                                                               expires: month, basePlanId: "monthly"))
        let whileDown = try await redeem(down)
        XCTAssertEqual(whileDown.status, 201, whileDown.text)
    }

    func testADryRunPreviewsThePlayOffersWithoutMakingAny() async throws {
        let plan = "pro." + UUID().uuidString.prefix(6).lowercased()
        // Base plans of this test's own (the two sort as "annual" before "monthly").
        let suffix = UUID().uuidString.prefix(4).lowercased()
        let monthly = "dry-monthly-\(suffix)", annual = "dry-annual-\(suffix)"
        Self.play.addBasePlan(productId: Self.playProduct, basePlanId: monthly, [.init("US", "USD", "9.99")])
        Self.play.addBasePlan(productId: Self.playProduct, basePlanId: annual, [.init("US", "USD", "99.99")])
        let p = try await client.json(
            "POST", "/v1/plans",
            [
                "productId": plan, "name": "Pro",
                "playStore": ["productId": Self.playProduct, "basePlanIds": [monthly, annual]]
            ],
            token: admin)
        XCTAssertEqual(p.status, 201, p.text)
        let code = "DRYPLAY" + UUID().uuidString.prefix(6).uppercased().replacingOccurrences(of: "-", with: "")
        let offersBefore = Self.play.offers.count
        let dry = try await client.json("POST", "/v1/coupons?dryRun=true", ["code": code, "kind": "percentOff", "percentOff": 30,
                                                                           "duration": ["unit": "month", "count": 1], "periodCount": 3,
                                                                           "productIds": [plan], "platforms": ["android"], "maxRedemptions": 10],
                                        token: admin)
        XCTAssertEqual(dry.status, 200, dry.text)
        let offers = try XCTUnwrap(try dry.decode(CouponBody.self).storeOffers, dry.text)
        XCTAssertEqual(offers.map(\.store), ["playStore", "playStore"])
        XCTAssertEqual(
            offers.map(\.basePlanId), [monthly, annual].sorted(),
            "one per base plan, listed as a made coupon lists them")
        XCTAssertEqual(offers.map(\.state), ["creating", "creating"])
        XCTAssertEqual(offers.map(\.productId), [plan, plan])
        // Nothing was made: no coupon, no offer at Google.
        let unsaved = try await client.get("/v1/coupons/\(code)", token: admin)
        XCTAssertEqual(unsaved.status, 404)
        // Half a second for an offer that must not be made: no condition says that it never will.
        try await Task.sleep(for: .milliseconds(500))
        XCTAssertEqual(Self.play.offers.count, offersBefore)
        // A plan without a Play product is refused as a real creation refuses it.
        let bare = "bare." + UUID().uuidString.prefix(6).lowercased()
        let b = try await client.json("POST", "/v1/plans", ["productId": bare, "name": "Bare"], token: admin)
        XCTAssertEqual(b.status, 201, b.text)
        let refused = try await client.json("POST", "/v1/coupons?dryRun=true", ["code": code, "kind": "percentOff", "percentOff": 30,
                                                                               "duration": ["unit": "month", "count": 1], "periodCount": 3,
                                                                               "productIds": [bare], "platforms": ["android"]], token: admin)
        XCTAssertEqual(refused.status, 422, refused.text)
    }

    func testAPlansPlayProductCantChangeUnderALiveOffer() async throws {
        let c = try await coupon()
        let base = try XCTUnwrap(Self.play.offers.first { $0.offerId == c.offerId }?.basePlanId)
        let moved = try await client.json("PATCH", "/v1/plans/\(c.plan)", ["playStore": ["productId": "other_sub", "basePlanIds": [base]]],
                                          token: admin)
        XCTAssertEqual(moved.status, 409, moved.text)
        XCTAssertEqual(moved.errorCode, "invalidState")
        XCTAssertEqual(moved.errorField, "playStore")
        let dropped = try await client.json("PATCH", "/v1/plans/\(c.plan)", ["playStore": NSNull()], token: admin)
        XCTAssertEqual(dropped.status, 409, dropped.text)
        // Deactivated, the coupon's offer is switched off: then the plan may move.
        let off = try await client.send("DELETE", "/v1/coupons/\(c.code)", headers: ["Authorization": "Bearer \(admin)"])
        XCTAssertEqual(off.status, 204, off.text)
        let later = try await client.json("PATCH", "/v1/plans/\(c.plan)", ["playStore": ["productId": "other_sub", "basePlanIds": [base]]],
                                          token: admin)
        XCTAssertEqual(later.status, 200, later.text)
    }
}
