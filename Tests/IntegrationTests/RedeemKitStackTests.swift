import Bus
import Core
import Cryptography
import Database
import Foundation
import RedeemKit
import TestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// RedeemKit against the real stack: an app signs up, validates, redeems, awaits the
/// completion after a relaunch and reads its entitlements; every refusal reason comes back as a
/// value carrying the server's own sentence; an iOS discount hands off to the App Store and is
/// completed by a transaction signed through a test CA (the gateway's configured Apple root);
/// sessions refresh, link a record name and sign out. App Store Connect is an address where
/// nothing listens, so an iOS discount's offer stays `notReady` until the test reports it made.
final class RedeemKitStackTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var ca: TestAppleCA!
    nonisolated(unsafe) static var appleKey: TestAppleAPIKey!
    nonisolated(unsafe) static var coupons: BusClient!
    nonisolated(unsafe) static var bus: BusNode!
    nonisolated(unsafe) static var appleIdentity: AppleIdentityProvider!
    static let appleClientId = "com.example.redeemkit.signin"
    static let bundleId = "com.example.redeemkit"
    static let appId: Int64 = 1_234_567_891

    override class func startSuite() throws {
        ca = try TestAppleCA()
        appleKey = try TestAppleAPIKey()
        let nowhere = "http://127.0.0.1:\(try Project.freePort())"
        appleIdentity = AppleIdentityProvider()
        let jwks = ca.rootCertificatesFile.deletingLastPathComponent().appendingPathComponent(
            "apple-jwks-\(UUID().uuidString).json")
        try appleIdentity.jwks().write(to: jwks)
        stack = try Stack(environment: [
            "REDEEM_APPLE_ROOT_CERTS": ca.rootCertificatesFile.path, "REDEEM_APPLE_BUNDLE_ID": bundleId,
            "REDEEM_APPLE_APP_ID": String(appId), "REDEEM_APPLE_OFFER_SETTLE": "0",
            "REDEEM_ASC_KEY_ID": appleKey.keyId, "REDEEM_ASC_ISSUER_ID": appleKey.issuerId,
            "REDEEM_ASC_PRIVATE_KEY": appleKey.privateKeyFile.path, "REDEEM_ASC_URL": nowhere,
            "REDEEM_APPSTORE_KEY_ID": appleKey.keyId, "REDEEM_APPSTORE_ISSUER_ID": appleKey.issuerId,
            "REDEEM_APPSTORE_PRIVATE_KEY": appleKey.privateKeyFile.path, "REDEEM_APPSTORE_URL": nowhere,
            "REDEEM_APPSTORE_SANDBOX_URL": nowhere, "REDEEM_WEBHOOK_ALLOW_PRIVATE": "1",
            "REDEEM_APPLE_CLIENT_ID": appleClientId, "REDEEM_APPLE_JWKS": jwks.path
        ])
        let bus = try XCTUnwrap(stack.wiring()["REDEEM_COUPONS_BUS"]).split(separator: ",").map(String.init)
        // What grants reports on the bus, as grants (the stack's bus is CURVE-secured).
        Self.bus = try stack.busNode(as: "grants")
        coupons = try BusClient(bus: Self.bus, service: "coupons", connect: bus)
    }

    override class func stopSuite() {
        coupons?.stop()
        bus?.stop()
        stack?.stop()
    }

    // MARK: - Helpers

    var operatorClient: OperatorClient { OperatorClient(baseURL: Self.stack.gateway, apiKey: Self.stack.adminKey) }

    static func code(_ prefix: String) -> String { prefix + "-" + UUID().uuidString.prefix(8).uppercased() }

    /// A client of the stack's gateway over `store`, as an app on `platform` makes it.
    func app(_ store: any TokenStore = MemoryTokenStore(), platform: RedeemKit.Platform = .web) -> RedeemClient {
        RedeemClient(
            configuration: .init(
                baseURL: Self.stack.gateway, tokenStore: store, platform: platform, timeout: 30,
                urlSession: URLSession(configuration: .ephemeral)))
    }

    /// A new account signed in on a new client.
    func signedUp(
        _ store: any TokenStore = MemoryTokenStore(), platform: RedeemKit.Platform = .web
    ) async throws -> (RedeemClient, Account) {
        let client = app(store, platform: platform)
        let account = try await client.signUp(
            email: "pilot-\(UUID().uuidString.prefix(8))@example.com", password: "correct horse battery staple")
        return (client, account)
    }

    func freePeriod(_ configure: (inout RedeemKit.CouponInput) -> Void = { _ in }) async throws -> String {
        var input = RedeemKit.CouponInput(
            code: Self.code("KIT"), kind: .freePeriod, duration: .init(unit: "month", count: 1))
        input.entitlementId = "pro"
        configure(&input)
        return try await operatorClient.createCoupon(input).code
    }

    /// A plan with an App Store subscription and a 50 % off iOS coupon on it; its offer is
    /// reported made (so `ready`, the settle time being 0) when `ready`.
    func appStoreDiscount(ready: Bool) async throws -> (code: String, plan: String, offerName: String) {
        let plan = "pro.monthly." + UUID().uuidString.prefix(6).lowercased()
        _ = try await operatorClient.createPlan(
            productId: plan, name: "Pro", appStoreSubscriptionId: "6444" + String(Int.random(in: 100_000...999_999)))
        var input = RedeemKit.CouponInput(
            code: Self.code("APP"), kind: .percentOff, duration: .init(unit: "month", count: 1))
        input.percentOff = 50
        input.periodCount = 1
        input.productIds = [plan]
        input.platforms = [.ios]
        input.maxRedemptions = 100
        input.expiresAt = Date().addingTimeInterval(30 * 86_400)
        let code = try await operatorClient.createCoupon(input).code
        let db = try PGConnection(url: try Self.stack.adminDatabaseURL())
        let row = try XCTUnwrap(
            try db.query(
                """
                SELECT c.id, o.offer_name FROM coupons.coupons c JOIN coupons.store_offers o ON o.coupon_id = c.id WHERE c.code = $1
                """, [code]
            ).rows.first)
        let couponId: UUID = try row.decode("id")
        if ready {
            _ = try await Self.coupons.request(
                Coupons.StoreOfferReport(
                    couponId: couponId, store: .appStore, productId: plan, state: .waitingForApple,
                    offerId: "offer-" + UUID().uuidString.prefix(8),
                    customCodeId: "code-" + UUID().uuidString.prefix(8),
                    codeCreatedAt: Date().addingTimeInterval(-60)))
        }
        return (code, plan, try row.decode("offer_name"))
    }

    // MARK: - The seed's flow

    func testSignUpValidateRedeemAwaitAfterARelaunchAndEntitlements() async throws {
        let directory = try Project.temporaryDirectory("redeemkit")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (client, account) = try await signedUp(try FileTokenStore(directory: directory))
        let code = try await freePeriod()

        let check = try await client.validateCoupon(code.lowercased())
        XCTAssertTrue(check.valid, "\(check)")
        XCTAssertNil(check.reason)
        XCTAssertEqual(check.coupon?.kind, .freePeriod)
        XCTAssertEqual(check.coupon?.entitlementId, "pro")
        XCTAssertEqual(check.eligibleProductIds, [])

        let outcome = try await client.redeemCoupon(code)
        guard case .redeemed(let redemption, let isNew) = outcome else { return XCTFail("refused: \(outcome)") }
        XCTAssertTrue(isNew)
        XCTAssertEqual(redemption.code, code)
        XCTAssertEqual(redemption.platform, .web)
        let again = try await client.redeemCoupon(code)
        XCTAssertEqual(again.redemption?.redemptionId, redemption.redemptionId, "a retry answers the same redemption")
        if case .redeemed(_, let secondIsNew) = again { XCTAssertFalse(secondIsNew) }

        // The app is killed here; the next launch finds the pending redemption in the same store.
        let relaunched = app(try FileTokenStore(directory: directory))
        let v1 = try await relaunched.account?.id
        XCTAssertEqual(v1, account.id)
        let pending = try await relaunched.pendingRedemptions()
        if redemption.status.isSettled {
            XCTAssertEqual(pending, [])
        } else {
            XCTAssertEqual(pending, [redemption.redemptionId])
        }
        var updates = relaunched.entitlementUpdates.makeAsyncIterator()
        let completion = try await relaunched.awaitCouponCompletion(redemptionId: redemption.redemptionId, timeout: 30)
        guard case .completed(let entitlements, let done) = completion else {
            return XCTFail("not completed: \(completion)")
        }
        XCTAssertEqual(done.status, .completed)
        XCTAssertEqual(done.entitlement?.entitlementId, "pro")
        XCTAssertEqual(entitlements.map(\.entitlementId), ["pro"])
        let expiry = try XCTUnwrap(entitlements.first?.expiresAt)
        XCTAssertEqual(expiry.timeIntervalSinceNow, 30 * 86_400, accuracy: 2 * 86_400, "a month of Pro")
        let v2 = try await relaunched.pendingRedemptions()
        XCTAssertEqual(v2, [])
        let yielded = await updates.next()
        XCTAssertEqual(yielded?.map(\.entitlementId), ["pro"])

        let entitled = try await relaunched.isEntitled(to: "pro")
        XCTAssertTrue(entitled)
        let notEntitled = try await relaunched.isEntitled(to: "platinum")
        XCTAssertFalse(notEntitled)
        let v3 = try await relaunched.entitlements().first?.source
        XCTAssertEqual(v3, entitlements.first?.source)
        let mine = try await relaunched.myRedemptions()
        XCTAssertEqual(mine.data.map(\.redemptionId), [redemption.redemptionId])
        // The operator sees it completed, for this account.
        let seen = try await operatorClient.redemption(redemption.redemptionId)
        XCTAssertEqual(seen.status, .completed)
        XCTAssertEqual(seen.appUserId, account.appUserId)
    }

    func testEveryRefusalReasonIsAValueWithTheServersSentence() async throws {
        let (client, _) = try await signedUp()
        let op = operatorClient

        func expect(
            _ code: String, _ reason: CouponError.Reason, platform: RedeemKit.Platform? = nil, line: UInt = #line
        ) async throws {
            let check = try await client.validateCoupon(code, platform: platform)
            XCTAssertFalse(check.valid, "validate \(code)", line: line)
            XCTAssertEqual(check.reason, reason, "validate \(code)", line: line)
            let outcome = try await client.redeemCoupon(code, platform: platform)
            let refusal = try XCTUnwrap(outcome.refusal, "redeem \(code): \(outcome)", line: line)
            XCTAssertEqual(refusal.reason, reason, "redeem \(code)", line: line)
            // RedeemKit's sentence for the reason is the server's own.
            XCTAssertEqual(refusal.localizedDescription, refusal.serverMessage, line: line)
            XCTAssertNotNil(refusal.requestId, line: line)
        }

        try await expect("NO-SUCH-CODE", .notFound)
        let inactive = try await freePeriod()
        try await op.deactivateCoupon(inactive)
        try await expect(inactive, .inactive)
        try await expect(try await freePeriod { $0.startsAt = Date().addingTimeInterval(30 * 86_400) }, .notStarted)
        let soon = try await freePeriod { $0.expiresAt = Date().addingTimeInterval(1.5) }
        try await Task.sleep(nanoseconds: 2_000_000_000)  // time passing past the expiry is the point
        try await expect(soon, .expired)
        try await expect(try await freePeriod { $0.platforms = [.ios] }, .notEligible, platform: .android)
        let capped = try await freePeriod { $0.maxRedemptions = 1 }
        let (other, _) = try await signedUp()
        let v4 = try await other.redeemCoupon(capped).redemption
        XCTAssertNotNil(v4)
        try await expect(capped, .exhausted)
        let discount = try await appStoreDiscount(ready: false)
        try await expect(discount.code, .notReady, platform: .ios)

        // alreadyRedeemed: validate says so once the use is made; redeem answers that redemption again.
        let once = try await freePeriod()
        let redeemedOnce = try await client.redeemCoupon(once).redemption
        let first = try XCTUnwrap(redeemedOnce)
        _ = try await client.awaitCouponCompletion(redemptionId: first.redemptionId, timeout: 30)
        let check = try await client.validateCoupon(once)
        XCTAssertEqual(check.reason, .alreadyRedeemed)
        XCTAssertEqual(check.error?.localizedDescription, "You have already redeemed this coupon.")
        let v5 = try await client.redeemCoupon(once).redemption?.redemptionId
        XCTAssertEqual(v5, first.redemptionId)

        // A guest: no session, no request.
        let guest = app()
        let guestCheck = try await guest.validateCoupon(once)
        XCTAssertEqual(guestCheck.reason, .notIdentified)
        let v6 = try await guest.redeemCoupon(once).refusal?.reason
        XCTAssertEqual(v6, .notIdentified)
    }

    // MARK: - The App Store hand-off

    func testAnIOSDiscountHandsOffToTheAppStoreAndCompletesWithTheSignedTransaction() async throws {
        let discount = try await appStoreDiscount(ready: true)
        let (client, _) = try await signedUp(platform: .ios)
        let check = try await client.validateCoupon(discount.code)
        XCTAssertTrue(check.valid, "\(check)")
        XCTAssertEqual(check.offer?.percentOff, 50)
        XCTAssertEqual(check.eligibleProductIds, [discount.plan])
        XCTAssertEqual(
            check.appStore?.redemptionUrl.absoluteString,
            "https://apps.apple.com/redeem?ctx=offercodes&id=\(Self.appId)&code=\(discount.code)")

        let redemption = try await client.redeemCoupon(discount.code).get()
        XCTAssertEqual(redemption.status, .reserved)
        let token = try XCTUnwrap(redemption.appStore?.appAccountToken)
        let v7 = try await client.pendingRedemptions()
        XCTAssertEqual(v7, [redemption.redemptionId])

        // The app awaits while StoreKit runs; the post of the signed transaction wakes it.
        let waiter = Task { try await client.awaitCouponCompletion(redemptionId: redemption.redemptionId, timeout: 30) }
        // The post comes while the app awaits (its long poll under way): the pause is the point,
        // nothing outside the client tells when its request has gone out.
        try await Task.sleep(nanoseconds: 500_000_000)
        let id = String(Int.random(in: 100_000_000_000...999_999_999_999))
        var t = JWSTransactionDecodedPayload(
            transactionId: id, originalTransactionId: id, bundleId: Self.bundleId, productId: discount.plan,
            purchaseDate: Date(), environment: .production)
        t.offerType = .offerCode
        t.offerIdentifier = discount.offerName
        t.appAccountToken = token
        t.price = 4990
        t.currency = "USD"
        t.type = .autoRenewable
        t.signedDate = Date()
        let completed = try await client.completeAppStorePurchase(
            redemptionId: redemption.redemptionId, signedTransaction: Self.ca.sign(t))
        XCTAssertEqual(completed.status, .completed)
        XCTAssertEqual(completed.pricePaid, RedeemKit.Money(amount: "4.99", currency: "USD"))
        let awaited = try await waiter.value
        guard case .completed(_, let done) = awaited else { return XCTFail("not completed: \(awaited)") }
        XCTAssertEqual(done.redemptionId, redemption.redemptionId)
        let v8 = try await client.pendingRedemptions()
        XCTAssertEqual(v8, [])

        // A document that is not Apple's is refused with the server's code.
        do {
            _ = try await client.completeAppStorePurchase(
                redemptionId: redemption.redemptionId, signedTransaction: "not.a.jws")
            XCTFail("a forged transaction was accepted")
        } catch let e as RedeemError {
            XCTAssertEqual(e.status, 401)
            XCTAssertEqual(e.code, .invalidSignedData)
            XCTAssertNotNil(e.requestId)
        }
    }

    /// The App Store's transactions as StoreKit would hand them over, from a test; each one's
    /// `finish()` is counted.
    final class Transactions: StoreTransactionSource, @unchecked Sendable {
        let stream: AsyncStream<StoreTransaction>
        let continuation: AsyncStream<StoreTransaction>.Continuation
        // Touched only under `lock`.
        private let lock = NSLock()
        private var finishedIds: [String] = []

        init() { (stream, continuation) = AsyncStream.makeStream(of: StoreTransaction.self) }
        func transactions() -> AsyncStream<StoreTransaction> { stream }

        func deliver(_ id: String, product: String, signed: String, token: UUID?) {
            continuation.yield(
                StoreTransaction(
                    id: id, productId: product, offerType: .code, appAccountToken: token,
                    signedTransaction: signed, finish: { [weak self] in self?.finished(id) }))
        }

        private func finished(_ id: String) {
            lock.lock()
            finishedIds.append(id)
            lock.unlock()
        }

        var finished: [String] {
            lock.lock()
            defer { lock.unlock() }
            return finishedIds
        }
    }

    /// An offer code redeemed while the app was away: StoreKit hands the transaction over at the
    /// next launch, and the listener `start()` runs posts it to the account's reservation, which
    /// completes, and finishes it.
    func testThePurchaseListenerCompletesADiscountBoughtWhileTheAppWasAway() async throws {
        let discount = try await appStoreDiscount(ready: true)
        let store = MemoryTokenStore()
        let (first, _) = try await signedUp(store, platform: .ios)
        let redemption = try await first.redeemCoupon(discount.code).get()
        let token = try XCTUnwrap(redemption.appStore?.appAccountToken)

        // The user is in the App Store; the app is killed. At the next launch StoreKit has the
        // purchase, unfinished, and the listener starts.
        let id = String(Int.random(in: 100_000_000_000...999_999_999_999))
        var t = JWSTransactionDecodedPayload(
            transactionId: id, originalTransactionId: id, bundleId: Self.bundleId, productId: discount.plan,
            purchaseDate: Date(), environment: .production)
        t.offerType = .offerCode
        t.offerIdentifier = discount.offerName
        t.appAccountToken = token
        t.price = 4990
        t.currency = "USD"
        t.type = .autoRenewable
        t.signedDate = Date()
        let transactions = Transactions()
        transactions.deliver(id, product: discount.plan, signed: try Self.ca.sign(t), token: token)
        let relaunched = RedeemClient(
            configuration: .init(
                baseURL: Self.stack.gateway, tokenStore: store, platform: .ios, timeout: 30,
                urlSession: URLSession(configuration: .ephemeral), storeTransactions: transactions))
        var outcomes = relaunched.purchaseUpdates.makeAsyncIterator()
        await relaunched.start()
        let outcome = await outcomes.next()
        guard case .posted(id, let posted) = outcome else {
            return XCTFail("not posted: \(String(describing: outcome))")
        }
        XCTAssertEqual(posted.redemptionId, redemption.redemptionId)
        XCTAssertEqual(posted.status, .completed)
        XCTAssertEqual(posted.pricePaid, RedeemKit.Money(amount: "4.99", currency: "USD"))
        XCTAssertEqual(transactions.finished, [id])
        let completion = try await relaunched.awaitCouponCompletion(redemptionId: redemption.redemptionId, timeout: 10)
        guard case .completed = completion else { return XCTFail("not completed: \(completion)") }
        let pending = try await relaunched.pendingRedemptions()
        XCTAssertEqual(pending, [])
        await relaunched.stop()
    }

    /// The other order: the app was killed while its user bought with the code on Apple's page,
    /// which carries no `appAccountToken`, and Apple's notification reached Redeem first (a
    /// redemption of its own, unattributed). At the next launch the listener posts the same
    /// transaction, and the account's reservation completes: it, not the notification's stand-in,
    /// is what `awaitCouponCompletion` sees.
    func testThePurchaseListenerCompletesTheReservationAfterApplesNotificationCameFirst() async throws {
        let discount = try await appStoreDiscount(ready: true)
        let store = MemoryTokenStore()
        let (first, _) = try await signedUp(store, platform: .ios)
        let redemption = try await first.redeemCoupon(discount.code).get()

        let id = String(Int.random(in: 100_000_000_000...999_999_999_999))
        var t = JWSTransactionDecodedPayload(
            transactionId: id, originalTransactionId: id, bundleId: Self.bundleId, productId: discount.plan,
            purchaseDate: Date(), environment: .production)
        t.offerType = .offerCode
        t.offerIdentifier = discount.offerName
        t.price = 4990
        t.currency = "USD"
        t.type = .autoRenewable
        t.signedDate = Date()
        let sender = AppleNotificationSender(ca: Self.ca, bundleId: Self.bundleId, appAppleId: Self.appId)
        let notified = try await sender.send(
            sender.signedPayload(sender.notification(.offerRedeemed, transaction: t)),
            to: Self.stack.gateway.appendingPathComponent("v1/stores/apple/notifications"))
        XCTAssertEqual(notified.status, 200, notified.text)
        let standIn = try XCTUnwrap(try notified.decode(StoreNotificationAnswer.self).redemptionId, notified.text)
        XCTAssertNotEqual(standIn, redemption.redemptionId.uuidString)

        let transactions = Transactions()
        transactions.deliver(id, product: discount.plan, signed: try Self.ca.sign(t), token: nil)
        let relaunched = RedeemClient(
            configuration: .init(
                baseURL: Self.stack.gateway, tokenStore: store, platform: .ios, timeout: 30,
                urlSession: URLSession(configuration: .ephemeral), storeTransactions: transactions))
        var outcomes = relaunched.purchaseUpdates.makeAsyncIterator()
        await relaunched.start()
        let outcome = await outcomes.next()
        guard case .posted(id, let posted) = outcome else {
            return XCTFail("not posted: \(String(describing: outcome))")
        }
        XCTAssertEqual(posted.redemptionId, redemption.redemptionId)
        XCTAssertEqual(posted.status, .completed)
        XCTAssertEqual(transactions.finished, [id])
        let completion = try await relaunched.awaitCouponCompletion(redemptionId: redemption.redemptionId, timeout: 10)
        guard case .completed = completion else { return XCTFail("not completed: \(completion)") }
        await relaunched.stop()
    }

    /// The store account already owns the plan: the app gives the reserved use back.
    func testAReservedUseIsGivenBackWhenTheStoreAccountOwnsThePlan() async throws {
        let discount = try await appStoreDiscount(ready: true)
        let (client, _) = try await signedUp(platform: .ios)
        let redemption = try await client.redeemCoupon(discount.code).get()
        let released = try await client.release(redemption.redemptionId, reason: .alreadyOwned)
        XCTAssertEqual(released.status, .released)
        let pending = try await client.pendingRedemptions()
        XCTAssertEqual(pending, [])
        do {
            _ = try await client.release(redemption.redemptionId, reason: .alreadyOwned)
            XCTFail("a released use was given back twice")
        } catch let e as RedeemError {
            XCTAssertEqual(e.code, .invalidState)
        }
        let seen = try await operatorClient.coupon(discount.code)
        XCTAssertEqual(seen.reservedCount, 0)
    }

    /// Email verification, password reset, the browser sign-in's code and linking Apple, against
    /// a server without mail: each call reaches its route and reads its answer.
    func testTheAccountCallsReachTheirRoutes() async throws {
        let (client, account) = try await signedUp()
        do {
            try await client.requestEmailVerification()
            XCTFail("a server without mail sent a verification code")
        } catch let e as RedeemError {
            XCTAssertEqual(e.code, .mailNotConfigured)
        }
        do {
            try await client.requestPasswordReset(email: account.email ?? "")
            XCTFail("a server without mail sent a reset code")
        } catch let e as RedeemError {
            XCTAssertEqual(e.code, .mailNotConfigured)
        }
        do {
            try await client.confirmEmail(code: "ev_not-a-code")
            XCTFail("a made-up code verified the email")
        } catch let e as RedeemError {
            XCTAssertTrue([.invalidToken, .mailNotConfigured].contains(e.code), "\(e)")
        }
        do {
            let verifier = "a-verifier-of-43-characters-at-the-very-least"
            try await app().exchangeSignInCode("not-a-code", codeVerifier: verifier)
            XCTFail("a made-up sign-in code signed in")
        } catch let e as RedeemError {
            XCTAssertTrue([.invalidSignInCode, .stateMismatch].contains(e.code), "\(e)")
        }
        // Linking Apple right after sign-up (the password was just given).
        let sub = "apple-" + UUID().uuidString
        let linked = try await client.linkApple(
            identityToken: Self.appleIdentity.token(.init(aud: Self.appleClientId, sub: sub)))
        XCTAssertTrue(linked.identities.contains { $0.type == "apple" }, "\(linked.identities)")
        let stored = try await client.account
        XCTAssertEqual(stored?.identities, linked.identities)
        let me = try await client.me()
        XCTAssertNil(me.managementUrl, "no store subscription under Redeem's own ledger")
        let again = try await app().signInWithApple(
            identityToken: Self.appleIdentity.token(.init(aud: Self.appleClientId, sub: sub)))
        XCTAssertEqual(again.id, account.id)
    }

    // MARK: - Sessions

    func testSessionsRefreshLinkARecordNameAndSignOut() async throws {
        let store = MemoryTokenStore()
        let email = "pilot-\(UUID().uuidString.prefix(8))@example.com"
        let client = app(store)
        let account = try await client.signUp(email: email, password: "correct horse battery staple")
        XCTAssertEqual(account.email, email)

        // Ten calls at once on a client that finds its token about to expire: all answered.
        let eager = RedeemClient(
            configuration: .init(
                baseURL: Self.stack.gateway, tokenStore: store, refreshMargin: 3600,
                urlSession: URLSession(configuration: .ephemeral)))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<10 { group.addTask { _ = try await eager.entitlements() } }
            try await group.waitForAll()
        }
        try await client.refreshSession()
        let v9 = try await client.me().id
        XCTAssertEqual(v9, account.id)

        // A linked record name is kept as an identity; the answer's appUserId (the record name,
        // once a link moves a fresh id over to it) is what the client and the server then hold.
        let recordName = "_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let link = try await client.linkCloudKit(recordName: recordName)
        XCTAssertTrue([recordName, account.appUserId].contains(link.appUserId), link.appUserId)
        let v10 = try await client.account?.appUserId
        XCTAssertEqual(v10, link.appUserId)
        let v11 = try await client.me()
        XCTAssertEqual(v11.appUserId, link.appUserId)
        XCTAssertTrue(
            v11.identities.contains { $0.type == "cloudkit" && $0.recordName == recordName }, "\(v11.identities)")
        let taken = try await signedUp()
        do {
            _ = try await taken.0.linkCloudKit(recordName: recordName)
            XCTFail("another account's record name was linked")
        } catch let e as RedeemError {
            XCTAssertEqual(e.code, .recordNameInUse)
            XCTAssertEqual(e.field, "recordName")
        }

        // Another device signs in to the same account.
        let second = app()
        let v12 = try await second.signIn(email: email.uppercased(), password: "correct horse battery staple").id
        XCTAssertEqual(v12, account.id)
        do {
            _ = try await app().signIn(email: email, password: "wrong password here")
            XCTFail("a wrong password signed in")
        } catch let e as RedeemError {
            XCTAssertEqual(e.code, .invalidCredentials)
            XCTAssertEqual(e.status, 401)
        }

        // Sign-out revokes the session at the server, not only here.
        let stored = try XCTUnwrap(try store.data(forKey: "redeemkit.session"))
        struct Stored: Decodable { let session: AccountSessionBody.Session }
        let accessToken = try JSONDecoder().decode(Stored.self, from: stored).session.accessToken
        await client.signOut()
        let v13 = try await client.isSignedIn
        XCTAssertFalse(v13)
        let revoked = try await Self.stack.eventually(5) {
            try await Self.stack.client.get("/v1/me", token: accessToken).status == 401
        }
        XCTAssertTrue(revoked, "the signed-out token still works")
        let v14 = try await client.validateCoupon("ANY-CODE").reason
        XCTAssertEqual(v14, .notIdentified)

        // Sign in with Apple: the first sign-in creates the account with the record name as its
        // appUserId; the next one signs in to it.
        let sub = "apple-" + UUID().uuidString
        let identityToken = Self.appleIdentity.token(.init(aud: Self.appleClientId, sub: sub))
        let iphone = app(platform: .ios)
        let appleRecord = "_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let appleAccount = try await iphone.signInWithApple(
            identityToken: identityToken, cloudkitRecordName: appleRecord)
        XCTAssertEqual(appleAccount.appUserId, appleRecord)
        let again = try await app().signInWithApple(
            identityToken: Self.appleIdentity.token(.init(aud: Self.appleClientId, sub: sub)))
        XCTAssertEqual(again.id, appleAccount.id)
        do {
            _ = try await app().signInWithApple(
                identityToken: Self.appleIdentity.unsignedToken(.init(aud: Self.appleClientId, sub: sub)))
            XCTFail("an unsigned identity token signed in")
        } catch let e as RedeemError {
            XCTAssertEqual(e.code, .invalidIdentityToken)
        }

        // Deleting the account: when the server refuses, the session stays; when it deletes, it goes.
        do {
            try await second.deleteAccount()
            let v15 = try await second.isSignedIn
            XCTAssertFalse(v15)
        } catch let e as RedeemError {
            let v16 = try await second.isSignedIn
            XCTAssertTrue(v16, "kept after \(e)")
        }
    }
}
