import Foundation
import Testing
@testable import Core
import Database

/// Redemption statuses, webhook event types and delivery statuses are closed types that travel as
/// the strings they replaced: a message's JSON is what it was with `String` fields, and a value
/// outside the set can't be read.
@Suite struct StatusTermsTests {
    @Test func theWireStringsAreTheContracts() {
        #expect(RedemptionStatus.allCases.map(\.rawValue) == ["reserved", "granting", "completed", "failed", "released"])
        let subscribable = [
            "coupon.redeemed", "redemption.failed", "account.appUserIdChanged", "coupon.exhausted",
            "redemption.released", "storeOffer.ready", "storeOffer.failed",
        ]
        #expect(WebhookEventType.allCases.map(\.rawValue) == subscribable + ["webhook.test"])
        #expect(WebhookEventType.subscribable.map(\.rawValue) == subscribable)
        #expect(WebhookEventType.listed == subscribable.joined(separator: ", "))
        #expect(WebhookDeliveryStatus.allCases.map(\.rawValue) == ["pending", "delivered", "failed"])
    }

    /// A long poll waits while a redemption is reserved or granting, and stops at its end.
    @Test func aRedemptionIsSettledAtItsEnd() {
        #expect(RedemptionStatus.allCases.filter(\.isSettled) == [.completed, .failed, .released])
    }

    /// The same messages with the `String` fields of before.
    struct SettledBefore: Encodable { var redemptionId: UUID; var status: String }
    struct DeliveryBefore: Encodable {
        var id: UUID; var webhookId: String; var type: String; var status: String; var attempts: Int; var lastStatusCode: Int?
        var lastError: String?; var lastResponse: String?; var createdAt: Date; var deliveredAt: Date?; var nextAttemptAt: Date?
    }
    struct EndpointBefore: Encodable { var id: UUID; var url: String; var events: [String]; var active: Bool; var mode: Mode; var createdAt: Date }

    /// What leaves the system (`JSONEncoder.wire()`, sorted keys) is byte for byte the same; a bus
    /// message the same JSON object (the bus encoder's key order is Foundation's own, not fixed).
    func expectSame(_ now: some Encodable, _ before: some Encodable, _ note: String = "") throws {
        let wire = (try JSONEncoder.wire().encode(now), try JSONEncoder.wire().encode(before))
        #expect(wire.0 == wire.1, "\(String(decoding: wire.0, as: UTF8.self)) vs \(String(decoding: wire.1, as: UTF8.self)) \(note)")
        let bus = (try JSONSerialization.jsonObject(with: JSONEncoder.bus.encode(now)) as? NSDictionary,
                   try JSONSerialization.jsonObject(with: JSONEncoder.bus.encode(before)) as? NSDictionary)
        #expect(bus.0 != nil && bus.0 == bus.1, "\(note)")
    }

    @Test func messagesEncodeAsBefore() throws {
        let id = UUID(), at = Date(timeIntervalSince1970: 1_764_483_573.125)
        for status in [RedemptionStatus.completed, .failed] {
            try expectSame(RedemptionsSettled([.init(redemptionId: id, status: status)]),
                           ["redemptions": [SettledBefore(redemptionId: id, status: status.rawValue)]], status.rawValue)
        }
        for (type, status) in [(WebhookEventType.couponRedeemed, WebhookDeliveryStatus.pending), (.redemptionFailed, .delivered), (.couponRedeemed, .failed)] {
            try expectSame(WebhookDeliveryView(id: id, webhookId: "msg_1", type: type, status: status, attempts: 2, lastStatusCode: 500, lastError: "x",
                                               lastResponse: nil, createdAt: at, deliveredAt: nil, nextAttemptAt: at),
                           DeliveryBefore(id: id, webhookId: "msg_1", type: type.rawValue, status: status.rawValue, attempts: 2, lastStatusCode: 500,
                                          lastError: "x", lastResponse: nil, createdAt: at, deliveredAt: nil, nextAttemptAt: at), status.rawValue)
        }
        try expectSame(WebhookEndpointView(id: id, url: "https://example.com/h", events: [.couponRedeemed, .redemptionFailed], active: true,
                                           mode: .test, createdAt: at),
                       EndpointBefore(id: id, url: "https://example.com/h", events: ["coupon.redeemed", "redemption.failed"], active: true,
                                      mode: .test, createdAt: at))
        let view = RedemptionView(redemptionId: id, code: "SPRING-25", status: .released, platform: .ios, productId: nil, pricePaid: nil,
                                  sandbox: false, reservedAt: at, completedAt: nil, failureReason: "purchase not confirmed in time",
                                  entitlement: nil, accountId: id, appUserId: "app-1")
        let text = String(decoding: try JSONEncoder.wire().encode(view), as: UTF8.self)
        #expect(text.contains(#""status":"released""#), "\(text)")
        #expect(try JSONDecoder.bus.decode(RedemptionView.self, from: JSONEncoder.bus.encode(view)) == view)
    }

    @Test func aStatusOutsideTheSetIsNotRead() {
        #expect(throws: DecodingError.self) {
            try JSONDecoder.bus.decode(RedemptionSettled.self, from: Data(#"{"redemptionId":"0190A8C4-5E2B-7C3D-8E4F-123456789ABC","status":"lost"}"#.utf8))
        }
        #expect(RedemptionStatus(pgText: "expired") == nil)
        #expect(WebhookDeliveryStatus(pgText: "delivered") == .delivered)
        #expect(WebhookEventType(pgText: "coupon.redeemed") == .couponRedeemed)
        #expect(WebhookEventType(pgText: "couponRedeemed") == nil, "the wire name, not the case's")
    }
}
