import Foundation
import TestSupport
import Testing

@testable import Core
@testable import CouponsService
@testable import Database

/// Completion from verified App Store purchases (docs/stores.md, flow step 4), against a real
/// PostgreSQL, with real concurrency where the rule is about races: one redemption and one
/// `coupon.redeemed` per purchase chain, attribution, sandbox, and the cap.
@Suite struct StorePurchaseTests {
    /// A connected world with one ready offer (`SALE`, cap `cap`) and its offer name.
    static func sale(cap: Int? = 10, connections: Int = 4) async throws -> (StoreWorld, String) {
        let world = try await StoreWorld.make(settle: 0, connections: connections)
        try await world.plan("pro.monthly")
        try await world.coupon(StoreWorld.discount("SALE", cap: cap))
        try await world.codeMade("SALE")
        return (world, try await world.offerName("SALE"))
    }

    func notices(_ world: StoreWorld) async throws -> [RedemptionCompletedNotice] {
        try await world.outbox(RedemptionCompletedNotice.self)
    }

    @Test func aNotificationCompletesTheReservationItsTokenNames() async throws {
        let (world, offer) = try await Self.sale()
        defer { world.close() }
        let account = UUID.random()
        let reserved = try #require(try await world.redeem("SALE", account: account).redemption)
        let token = try #require(reserved.appStore?.appAccountToken)
        let answer = try await world.purchase(
            .init(
                transaction: StoreWorld.transaction(offer, chain: "2000000001", token: token, price: 6990),
                notificationUUID: "n-1"))
        #expect(answer.created && answer.redemption.redemptionId == reserved.redemptionId)
        let r = answer.redemption
        #expect(r.status == .completed && r.accountId == account && !r.sandbox && r.completedAt != nil)
        #expect(r.pricePaid == Money(amount: "6.99", currency: "EUR"))
        let row = try await world.pool.query(
            "SELECT store_transaction_id, reservation_expires_at FROM coupons.redemptions WHERE id = $1",
            [r.redemptionId]
        ).first!
        #expect(try row.decode("store_transaction_id", as: String.self) == "2000000001")
        #expect(try row.decodeIfPresent("reservation_expires_at", as: Date.self) == nil)
        let purchase = try await world.pool.query(
            "SELECT price_milliunits, currency, sandbox, over_cap, transaction_id FROM coupons.store_purchases"
        ).first!
        #expect(
            try purchase.decode("price_milliunits", as: Int64.self) == 6990
                && purchase.decode("currency", as: String.self) == "EUR")
        #expect(try await notices(world).map(\.redemption.redemptionId) == [r.redemptionId])
        #expect(
            try await world.count("SELECT used_count FROM coupons.coupons") == 1,
            "the reservation's use, not a second one")
        // A repeat of the notification, and a renewal of the chain in another one, change nothing.
        let repeated = try await world.purchase(
            .init(
                transaction: StoreWorld.transaction(offer, chain: "2000000001", token: token), notificationUUID: "n-1"))
        let renewal = try await world.purchase(
            .init(
                transaction: StoreWorld.transaction(
                    offer, chain: "2000000001", transactionId: "2000000002", token: token),
                notificationUUID: "n-2"))
        #expect(!repeated.created && !renewal.created && repeated.redemption == r && renewal.redemption == r)
        #expect(try await notices(world).count == 1)
        #expect(try await world.count("SELECT count(*) FROM coupons.store_purchases") == 1)
    }

    @Test func theAppsPostCompletesItsRedemption() async throws {
        let (world, offer) = try await Self.sale()
        defer { world.close() }
        let account = UUID.random()
        let reserved = try #require(try await world.redeem("SALE", account: account).redemption)
        let answer = try await world.purchase(
            .init(
                transaction: StoreWorld.transaction(offer, chain: "app-1"), redemptionId: reserved.redemptionId,
                accountId: account, appUserId: reserved.appUserId))
        #expect(
            answer.created && answer.redemption.redemptionId == reserved.redemptionId
                && answer.redemption.status == .completed)
        // Someone else can't post it, nor post a redemption that is not theirs.
        let other = UUID.random()
        let stolen = await #expect(throws: ServiceError.self) {
            try await world.purchase(
                .init(transaction: StoreWorld.transaction(offer, chain: "app-1"), accountId: other, appUserId: "other"))
        }
        #expect(stolen?.code == .transactionInUse)
        let notTheirs = await #expect(throws: ServiceError.self) {
            try await world.purchase(
                .init(
                    transaction: StoreWorld.transaction(offer, chain: "app-2"), redemptionId: reserved.redemptionId,
                    accountId: other, appUserId: "other"))
        }
        #expect(notTheirs?.code == .notFound)
        #expect(try await notices(world).count == 1)
    }

    /// Someone who learns another buyer's transaction can't post it to their own reservation: its
    /// `appAccountToken` names the buyer. Nothing is written, and the buyer's own post completes theirs.
    @Test func aPostedTransactionForAnotherAccountIsRefusedAndTheBuyerKeepsIt() async throws {
        let (world, offer) = try await Self.sale()
        defer { world.close() }
        let (buyer, thief) = (UUID.random(), UUID.random())
        let bought = try #require(try await world.redeem("SALE", account: buyer).redemption)
        let stolen = try #require(try await world.redeem("SALE", account: thief).redemption)
        let t = StoreWorld.transaction(offer, chain: "buyer-1", token: StoreIds.appAccountToken(account: buyer))
        for post in [
            Coupons.StorePurchase(
                transaction: t, redemptionId: stolen.redemptionId, accountId: thief, appUserId: stolen.appUserId),
            Coupons.StorePurchase(transaction: t, accountId: thief, appUserId: stolen.appUserId)
        ] {
            let refused = await #expect(throws: ServiceError.self) { try await world.purchase(post) }
            #expect(refused?.code == .invalid && refused?.field == "signedTransaction")
        }
        #expect(try await world.count("SELECT count(*) FROM coupons.store_purchases") == 0)
        #expect(try await world.count("SELECT count(*) FROM coupons.redemptions WHERE status = 'reserved'") == 2)
        let mine = try await world.purchase(
            .init(transaction: t, redemptionId: bought.redemptionId, accountId: buyer, appUserId: bought.appUserId))
        #expect(
            mine.created && mine.redemption.redemptionId == bought.redemptionId && mine.redemption.status == .completed)
        #expect(try await notices(world).count == 1)
    }

    /// A code typed straight into the App Store (or a purchase whose notification came while the
    /// app was away): a completed redemption without an account, counted toward the cap. The app's
    /// later post of the chain completes the reservation it made: the reservation stands for the
    /// chain, the stand-in ends `released` naming it, one use stays taken and no second webhook goes.
    @Test func anUnattributedPurchaseCountsAndTheAppsLaterPostCompletesItsReservation() async throws {
        let (world, offer) = try await Self.sale()
        defer { world.close() }
        let typed = try await world.purchase(
            .init(transaction: StoreWorld.transaction(offer, chain: "typed-1"), notificationUUID: "n-typed"))
        #expect(
            typed.created && typed.redemption.accountId == nil && typed.redemption.appUserId == nil
                && typed.redemption.status == .completed)
        let json = try #require(
            try JSONSerialization.jsonObject(with: JSONEncoder.wire().encode(typed.redemption)) as? [String: Any])
        #expect(json["accountId"] == nil && json["appUserId"] == nil && json["platform"] as? String == "ios")
        #expect(try await world.count("SELECT used_count FROM coupons.coupons") == 1)
        #expect(try await world.get("SALE").redeemedCount == 1)
        // The account had reserved before it went to the App Store.
        let account = UUID.random()
        let reserved = try #require(try await world.redeem("SALE", account: account).redemption)
        #expect(try await world.count("SELECT used_count FROM coupons.coupons") == 2)
        let posted = try await world.purchase(
            .init(
                transaction: StoreWorld.transaction(offer, chain: "typed-1"), redemptionId: reserved.redemptionId,
                accountId: account, appUserId: reserved.appUserId))
        #expect(
            !posted.created && posted.redemption.redemptionId == reserved.redemptionId
                && posted.redemption.status == .completed)
        #expect(posted.redemption.accountId == account && posted.redemption.appUserId == reserved.appUserId)
        #expect(
            posted.redemption.pricePaid == typed.redemption.pricePaid
                && posted.redemption.productId == typed.redemption.productId)
        let ended = try await world.pool.query(
            "SELECT status, failure_reason, completed_at FROM coupons.redemptions WHERE id = $1",
            [typed.redemption.redemptionId]
        ).first!
        #expect(try ended.decode("status", as: String.self) == "released")
        #expect(try ended.decodeIfPresent("completed_at", as: Date.self) == nil)
        #expect(try ended.decode("failure_reason", as: String.self).contains(reserved.redemptionId.uppercasedString))
        #expect(try await world.count("SELECT used_count FROM coupons.coupons") == 1, "one use: the reservation's")
        #expect(try await world.count("SELECT count(*) FROM coupons.redemptions WHERE status = 'completed'") == 1)
        #expect(
            try await world.count(
                "SELECT count(*) FROM coupons.store_purchases WHERE redemption_id = '\(reserved.redemptionId.lowercasedString)'"
            ) == 1)
        #expect(try await notices(world).count == 1)
        // Asked again, the account gets its reservation, completed; Apple's repeat names it too.
        #expect(try await world.redeem("SALE", account: account).redemption?.redemptionId == reserved.redemptionId)
        let repeated = try await world.purchase(
            .init(transaction: StoreWorld.transaction(offer, chain: "typed-1"), notificationUUID: "n-typed"))
        #expect(repeated.redemption.redemptionId == reserved.redemptionId)
    }

    /// The same chain posted later by an account with no reservation: the stand-in becomes its own.
    @Test func anUnattributedPurchasePostedWithoutAReservationBecomesThePostersOwn() async throws {
        let (world, offer) = try await Self.sale()
        defer { world.close() }
        let typed = try await world.purchase(.init(transaction: StoreWorld.transaction(offer, chain: "typed-2")))
        let account = UUID.random()
        let posted = try await world.purchase(
            .init(
                transaction: StoreWorld.transaction(offer, chain: "typed-2"), accountId: account,
                appUserId: "user-\(account.lowercasedString)"))
        #expect(
            posted.redemption.redemptionId == typed.redemption.redemptionId && posted.redemption.accountId == account)
        #expect(try await world.count("SELECT used_count FROM coupons.coupons") == 1)
    }

    @Test func aSandboxPurchaseCompletesOnlyASandboxReservation() async throws {
        let (world, offer) = try await Self.sale()
        defer { world.close() }
        let account = UUID.random()
        let token = StoreIds.appAccountToken(account: account)
        let live = try #require(try await world.redeem("SALE", account: account).redemption)
        // Sandbox, for a live reservation: a sandbox redemption of its own; the live one waits on.
        let tested = try await world.purchase(
            .init(transaction: StoreWorld.transaction(offer, chain: "sb-1", token: token, sandbox: true)))
        #expect(tested.created && tested.redemption.sandbox && tested.redemption.redemptionId != live.redemptionId)
        #expect(tested.redemption.accountId == account && tested.redemption.status == .completed)
        let still = try await world.pool.query(
            "SELECT status FROM coupons.redemptions WHERE id = $1", [live.redemptionId]
        ).first!
        #expect(try still.decode("status", as: String.self) == "reserved")
        #expect(try await world.count("SELECT used_count FROM coupons.coupons") == 1, "sandbox uses don't count")
        // A sandbox reservation is completed by a sandbox purchase.
        let other = UUID.random()
        let sandboxReservation = try #require(try await world.redeem("SALE", account: other, sandbox: true).redemption)
        let done = try await world.purchase(
            .init(
                transaction: StoreWorld.transaction(
                    offer, chain: "sb-2", token: StoreIds.appAccountToken(account: other), sandbox: true)))
        #expect(done.redemption.redemptionId == sandboxReservation.redemptionId && done.redemption.sandbox)
        #expect(try await world.count("SELECT count(*) FROM coupons.store_purchases WHERE sandbox") == 2)
        #expect(try await world.count("SELECT used_count FROM coupons.coupons") == 1)
        // Production completes the live one.
        let production = try await world.purchase(
            .init(transaction: StoreWorld.transaction(offer, chain: "live-1", token: token)))
        #expect(production.redemption.redemptionId == live.redemptionId && !production.redemption.sandbox)
    }

    @Test func aPurchaseOfNoOfferOfRedeemsIsRefusedAndLeavesNothing() async throws {
        let (world, offer) = try await Self.sale()
        defer { world.close() }
        let unknown = await #expect(throws: ServiceError.self) {
            try await world.purchase(
                .init(transaction: StoreWorld.transaction("someone-elses-offer", chain: "x-1"), notificationUUID: "n-x")
            )
        }
        #expect(unknown?.code == .invalid && unknown?.field == "offerIdentifier")
        var intro = StoreWorld.transaction(offer, chain: "x-2")
        intro.offerType = 1
        let notACode = await #expect(throws: ServiceError.self) { try await world.purchase(.init(transaction: intro)) }
        #expect(notACode?.field == "offerType")
        await #expect(throws: ServiceError.self) {
            try await world.purchase(.init(transaction: StoreWorld.transaction(nil, chain: "x-3")))
        }
        #expect(
            try await world.count("SELECT count(*) FROM coupons.store_notifications")
                + world.count("SELECT count(*) FROM coupons.store_purchases") == 0)
        // A later delivery of the refused notification is looked at again, not taken as a repeat.
        await #expect(throws: ServiceError.self) {
            try await world.purchase(
                .init(transaction: StoreWorld.transaction("someone-elses-offer", chain: "x-1"), notificationUUID: "n-x")
            )
        }
    }

    @Test func aPurchaseAfterTheCapIsRecordedOverIt() async throws {
        let (world, offer) = try await Self.sale(cap: 1)
        defer { world.close() }
        _ = try await world.purchase(.init(transaction: StoreWorld.transaction(offer, chain: "in-cap")))
        let over = try await world.purchase(.init(transaction: StoreWorld.transaction(offer, chain: "over-cap")))
        #expect(over.created && over.redemption.status == .completed)
        let coupon = try await world.get("SALE")
        #expect(
            coupon.redeemedCount == 2 && coupon.overCapCount == 1 && coupon.remaining == 0 && coupon.maxRedemptions == 1
        )
        #expect(try await world.count("SELECT used_count FROM coupons.coupons") == 1)
        #expect(try await world.count("SELECT count(*) FROM coupons.store_purchases WHERE over_cap") == 1)
        let json = try #require(
            try JSONSerialization.jsonObject(with: JSONEncoder.wire().encode(coupon)) as? [String: Any])
        #expect(json["overCapCount"] as? Int == 1)
        #expect(try await notices(world).count == 2)
    }

    /// The hand confirmation of support keys still works beside store purchases, and a store
    /// transaction id confirmed by hand can't complete a second redemption from a store purchase.
    @Test func theHandConfirmationStillWorks() async throws {
        let (world, offer) = try await Self.sale()
        defer { world.close() }
        let web = try #require(try await world.redeem("SALE", account: UUID.random(), platform: .web).redemption)
        let done = try await world.pool.transaction {
            try RedemptionStore.purchase(
                $0,
                Coupons.Purchase(
                    id: web.redemptionId, mode: .live, app: DefaultApp.id,
                    pricePaid: Money(
                        amount: "4.99",
                        currency: "EUR"),
                    storeTransactionId: "by-hand-1"))
        }
        #expect(done.status == .completed && done.pricePaid == Money(amount: "4.99", currency: "EUR"))
        #expect(try await notices(world).map(\.redemption.redemptionId) == [web.redemptionId])
        let clash = await #expect(throws: ServiceError.self) {
            try await world.purchase(.init(transaction: StoreWorld.transaction(offer, chain: "by-hand-1")))
        }
        #expect(clash?.code == .transactionInUse)
    }

    // MARK: - Races

    /// Fifty deliveries of one purchase chain at once (Apple's notification and its retries, the
    /// app's posts): one redemption holds the use, the account's reservation, which the chain names;
    /// one `coupon.redeemed`, one of them told it recorded the chain. A notification without the
    /// account's token that takes the coupon's lock first records the chain with a stand-in, which
    /// the next delivery that knows the account ends (`released`, as
    /// `anUnattributedPurchaseCountsAndTheAppsLaterPostCompletesItsReservation` shows one at a time).
    @Test func fiftyConcurrentDeliveriesOfOneChainMakeOneRedemption() async throws {
        let (world, offer) = try await Self.sale(connections: 25)
        defer { world.close() }
        let account = UUID.random()
        let reserved = try #require(try await world.redeem("SALE", account: account).redemption)
        let token = try #require(reserved.appStore?.appAccountToken)
        let answers = try await withThrowingTaskGroup(of: Coupons.StorePurchase.Response.self) { group in
            for i in 0..<50 {
                let t = StoreWorld.transaction(
                    offer, chain: "race-chain", transactionId: "race-\(i % 3)", token: i % 2 == 0 ? token : nil)
                let req: Coupons.StorePurchase =
                    switch i % 4 {
                    case 0: .init(transaction: t, notificationUUID: "race-n-\(i % 5)")
                    case 1:
                        .init(
                            transaction: t, redemptionId: reserved.redemptionId, accountId: account,
                            appUserId: reserved.appUserId)
                    default: .init(transaction: t, notificationUUID: "race-n-\(i)")
                    }
                group.addTask { try await world.purchase(req) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.count == 50 && answers.filter(\.created).count == 1)
        let others = Set(answers.map(\.redemption.redemptionId)).subtracting([reserved.redemptionId])
        #expect(others.count <= 1, "at most one stand-in")
        for standIn in others {
            #expect(
                try await world.count(
                    "SELECT count(*) FROM coupons.redemptions WHERE id = $1 AND status = 'released' AND account_id IS NULL",
                    [standIn]) == 1)
        }
        #expect(try await world.count("SELECT count(*) FROM coupons.redemptions") == 1 + others.count)
        #expect(
            try await world.count(
                "SELECT count(*) FROM coupons.redemptions WHERE holds_use AND id = $1 AND status = 'completed'",
                [reserved.redemptionId]) == 1)
        #expect(try await world.count("SELECT count(*) FROM coupons.redemptions WHERE holds_use") == 1)
        #expect(
            try await world.count(
                "SELECT count(*) FROM coupons.store_purchases WHERE redemption_id = $1", [reserved.redemptionId]) == 1)
        #expect(try await world.count("SELECT count(*) FROM coupons.store_purchases") == 1)
        #expect(try await notices(world).count == 1)
        #expect(try await world.count("SELECT used_count FROM coupons.coupons") == 1)
    }

    /// Apple's notification (no token: the code went in through the offer-code page) and the app's
    /// post of the same chain, at once, for many accounts: each ends with one completed
    /// redemption, the account's, and one `coupon.redeemed`, whichever came first.
    @Test func aNotificationAndTheAppsPostRacingMakeOneAttributedRedemption() async throws {
        let (world, offer) = try await Self.sale(cap: 100, connections: 25)
        defer { world.close() }
        let accounts = (0..<12).map { _ in UUID.random() }
        var reservations: [UUID: RedemptionView] = [:]
        for a in accounts {
            let r = try #require(try await world.redeem("SALE", account: a).redemption)
            reservations[a] = r
        }
        let snapshot = reservations
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (i, a) in accounts.enumerated() {
                let r = snapshot[a]!
                let t = StoreWorld.transaction(offer, chain: "pair-\(i)")
                group.addTask { _ = try await world.purchase(.init(transaction: t, notificationUUID: "pair-n-\(i)")) }
                group.addTask {
                    _ = try await world.purchase(
                        .init(transaction: t, redemptionId: r.redemptionId, accountId: a, appUserId: r.appUserId))
                }
            }
            try await group.waitForAll()
        }
        for (i, a) in accounts.enumerated() {
            let done = try await world.pool.query(
                """
                SELECT r.account_id FROM coupons.store_purchases p JOIN coupons.redemptions r ON r.id = p.redemption_id
                WHERE p.original_transaction_id = $1 AND r.status = 'completed'
                """, ["pair-\(i)"]
            ).rows
            #expect(done.count == 1)
            #expect(try done.first?.decode("account_id", as: UUID.self) == a, "chain \(i) is its account's")
            #expect(
                try await world.count(
                    "SELECT count(*) FROM coupons.redemptions WHERE account_id = $1 AND holds_use", [a]) == 1)
        }
        #expect(try await notices(world).count == accounts.count)
        #expect(
            try await world.count("SELECT used_count FROM coupons.coupons") == accounts.count,
            "one use per account, whichever came first")
        #expect(try await world.count("SELECT count(*) FROM coupons.redemptions WHERE status = 'reserved'") == 0)
    }

    /// Thirty purchases of distinct chains at once on a coupon with a cap of 5: every one is
    /// recorded, 25 over the cap, and the counter stays at the cap (its CHECK holds).
    @Test func purchasesRacingPastTheCapAreAllRecordedAndTheCapHolds() async throws {
        let (world, offer) = try await Self.sale(cap: 5, connections: 25)
        defer { world.close() }
        let answers = try await withThrowingTaskGroup(of: Coupons.StorePurchase.Response.self) { group in
            for i in 0..<30 {
                let t = StoreWorld.transaction(offer, chain: "burst-\(i)")
                group.addTask { try await world.purchase(.init(transaction: t, notificationUUID: "burst-n-\(i)")) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.count == 30 && answers.allSatisfy(\.created))
        #expect(try await world.count("SELECT used_count FROM coupons.coupons") == 5)
        #expect(try await world.count("SELECT count(*) FROM coupons.store_purchases WHERE over_cap") == 25)
        #expect(try await world.count("SELECT count(*) FROM coupons.redemptions WHERE status = 'completed'") == 30)
        let coupon = try await world.get("SALE")
        #expect(coupon.redeemedCount == 30 && coupon.overCapCount == 25)
        #expect(try await notices(world).count == 30)
        // The cap filled with no reservation waiting for Apple: the offer goes off, once.
        #expect(try await world.outbox(StoreSwitchCommand.self).map(\.reason) == [.capReached])
        // The CHECK is the database's: the counter can't be pushed past the cap.
        await #expect(throws: PGError.self) {
            try await world.pool.query("UPDATE coupons.coupons SET used_count = used_count + 1")
        }
    }
}
