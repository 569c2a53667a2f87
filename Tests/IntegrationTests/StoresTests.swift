import Bus
import Core
import Cryptography
import Database
import Foundation
import Runtime
import Synchronization
import TestSupport
import XCTest

/// The App Store at the gateway (docs/stores.md): the plans routes, iOS validate and redeem with
/// the hand-off, and completion from Apple's signed data only: the app's signed transaction, a
/// transaction id grants fetches from the fake App Store Server, and Apple's notifications, all
/// signed through a test CA whose root the gateway is configured with. Coupons' offer state is
/// moved to `waitingForApple` the way grants will, with a `coupons.storeOfferReport` bus request
/// (the settle time is 0, so that is `ready`). The tests share one stack and the fakes; each makes
/// its own plans, coupons and holders, and the one that kills grants starts it again.
final class StoresTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var minter: TokenMinter!
    nonisolated(unsafe) static var ca: TestAppleCA!
    nonisolated(unsafe) static var ascKey: TestAppleAPIKey!
    nonisolated(unsafe) static var serverKey: TestAppleAPIKey!
    nonisolated(unsafe) static var connect: FakeAppStoreConnect!
    nonisolated(unsafe) static var appStoreServer: FakeAppStoreServer!
    nonisolated(unsafe) static var receiver: WebhookReceiver!
    nonisolated(unsafe) static var coupons: BusClient!
    /// A node of the stack's bus security, holding grants' key (grants sends these reports).
    nonisolated(unsafe) static var bus: BusNode!
    static let bundleId = "com.example.redeem"
    static let appId: Int64 = 1_234_567_890

    override class func startSuite() throws {
        ca = try TestAppleCA()
        ascKey = try TestAppleAPIKey()
        serverKey = try TestAppleAPIKey()
        connect = try FakeAppStoreConnect(key: ascKey)
        appStoreServer = try FakeAppStoreServer(key: serverKey, bundleId: bundleId, ca: ca)
        receiver = try WebhookReceiver()
        stack = try Stack(environment: [
            "REDEEM_APPLE_ROOT_CERTS": ca.rootCertificatesFile.path, "REDEEM_APPLE_BUNDLE_ID": bundleId,
            "REDEEM_APPLE_APP_ID": String(appId), "REDEEM_APPLE_OFFER_SETTLE": "0",
            "REDEEM_ASC_KEY_ID": ascKey.keyId, "REDEEM_ASC_ISSUER_ID": ascKey.issuerId,
            "REDEEM_ASC_PRIVATE_KEY": ascKey.privateKeyFile.path, "REDEEM_ASC_URL": connect.url.absoluteString,
            "REDEEM_APPSTORE_KEY_ID": serverKey.keyId, "REDEEM_APPSTORE_ISSUER_ID": serverKey.issuerId,
            "REDEEM_APPSTORE_PRIVATE_KEY": serverKey.privateKeyFile.path,
            "REDEEM_APPSTORE_URL": appStoreServer.url.absoluteString,
            "REDEEM_APPSTORE_SANDBOX_URL": appStoreServer.url.absoluteString,
            "REDEEM_WEBHOOK_RETRY_SCHEDULE": "1,1,1", "REDEEM_WEBHOOK_ALLOW_PRIVATE": "1"
        ])
        minter = try stack.minter()
        let bus = try XCTUnwrap(stack.wiring()["REDEEM_COUPONS_BUS"]).split(separator: ",").map(String.init)
        Self.bus = try stack.busNode(as: "grants")
        coupons = try BusClient(bus: Self.bus, service: "coupons", connect: bus)
    }

    override class func stopSuite() {
        coupons?.stop()
        bus?.stop()
        stack?.stop()
        let done = DispatchSemaphore(value: 0)
        Task {
            await connect?.stop()
            await appStoreServer?.stop()
            await receiver?.stop()
            done.signal()
        }
        done.wait()
    }

    var client: HTTPClient { Self.stack.client }
    var admin: String { Self.stack.adminKey }

    /// A plan (`/v1/plans`).
    struct PlanBody: Decodable {
        struct AppStore: Decodable { let subscriptionId: String }
        struct PlayStore: Decodable { let productId: String }
        let productId: String
        let name: String
        let appStore: AppStore?
        let playStore: PlayStore?
    }

    static let hooked = Mutex<Bool>(false)

    // MARK: - Helpers

    /// A plan with an App Store subscription, and a 50 % off coupon on it for iOS whose offer is
    /// `ready` once `ready` is true.
    func coupon(ready: Bool = true) async throws -> (code: String, plan: String, offerName: String) {
        try await webhook()
        let plan = "pro.monthly." + UUID().uuidString.prefix(6).lowercased()
        let p = try await client.json(
            "POST", "/v1/plans",
            [
                "productId": plan, "name": "Pro",
                "appStore": ["subscriptionId": "6444" + String(Int.random(in: 100_000...999_999))]
            ], token: admin)
        XCTAssertEqual(p.status, 201, p.text)
        let code = "APP" + UUID().uuidString.prefix(8).uppercased().replacingOccurrences(of: "-", with: "")
        let expires = Timestamp.iso8601(Date().addingTimeInterval(30 * 86_400))
        let c = try await client.json(
            "POST", "/v1/coupons",
            [
                "code": code, "kind": "percentOff", "percentOff": 50, "duration": ["unit": "month", "count": 1],
                "periodCount": 1,
                "productIds": [plan], "platforms": ["ios"], "maxRedemptions": 100, "expiresAt": expires
            ], token: admin)
        XCTAssertEqual(c.status, 201, c.text)
        let db = try PGConnection(url: try Self.stack.adminDatabaseURL())
        let row = try XCTUnwrap(
            try db.query(
                """
                SELECT c.id, o.offer_name FROM coupons.coupons c JOIN coupons.store_offers o ON o.coupon_id = c.id WHERE c.code = $1
                """, [code]
            ).rows.first)
        let couponId: UUID = try row.decode("id")
        let offerName: String = try row.decode("offer_name")
        if ready { try await report(couponId, plan) }
        return (code, plan, offerName)
    }

    /// What grants reports once the offer and its code exist at Apple.
    func report(_ couponId: UUID, _ plan: String) async throws {
        _ = try await Self.coupons.request(
            Coupons.StoreOfferReport(
                couponId: couponId, store: .appStore, productId: plan, state: .waitingForApple,
                offerId: "offer-" + UUID().uuidString.prefix(8), customCodeId: "code-" + UUID().uuidString.prefix(8),
                codeCreatedAt: Date().addingTimeInterval(-60)))
    }

    /// The suite's `coupon.redeemed` endpoint at `receiver`, made by the first test that needs it.
    func webhook() async throws {
        guard
            !Self.hooked.withLock({
                let was = $0
                $0 = true
                return was
            })
        else { return }
        let r = try await client.json(
            "POST", "/v1/webhooks", ["url": Self.receiver.url.absoluteString, "events": ["coupon.redeemed"]],
            token: admin)
        XCTAssertEqual(r.status, 201, r.text)
    }

    /// A transaction as Apple signs it for a purchase with the coupon's offer code.
    func transaction(
        _ plan: String, offerName: String, token: UUID?, environment: AppStoreEnvironment = .production,
        original: String? = nil
    ) -> JWSTransactionDecodedPayload {
        let id = String(Int.random(in: 100_000_000_000...999_999_999_999))
        var t = JWSTransactionDecodedPayload(
            transactionId: id, originalTransactionId: original ?? id, bundleId: Self.bundleId, productId: plan,
            purchaseDate: Date(), environment: environment)
        t.offerType = .offerCode
        t.offerIdentifier = offerName
        t.appAccountToken = token
        t.price = 4990
        t.currency = "USD"
        t.type = .autoRenewable
        t.signedDate = Date()
        return t
    }

    func redeem(
        _ code: String, _ u: TokenMinter.User, environment: String = "production"
    ) async throws -> (id: String, token: UUID) {
        let r = try await client.json(
            "POST", "/v1/redemptions", ["code": code, "platform": "ios", "environment": environment], token: u.token)
        XCTAssertEqual(r.status, 201, r.text)
        let body = try r.decode(RedemptionBody.self)
        return (body.redemptionId, try XCTUnwrap(UUID(uuidString: body.appStore?.appAccountToken ?? ""), r.text))
    }

    func post(_ id: String, signed: String, _ u: TokenMinter.User) async throws -> HTTPClient.Response {
        try await client.json("POST", "/v1/redemptions/\(id)/purchase", ["signedTransaction": signed], token: u.token)
    }

    var sender: AppleNotificationSender {
        AppleNotificationSender(ca: Self.ca, bundleId: Self.bundleId, appAppleId: Self.appId)
    }
    var notifications: URL { Self.stack.gateway.appendingPathComponent("v1/stores/apple/notifications") }

    /// `coupon.redeemed` deliveries that name `text` (a redemption id), after a moment for any
    /// second one to arrive.
    func hooks(naming text: String, settle: Double = 2) async throws -> Int {
        _ = try await Self.stack.eventually(10) {
            Self.receiver.received.contains { String(decoding: $0.body, as: UTF8.self).contains(text) }
        }
        // Time for a second delivery, which must not come: no condition says that it never will.
        try await Task.sleep(for: .seconds(settle))
        return Set(
            Self.receiver.received.filter {
                let body = String(decoding: $0.body, as: UTF8.self)
                return body.contains(text) && body.contains("coupon.redeemed")
            }.map(\.id)
        ).count
    }

    // MARK: - Tests

    /// Store offers are made with the environment's store settings, the default app's: another
    /// app's coupon that would need one is refused, and nothing is made (docs/apps.md).
    func testAnotherAppsCouponMakesNoStoreOfferWithTheDefaultAppsStore() async throws {
        let app = try await client.json("POST", "/v1/apps", ["name": "No store yet"], token: admin)
        XCTAssertEqual(app.status, 201, app.text)
        let appId = try XCTUnwrap(try app.json()["id"] as? String)
        let made = try await client.json(
            "POST", "/v1/api-keys", ["name": "other app", "role": "admin"], token: admin, headers: ["Redeem-App": appId])
        XCTAssertEqual(made.status, 201, made.text)
        let key = try XCTUnwrap(try made.json()["key"] as? String)
        let plan = "pro.other." + UUID().uuidString.prefix(6).lowercased()
        let p = try await client.json(
            "POST", "/v1/plans", ["productId": plan, "name": "Pro", "appStore": ["subscriptionId": "6444000001"]], token: key)
        XCTAssertEqual(p.status, 201, p.text)
        let code = "OTHER" + UUID().uuidString.prefix(8).uppercased().replacingOccurrences(of: "-", with: "")
        let c = try await client.json(
            "POST", "/v1/coupons",
            [
                "code": code, "kind": "percentOff", "percentOff": 50, "duration": ["unit": "month", "count": 1],
                "periodCount": 1,
                "productIds": [plan], "platforms": ["ios"], "maxRedemptions": 100,
                "expiresAt": Timestamp.iso8601(Date().addingTimeInterval(30 * 86_400)),
            ], token: key)
        XCTAssertEqual(c.status, 422, c.text)
        XCTAssertEqual(c.errorCode, "invalid")
        XCTAssertEqual(c.errorField, "platforms")
        let db = try PGConnection(url: try Self.stack.adminDatabaseURL())
        let rows = try db.query("SELECT count(*)::int AS n FROM coupons.coupons WHERE code = $1", [code]).rows
        XCTAssertEqual(try rows.first?.decode("n", as: Int.self), 0)
        // The same coupon in the default app makes its offer, as before.
        let made2 = try await coupon(ready: false)
        XCTAssertFalse(made2.offerName.isEmpty)
    }

    func testPlansAreAdminOnlyWithTheirErrors() async throws {
        let plan = "annual." + UUID().uuidString.prefix(6).lowercased()
        let made = try await client.json(
            "POST", "/v1/plans",
            [
                "productId": plan, "name": "Annual", "appStore": ["subscriptionId": "6444000001"],
                "playStore": ["productId": "annual", "basePlanIds": ["yearly"]]
            ], token: admin)
        XCTAssertEqual(made.status, 201, made.text)
        XCTAssertEqual(try made.decode(PlanBody.self).appStore?.subscriptionId, "6444000001")
        let again = try await client.json("POST", "/v1/plans", ["productId": plan, "name": "Annual"], token: admin)
        XCTAssertEqual(again.status, 409, again.text)
        XCTAssertEqual(again.errorCode, "productInUse")
        let nameless = try await client.json("POST", "/v1/plans", ["productId": "x." + plan], token: admin)
        XCTAssertEqual(nameless.status, 422, nameless.text)
        XCTAssertEqual(nameless.errorField, "name")
        let one = try await client.get("/v1/plans/\(plan)", token: admin)
        XCTAssertEqual(one.status, 200, one.text)
        XCTAssertEqual(try one.decode(PlanBody.self).name, "Annual")
        let list = try await client.get("/v1/plans?limit=100", token: admin)
        XCTAssertTrue(try list.decode(ListBody<PlanBody>.self).data.contains { $0.productId == plan }, list.text)
        let v1 = try await client.get("/v1/plans/no.such.plan", token: admin).status
        XCTAssertEqual(v1, 404)
        let renamed = try await client.json(
            "PATCH", "/v1/plans/\(plan)", ["name": "Annual plan", "playStore": NSNull()], token: admin)
        XCTAssertEqual(renamed.status, 200, renamed.text)
        let renamedPlan = try renamed.decode(PlanBody.self)
        XCTAssertEqual(renamedPlan.name, "Annual plan")
        XCTAssertNil(renamedPlan.playStore, renamed.text)
        let v2 = try await client.json("PATCH", "/v1/plans/no.such.plan", ["name": "x"], token: admin).status
        XCTAssertEqual(v2, 404)
        // Admin keys only: a support key and a user are refused.
        let k = try await client.json(
            "POST", "/v1/api-keys", ["name": "support", "role": "support", "mode": "live"], token: admin
        ).decode(APIKeyBody.self).key
        let support = try XCTUnwrap(k)
        let v3 = try await client.get("/v1/plans", token: support).status
        XCTAssertEqual(v3, 403)
        let v4 = try await client.json("POST", "/v1/plans", ["productId": "y." + plan, "name": "Y"], token: support)
            .status
        XCTAssertEqual(v4, 403)
        let v5 = try await client.get("/v1/plans/\(plan)", token: try Self.minter.user().token).status
        XCTAssertEqual(v5, 403)
        let v6 = try await client.get("/v1/plans").status
        XCTAssertEqual(v6, 401)
    }

    func testIosValidateWaitsForAppleThenHandsOff() async throws {
        let c = try await coupon(ready: false)
        let u = try Self.minter.user()
        let waiting = try await client.json(
            "POST", "/v1/coupons/validate", ["code": c.code, "platform": "ios"], token: u.token
        ).decode(ValidationBody.self)
        XCTAssertEqual(waiting.valid, false)
        XCTAssertEqual(waiting.reason, "notReady")
        let refused = try await client.json(
            "POST", "/v1/redemptions", ["code": c.code, "platform": "ios"], token: u.token)
        XCTAssertEqual(refused.errorCode, "notReady", refused.text)
        let db = try PGConnection(url: try Self.stack.adminDatabaseURL())
        let couponId: UUID = try XCTUnwrap(
            try db.query("SELECT id FROM coupons.coupons WHERE code = $1", [c.code]).rows.first
        ).decode("id")
        try await report(couponId, c.plan)
        let ready = try await client.json(
            "POST", "/v1/coupons/validate", ["code": c.code, "platform": "ios"], token: u.token
        ).decode(ValidationBody.self)
        XCTAssertEqual(ready.valid, true, "\(ready)")
        XCTAssertEqual(ready.eligibleProductIds, [c.plan])
        XCTAssertEqual(ready.offer?.percentOff, 50, "\(ready)")
        XCTAssertEqual(
            ready.appStore?.redemptionUrl,
            "https://apps.apple.com/redeem?ctx=offercodes&id=\(Self.appId)&code=\(c.code)")
        let r = try await redeem(c.code, u)
        let view = try await client.get("/v1/redemptions/\(r.id)", token: u.token).decode(RedemptionBody.self)
        XCTAssertEqual(view.status, "reserved")
        let coupon = try await client.get("/v1/coupons/\(c.code)", token: admin).decode(CouponBody.self)
        let offers = try XCTUnwrap(coupon.storeOffers, "\(coupon)")
        XCTAssertEqual(offers.first?.state, "ready")
        XCTAssertEqual(offers.first?.productId, c.plan)
    }

    func testTheAppsSignedTransactionCompletesItsRedemptionOnce() async throws {
        let c = try await coupon()
        let u = try Self.minter.user()
        let r = try await redeem(c.code, u)
        let t = transaction(c.plan, offerName: c.offerName, token: r.token)
        let done = try await post(r.id, signed: Self.ca.sign(t), u)
        XCTAssertEqual(done.status, 200, done.text)
        let body = try done.decode(RedemptionBody.self)
        XCTAssertEqual(body.status, "completed", done.text)
        XCTAssertEqual(body.sandbox, false)
        XCTAssertEqual(body.pricePaid?.amount, "4.99", done.text)
        // The same post again, and a later renewal of the chain: the same redemption, no second webhook.
        let v7 = try await post(r.id, signed: Self.ca.sign(t), u).status
        XCTAssertEqual(v7, 200)
        var renewal = transaction(c.plan, offerName: c.offerName, token: r.token, original: t.originalTransactionId)
        renewal.transactionReason = .renewal
        let renewed = try await sender.send(
            sender.signedPayload(sender.notification(.subscribed, transaction: renewal)), to: notifications)
        XCTAssertEqual(renewed.status, 200, renewed.text)
        let v8 = try await hooks(naming: r.id)
        XCTAssertEqual(v8, 1)
        // Someone else's redemption is not theirs to complete.
        let other = try Self.minter.user()
        let v9 = try await post(r.id, signed: Self.ca.sign(t), other).status
        XCTAssertEqual(v9, 404)
        // Apple's, but about an offer that is not this coupon's: 422.
        let r2 = try await redeem(c.code, other)
        let foreign = transaction(c.plan, offerName: "redeem-000000000000000000000000", token: r2.token)
        let wrong = try await post(r2.id, signed: Self.ca.sign(foreign), other)
        XCTAssertEqual(wrong.status, 422, wrong.text)
    }

    func testWhatIsNotApplesIsRefused401() async throws {
        let c = try await coupon()
        let u = try Self.minter.user()
        let r = try await redeem(c.code, u)
        let t = transaction(c.plan, offerName: c.offerName, token: r.token)
        let stranger = try TestAppleCA(name: "Not Apple")
        let old = Self.ca.issueLeaf(
            from: Date().addingTimeInterval(-10 * 86_400), until: Date().addingTimeInterval(-5 * 86_400))
        var otherApp = t
        otherApp.bundleId = "com.example.other"
        let refused: [(String, String)] = [
            (
                "forged",
                Self.ca.sign(t, signer: stranger.leaf, chain: [Self.ca.leaf, Self.ca.intermediate, Self.ca.root])
            ),
            ("expired chain", Self.ca.sign(t, signer: old, chain: [old, Self.ca.intermediate, Self.ca.root])),
            ("wrong bundle", Self.ca.sign(otherApp)),
            ("wrong chain", stranger.sign(t)),
            ("not a JWS", "not.a.jws")
        ]
        for (name, signed) in refused {
            let a = try await post(r.id, signed: signed, u)
            XCTAssertEqual(a.status, 401, "\(name): \(a.text)")
            XCTAssertEqual(a.errorCode, "invalidSignedData", name)
        }
        // The same in a notification: the payload itself, or the transaction inside it.
        let strangerSender = AppleNotificationSender(ca: stranger, bundleId: Self.bundleId, appAppleId: Self.appId)
        let a = try await strangerSender.send(
            strangerSender.signedPayload(strangerSender.notification(.offerRedeemed, transaction: t)), to: notifications
        )
        XCTAssertEqual(a.status, 401, a.text)
        var inner = sender.notification(.offerRedeemed, transaction: nil)
        inner.data?.signedTransactionInfo = stranger.sign(t)
        let b = try await sender.send(sender.signedPayload(inner), to: notifications)
        XCTAssertEqual(b.status, 401, b.text)
        XCTAssertEqual(b.errorCode, "invalidSignedData")
        // Nothing was completed by any of them.
        let v10 = try await client.get("/v1/redemptions/\(r.id)", token: u.token).decode(RedemptionBody.self).status
        XCTAssertEqual(v10, "reserved")
        // Neither a user's word on the price nor a body of neither kind.
        let word = try await client.json(
            "POST", "/v1/redemptions/\(r.id)/purchase",
            ["pricePaid": ["amount": "1.00", "currency": "USD"], "storeTransactionId": "1"], token: u.token)
        XCTAssertEqual(word.status, 403, word.text)
        let empty = try await client.json("POST", "/v1/redemptions/\(r.id)/purchase", [:], token: u.token)
        XCTAssertEqual(empty.status, 422, empty.text)
    }

    func testNotificationsCompleteWithAndWithoutAReservationOnce() async throws {
        let c = try await coupon()
        let u = try Self.minter.user()
        let r = try await redeem(c.code, u)
        let t = transaction(c.plan, offerName: c.offerName, token: r.token)
        let n = sender.notification(.offerRedeemed, transaction: t)
        let first = try await sender.send(sender.signedPayload(n), to: notifications)
        XCTAssertEqual(first.status, 200, first.text)
        XCTAssertEqual(try first.decode(StoreNotificationAnswer.self).recorded, true)
        XCTAssertEqual(try first.decode(StoreNotificationAnswer.self).redemptionId, r.id)
        let v11 = try await client.get("/v1/redemptions/\(r.id)", token: u.token).decode(RedemptionBody.self).status
        XCTAssertEqual(v11, "completed")
        // Apple sends it again (same notificationUUID), then renews the chain: one webhook.
        let v12 = try await sender.send(sender.signedPayload(n), to: notifications).status
        XCTAssertEqual(v12, 200)
        var renewal = transaction(c.plan, offerName: c.offerName, token: r.token, original: t.originalTransactionId)
        renewal.transactionReason = .renewal
        let v13 = try await sender.send(
            sender.signedPayload(sender.notification(.didRenew, transaction: renewal)), to: notifications
        ).status
        XCTAssertEqual(v13, 200)
        let v14 = try await sender.send(
            sender.signedPayload(sender.notification(.subscribed, transaction: renewal)), to: notifications
        ).status
        XCTAssertEqual(v14, 200)
        let v15 = try await hooks(naming: r.id)
        XCTAssertEqual(v15, 1)

        // A code typed straight into the App Store: no reservation, no token. Still a redemption.
        let typed = transaction(c.plan, offerName: c.offerName, token: nil)
        let straight = try await sender.send(
            sender.signedPayload(sender.notification(.subscribed, transaction: typed)), to: notifications)
        XCTAssertEqual(straight.status, 200, straight.text)
        let id = try XCTUnwrap(try straight.decode(StoreNotificationAnswer.self).redemptionId, straight.text)
        XCTAssertNotEqual(id, r.id)
        let viewed = try await client.get("/v1/redemptions/\(id)", token: admin)
        let view = try viewed.decode(RedemptionBody.self)
        XCTAssertEqual(view.status, "completed", viewed.text)
        XCTAssertNil(view.accountId, viewed.text)
        let v16 = try await hooks(naming: id)
        XCTAssertEqual(v16, 1)

        // Other notification types and offers that are not offer codes: acknowledged, ignored.
        let other = try await sender.send(
            sender.signedPayload(sender.notification(.didChangeRenewalStatus, transaction: typed)), to: notifications)
        XCTAssertEqual(other.status, 200, other.text)
        XCTAssertEqual(try other.decode(StoreNotificationAnswer.self).recorded, false)
        var promo = transaction(c.plan, offerName: c.offerName, token: nil)
        promo.offerType = .promotional
        let p = try await sender.send(
            sender.signedPayload(sender.notification(.subscribed, transaction: promo)), to: notifications)
        XCTAssertEqual(p.status, 200, p.text)
        XCTAssertEqual(try p.decode(StoreNotificationAnswer.self).recorded, false)
    }

    /// The app was away while its user bought with the code (Apple's offer-code page carries no
    /// `appAccountToken`), so Apple's notification came first and made a stand-in. The app's later
    /// post of the same transaction completes the reservation it made: the reservation, not the
    /// stand-in, stands for the chain, one use stays taken, and the chain's one webhook is not sent
    /// again.
    func testAPurchaseWhoseNotificationCameFirstCompletesTheReservationTheAppPostsLater() async throws {
        let c = try await coupon()
        let u = try Self.minter.user()
        let r = try await redeem(c.code, u)
        let t = transaction(c.plan, offerName: c.offerName, token: nil)
        let notified = try await sender.send(
            sender.signedPayload(sender.notification(.offerRedeemed, transaction: t)), to: notifications)
        XCTAssertEqual(notified.status, 200, notified.text)
        let standIn = try XCTUnwrap(try notified.decode(StoreNotificationAnswer.self).redemptionId, notified.text)
        XCTAssertNotEqual(standIn, r.id)
        let usedBoth = try await usedCount(c.code)
        XCTAssertEqual(usedBoth, 2, "the reservation and the stand-in each hold a use until they meet")

        let posted = try await post(r.id, signed: Self.ca.sign(t), u)
        XCTAssertEqual(posted.status, 200, posted.text)
        let done = try posted.decode(RedemptionBody.self)
        XCTAssertEqual(done.redemptionId, r.id, posted.text)
        XCTAssertEqual(done.status, "completed", posted.text)
        XCTAssertEqual(done.pricePaid?.amount, "4.99", posted.text)
        let read = try await client.get("/v1/redemptions/\(r.id)", token: u.token).decode(RedemptionBody.self)
        XCTAssertEqual(read.status, "completed")
        let replaced = try await client.get("/v1/redemptions/\(standIn)", token: admin)
        XCTAssertEqual(try replaced.decode(RedemptionBody.self).status, "released", replaced.text)
        XCTAssertTrue(
            try replaced.decode(RedemptionBody.self).failureReason?.contains(r.id.uppercased()) == true, replaced.text)
        let usedOne = try await usedCount(c.code)
        XCTAssertEqual(usedOne, 1)

        // The post again, and Apple's renewal of the chain: the same completed reservation, no new webhook.
        let again = try await post(r.id, signed: Self.ca.sign(t), u)
        XCTAssertEqual(try again.decode(RedemptionBody.self).redemptionId, r.id, again.text)
        var renewal = transaction(c.plan, offerName: c.offerName, token: nil, original: t.originalTransactionId)
        renewal.transactionReason = .renewal
        let renewed = try await sender.send(
            sender.signedPayload(sender.notification(.didRenew, transaction: renewal)), to: notifications)
        XCTAssertEqual(renewed.status, 200, renewed.text)
        let stillDone = try await client.get("/v1/redemptions/\(r.id)", token: u.token).decode(RedemptionBody.self)
            .status
        XCTAssertEqual(stillDone, "completed")
        let standInHooks = try await hooks(naming: standIn)
        XCTAssertEqual(standInHooks, 1)
        let forReservation = Self.receiver.received.filter {
            let body = String(decoding: $0.body, as: UTF8.self)
            return body.contains(r.id) && body.contains("coupon.redeemed")
        }
        XCTAssertEqual(forReservation.count, 0, "one webhook per chain: the stand-in's")
    }

    /// The coupon's uses taken, as the database counts them.
    func usedCount(_ code: String) async throws -> Int {
        let db = try PGConnection(url: try Self.stack.adminDatabaseURL())
        return try XCTUnwrap(try db.query("SELECT used_count FROM coupons.coupons WHERE code = $1", [code]).first)
            .decode("used_count")
    }

    func testASandboxPurchaseIsRecordedAsSandbox() async throws {
        let c = try await coupon()
        let u = try Self.minter.user()
        let r = try await redeem(c.code, u, environment: "sandbox")
        let t = transaction(c.plan, offerName: c.offerName, token: r.token, environment: .sandbox)
        let done = try await post(r.id, signed: Self.ca.sign(t), u)
        XCTAssertEqual(done.status, 200, done.text)
        XCTAssertEqual(try done.decode(RedemptionBody.self).status, "completed", done.text)
        XCTAssertEqual(try done.decode(RedemptionBody.self).sandbox, true, done.text)
    }

    func testATransactionIdIsFetchedThroughGrantsAndVerified() async throws {
        let c = try await coupon()
        let u = try Self.minter.user()
        let r = try await redeem(c.code, u)
        let t = transaction(c.plan, offerName: c.offerName, token: r.token)
        Self.appStoreServer.register(t)
        let done = try await client.json(
            "POST", "/v1/redemptions/\(r.id)/purchase", ["transactionId": t.transactionId], token: u.token)
        XCTAssertEqual(done.status, 200, done.text)
        XCTAssertEqual(try done.decode(RedemptionBody.self).status, "completed", done.text)
        XCTAssertTrue(Self.appStoreServer.received.contains { $0.path.hasSuffix(t.transactionId) })
        let unknown = try await client.json(
            "POST", "/v1/redemptions/\(r.id)/purchase", ["transactionId": "999999999999"], token: u.token)
        XCTAssertEqual(unknown.status, 404, unknown.text)
    }

    /// Grants killed with SIGKILL in the middle of a burst of Apple's notifications, each sent
    /// twice and followed by a renewal, while their `coupon.redeemed` notices cross the bus to it:
    /// every purchase is one completed redemption, and every chain one webhook event once grants
    /// is back. Nothing is lost, and nothing is done twice. Grants is started again before the
    /// checks, so that the next test finds the stack as it was.
    func testKillingGrantsDuringANotificationBurstLosesAndRepeatsNothing() async throws {
        let c = try await coupon()
        var reserved: [String] = []
        var payloads: [String] = []
        for i in 0..<32 {
            // Three in four through a reservation, the rest typed straight into the App Store.
            var token: UUID?
            if i % 4 != 3 {
                let r = try await redeem(c.code, try Self.minter.user())
                reserved.append(r.id)
                token = r.token
            }
            let t = transaction(c.plan, offerName: c.offerName, token: token)
            let first = sender.signedPayload(
                sender.notification(i % 2 == 0 ? .offerRedeemed : .subscribed, transaction: t))
            var renewal = transaction(c.plan, offerName: c.offerName, token: token, original: t.originalTransactionId)
            renewal.transactionReason = .renewal
            payloads += [first, first, sender.signedPayload(sender.notification(.didRenew, transaction: renewal))]
        }
        payloads.shuffle()
        let url = notifications, sender = self.sender
        func burst(_ part: ArraySlice<String>) async throws -> [Int] {
            try await withThrowingTaskGroup(of: Int.self) { group in
                for payload in part { group.addTask { try await sender.send(payload, to: url).status } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
        }
        let third = payloads.count / 3
        var statuses = try await burst(payloads[..<third])
        kill(try Self.stack.pid("grants"), SIGKILL)
        statuses += try await burst(payloads[third..<(2 * third)])
        try await Self.stack.restart("grants")
        statuses += try await burst(payloads[(2 * third)...])
        XCTAssertEqual(statuses.filter { $0 != 200 }, [], "Apple's notifications never wait for grants")

        let db = try PGConnection(url: try Self.stack.adminDatabaseURL())
        let rows = try db.query(
            """
            SELECT r.id::text AS id, r.status, (SELECT count(*)::int FROM coupons.store_purchases p WHERE p.redemption_id = r.id) AS chains
            FROM coupons.redemptions r JOIN coupons.coupons c ON c.id = r.coupon_id WHERE c.code = $1
            """, [c.code]
        ).rows
        let redemptions = try rows.map {
            (
                id: try $0.decode("id", as: String.self), status: try $0.decode("status", as: String.self),
                chains: try $0.decode("chains", as: Int.self)
            )
        }
        XCTAssertEqual(redemptions.count, 32, "one redemption per purchase")
        XCTAssertEqual(redemptions.filter { $0.status != "completed" || $0.chains != 1 }.map(\.id), [])
        XCTAssertEqual(
            Set(reserved.map { $0.lowercased() }).subtracting(redemptions.map(\.id)), [],
            "each reservation completed by its own purchase")

        // One event per chain, once grants is back (a delivery cut off by the kill may come twice, with its id).
        func events(_ id: String) -> Set<String> {
            Set(
                Self.receiver.received.filter {
                    let body = String(decoding: $0.body, as: UTF8.self).lowercased()
                    return body.contains(id) && body.contains("coupon.redeemed")
                }.map(\.id))
        }
        let delivered = try await Self.stack.eventually(60) { redemptions.allSatisfy { !events($0.id).isEmpty } }
        XCTAssertTrue(delivered, "every chain's webhook arrives after grants is back\n" + Self.stack.logs())
        // Time for a second event, which must not come: no condition says that it never will.
        try await Task.sleep(for: .seconds(2))
        XCTAssertEqual(redemptions.filter { events($0.id).count != 1 }.map(\.id), [], "one event per chain")
    }
}
