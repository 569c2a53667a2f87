import Foundation
import Testing
@testable import GrantsService
@testable import Core

/// RevenueCat's customer as Redeem reads it: which ids hold a store purchase,
/// which entitlements are active and from where, and how they merge with Redeem's own grants.
@Suite struct StoreViewTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// The shape of RevenueCat's `GET /v1/subscribers/{id}` (RevenueCat's REST API v1), trimmed.
    static let customer = Data("""
        {"request_date":"2027-01-15T08:00:00Z","request_date_ms":1800000000000,"subscriber":{
          "original_app_user_id":"u-1","management_url":"https://apps.apple.com/account/subscriptions",
          "entitlements":{
            "pro":{"expires_date":"2027-03-01T00:00:00Z","grace_period_expires_date":null,"product_identifier":"pro_annual","purchase_date":"2026-03-01T00:00:00Z"},
            "old":{"expires_date":"2020-01-01T00:00:00Z","product_identifier":"old_monthly","purchase_date":"2019-12-01T00:00:00Z"},
            "maps":{"expires_date":null,"product_identifier":"maps_lifetime","purchase_date":"2026-01-01T00:00:00Z"},
            "extra":{"expires_date":"2027-02-01T00:00:00Z","product_identifier":"rc_promo_extra_custom","purchase_date":"2027-01-01T00:00:00Z"}
          },
          "subscriptions":{
            "pro_annual":{"store":"app_store","is_sandbox":false,"expires_date":"2027-03-01T00:00:00Z","period_type":"normal"},
            "old_monthly":{"store":"play_store","is_sandbox":true,"expires_date":"2020-01-01T00:00:00Z","period_type":"normal"},
            "rc_promo_extra_custom":{"store":"promotional","is_sandbox":false,"expires_date":"2027-02-01T00:00:00Z"}
          },
          "non_subscriptions":{"maps_lifetime":[{"id":"x","store":"stripe","is_sandbox":false}]},
          "other_purchases":{}, "subscriber_attributes":{}}}
        """.utf8)

    @Test func aCustomerReadsAsItsActiveEntitlementsWithTheStoreBehindEach() throws {
        let s = try RevenueCatSubscriber.decode(Self.customer)
        #expect(s.management_url == "https://apps.apple.com/account/subscriptions")
        #expect(s.holdsStorePurchase)
        let active = s.activeEntitlements(now: Self.now)
        #expect(active.map(\.entitlementId) == ["extra", "maps", "pro"], "expired ones are left out")
        #expect(active.map(\.source) == ["promotional", "stripe", "app_store"])
        #expect(active.first { $0.entitlementId == "maps" }?.expiresAt == RevenueCatSubscriber.lifetime)
        #expect(Timestamp.iso8601(RevenueCatSubscriber.lifetime) == "9999-12-31T23:59:59.999Z")
    }

    @Test func onlyPromotionalGrantsAreNoStorePurchase() throws {
        let promo = RevenueCatSubscriber(subscriptions: ["rc_promo_pro_custom": .init(store: "promotional", is_sandbox: false)])
        #expect(!promo.holdsStorePurchase)
        #expect(!RevenueCatSubscriber().holdsStorePurchase, "a customer RevenueCat just made")
        let expiredPlay = RevenueCatSubscriber(subscriptions: ["pro": .init(store: "play_store", is_sandbox: false)])
        #expect(expiredPlay.holdsStorePurchase, "a purchase sits under the id even when it has run out")
        let oneTime = RevenueCatSubscriber(non_subscriptions: ["tip": [.init(store: "app_store", is_sandbox: false)]])
        #expect(oneTime.holdsStorePurchase)
        // A body that is not a customer is not read as an empty one.
        #expect(throws: (any Error).self) { try RevenueCatSubscriber.decode(Data(#"{"message":"no"}"#.utf8)) }
    }

    @Test func redeemsOwnPromotionalGrantIsListedOnceAndTheStoresBesideIt() {
        let end = Self.now.addingTimeInterval(86400 * 30)
        let ledger = [EntitlementView(entitlementId: "pro", expiresAt: end, sandbox: false, source: "revenuecat")]
        let store = [
            EntitlementView(entitlementId: "pro", expiresAt: end, sandbox: false, source: "promotional"),
            EntitlementView(entitlementId: "pro", expiresAt: end.addingTimeInterval(86400 * 300), sandbox: false, source: "app_store"),
            EntitlementView(entitlementId: "maps", expiresAt: RevenueCatSubscriber.lifetime, sandbox: false, source: "stripe"),
            // Another promotional grant, longer than Redeem's: not Redeem's, so it stays.
            EntitlementView(entitlementId: "gift", expiresAt: end, sandbox: false, source: "promotional"),
        ]
        let merged = StoreViews.merge(ledger: ledger, store: store)
        #expect(merged.map { "\($0.entitlementId)/\($0.source)" } == ["gift/promotional", "maps/stripe", "pro/app_store", "pro/revenuecat"])
    }

    /// A read that outlasts its time is given up, and left to end on its own: cancelling a task
    /// inside FoundationNetworking's `URLSession.data(for:)` can deadlock it, and with it every
    /// concurrency thread of grants.
    @Test func aSlowReadIsGivenUpAfterItsTimeAndNotCancelled() async throws {
        let started = ContinuousClock.now
        let ended = AsyncStream.makeStream(of: Bool.self)
        let answer: Int? = await StoreViews.within(0.2) {
            try? await Task.sleep(for: .seconds(2))
            ended.continuation.yield(Task.isCancelled)
            return 1
        }
        #expect(answer == nil)
        // Well under the work's 2 s would be 0.2 s, which a suite run on two busy cores can't
        // promise; the work's end, below, comes after this answer.
        var late = ended.stream.makeAsyncIterator()
        let cancelled = await late.next()
        #expect(cancelled == false, "the late work ran to its end, uncancelled")
        #expect(ContinuousClock.now - started >= .seconds(2))
        let quick: Int? = await StoreViews.within(2) { 7 }
        #expect(quick == 7)
    }
}
