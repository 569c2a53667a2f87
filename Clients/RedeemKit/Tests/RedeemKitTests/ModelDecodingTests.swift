import Foundation
import RedeemKit
import Testing

/// Every model decodes from the JSON the gateway writes (shapes of docs/api.md, times
/// with milliseconds), including the fields only some answers carry.
@Suite struct ModelDecodingTests {
    /// Decoded through a client, the way the app gets them.
    static func decode<T: Decodable>(_ type: T.Type, _ json: String) throws -> T {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { d in
            let text = try d.singleValueContainer().decode(String.self)
            return try Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text)
        }
        return try decoder.decode(type, from: Data(json.utf8))
    }

    static let time = try! Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse("2026-05-01T12:00:00.125Z")

    @Test func sessionModels() throws {
        let auth = try Self.decode(AuthResult.self, Fixture.auth(access: "a", refresh: "r"))
        #expect(auth.session.accessToken == "a")
        #expect(auth.account.identities == [Identity(type: "email", email: "pilot@example.com"), Identity(type: "cloudkit", recordName: "_abc123")])
        #expect(auth.account.createdAt == (try Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse("2026-05-01T12:00:00.000Z")))
        #expect(try Self.decode(CloudKitLink.self, #"{"appUserId":"_abc123"}"#).appUserId == "_abc123")
        let apple = try Self.decode(Account.self, #"{"id":"\#(Fixture.accountId)","appUserId":"f0e1","identities":[{"type":"apple"}],"createdAt":"2026-05-01T12:00:00.125Z"}"#)
        #expect(apple.email == nil)
    }

    @Test func validation() throws {
        let free = try Self.decode(CouponValidation.self, #"""
        {"valid":true,"coupon":{"code":"SPRING-25","kind":"freePeriod","duration":{"unit":"month","count":1},"entitlementId":"pro"},"eligibleProductIds":[]}
        """#)
        #expect(free.valid && free.reason == nil && free.coupon?.kind == .freePeriod && free.coupon?.duration == CouponDuration(unit: "month", count: 1))
        let discount = try Self.decode(CouponValidation.self, #"""
        {"valid":true,"coupon":{"code":"HALF","kind":"percentOff","percentOff":50,"duration":{"unit":"month","count":1},"periodCount":3},
         "eligibleProductIds":["pro.monthly"],"offer":{"kind":"percentOff","percentOff":50,"duration":{"unit":"month","count":1},"periodCount":3},
         "appStore":{"redemptionUrl":"https://apps.apple.com/redeem?ctx=offercodes&id=123&code=HALF"}}
        """#)
        #expect(discount.offer?.periodCount == 3)
        #expect(discount.appStore?.redemptionUrl.absoluteString == "https://apps.apple.com/redeem?ctx=offercodes&id=123&code=HALF")
        #expect(discount.appStore?.appAccountToken == nil)
        let amount = try Self.decode(PublicCoupon.self, #"{"code":"FIVE","kind":"amountOff","amountOff":{"amount":"4.99","currency":"EUR"},"duration":{"unit":"year","count":1},"periodCount":1}"#)
        #expect(amount.amountOff == Money(amount: "4.99", currency: "EUR"))
        for reason in CouponError.Reason.allCases where reason != .unknown && reason != .notIdentified {
            let refused = try Self.decode(CouponValidation.self, #"{"valid":false,"reason":"\#(reason.rawValue)","eligibleProductIds":[]}"#)
            #expect(refused.reason == reason)
        }
        #expect(try Self.decode(CouponValidation.self, #"{"valid":false,"reason":"someNewReason","eligibleProductIds":[]}"#).reason == .unknown)
    }

    /// The seed's coupon shape: Play's base plans per product, each plan's own offer-code page,
    /// and `webOnly` with the redeem page; today's server, without them, still decodes.
    @Test func theSeedsCouponShape() throws {
        let play = try Self.decode(CouponValidation.self, #"""
        {"valid":true,"eligibleProductIds":["pro","max"],"basePlanIds":{"pro":["monthly","yearly"],"max":["monthly"]},
         "playStore":{"offerId":"redeem-half","offerTags":["redeem-coupon"]}}
        """#)
        #expect(play.basePlanIds(for: "pro") == ["monthly", "yearly"] && play.basePlanIds(for: "other") == [])
        let ios = try Self.decode(CouponValidation.self, #"""
        {"valid":true,"eligibleProductIds":["a","b"],"appStore":{"redemptionUrl":"https://apps.apple.com/redeem?ctx=offercodes&id=1&code=HALF",
         "redemptionUrls":{"a":"https://apps.apple.com/redeem?ctx=offercodes&id=1&code=HALF","b":"https://apps.apple.com/redeem?ctx=offercodes&id=1&code=HALF-2"}}}
        """#)
        #expect(ios.appStore?.redemptionUrl(for: "b").absoluteString.hasSuffix("code=HALF-2") == true)
        #expect(ios.appStore?.redemptionUrl(for: "c").absoluteString.hasSuffix("code=HALF") == true)
        #expect(ios.appStore?.redemptionUrl(for: nil).absoluteString.hasSuffix("code=HALF") == true)
        let webOnly = try Self.decode(CouponValidation.self, #"""
        {"valid":false,"reason":"webOnly","redeemUrl":"https://redeem.example.com/redeem?code=FREEYEAR","eligibleProductIds":[]}
        """#)
        #expect(webOnly.reason == .webOnly)
        #expect(webOnly.error?.redeemUrl == URL(string: "https://redeem.example.com/redeem?code=FREEYEAR"))
        let sentence = "This coupon is redeemed on the web: open its page to redeem it."
        #expect(webOnly.error?.localizedDescription == sentence)
        let today = try Self.decode(
            CouponValidation.self, #"{"valid":false,"reason":"webOnly","eligibleProductIds":[]}"#)
        #expect(today.reason == .webOnly && today.redeemUrl == nil && today.basePlanIds == nil)
        let me = try Self.decode(Account.self, #"""
        {"id":"\#(Fixture.accountId)","appUserId":"f0e1","identities":[],"createdAt":"2026-05-01T12:00:00.125Z","emailVerified":false,
         "managementUrl":"https://play.google.com/store/account/subscriptions"}
        """#)
        #expect(me.managementUrl?.host == "play.google.com" && me.emailVerified == false)
        #expect(try Self.decode(Account.self, Fixture.account()).managementUrl == nil)
    }

    @Test func redemptions() throws {
        let token = UUID()
        let r = try Self.decode(Redemption.self, #"""
        {"redemptionId":"0a6d4a4e-1b7c-4c43-9a55-6f1f6d1a2b3c","code":"HALF","status":"completed","platform":"ios","productId":"pro.monthly",
         "pricePaid":{"amount":"2.49","currency":"EUR"},"sandbox":true,"reservedAt":"2026-05-01T12:00:00.125Z","completedAt":"2026-05-01T12:01:00.000Z",
         "accountId":"\#(Fixture.accountId)","appUserId":"_abc123",
         "appStore":{"redemptionUrl":"https://apps.apple.com/redeem?ctx=offercodes&id=123&code=HALF","appAccountToken":"\#(token.uuidString.lowercased())"}}
        """#)
        #expect(r.status == .completed && r.status.isSettled)
        #expect(r.reservedAt == Self.time)
        #expect(r.pricePaid?.amount == "2.49" && r.appStore?.appAccountToken == token && r.sandbox)
        let play = try Self.decode(Redemption.self, #"""
        {"redemptionId":"0a6d4a4e-1b7c-4c43-9a55-6f1f6d1a2b3c","code":"HALF","status":"reserved","platform":"android","sandbox":false,
         "reservedAt":"2026-05-01T12:00:00.125Z","playStore":{"obfuscatedAccountId":"acc-123"}}
        """#)
        #expect(play.playStore?.obfuscatedAccountId == "acc-123" && !play.status.isSettled)
        for status in RedemptionStatus.allCases where status != .unknown {
            #expect(try Self.decode(Redemption.self, Fixture.redemption(UUID(), status: status.rawValue)).status == status)
        }
        let page = try Self.decode(Page<Redemption>.self, #"{"data":[\#(Fixture.redemption(UUID(), status: "granting"))],"nextCursor":null}"#)
        #expect(page.data.count == 1 && page.nextCursor == nil)
    }

    @Test func entitlements() throws {
        let page = try Self.decode(Page<Entitlement>.self, Fixture.entitlements + "")
        #expect(page.data.first?.source == "redeem" && page.data.first?.isActive() == true)
    }

    @Test func operatorCoupons() throws {
        let page = try Self.decode(Page<Coupon>.self, #"""
        {"data":[{"code":"HALF","kind":"percentOff","percentOff":50,"duration":{"unit":"month","count":1},"periodCount":3,"productIds":["pro.monthly"],
          "platforms":["ios"],"expiresAt":"2026-09-01T00:00:00.000Z","maxRedemptions":100,"newCustomersOnly":false,"active":true,"mode":"live",
          "redeemedCount":3,"reservedCount":1,"remaining":96,"createdAt":"2026-05-01T12:00:00.125Z",
          "storeLimits":[{"store":"appStore","limit":"maxRedemptions","value":25000}],
          "storeOffers":[{"store":"appStore","productId":"pro.monthly","state":"failed","message":"Apple said no"}],"overCapCount":1},
         {"code":"FREE","kind":"freePeriod","duration":{"unit":"day","count":7},"entitlementId":"all","productIds":[],"platforms":["android","ios","web"],
          "newCustomersOnly":true,"active":false,"mode":"test","redeemedCount":0,"reservedCount":0,"createdAt":"2026-05-01T12:00:00.125Z","storeLimits":[]}],
         "nextCursor":"abc"}
        """#)
        #expect(page.nextCursor == "abc")
        #expect(page.data[0].storeLimits.first?.value == 25000 && page.data[0].storeOffers?.first?.message == "Apple said no")
        #expect(page.data[1].remaining == nil && page.data[1].mode == .test && page.data[1].platforms == [.android, .ios, .web])
    }

    @Test func keysWebhooksAndPlans() throws {
        let created = try Self.decode(CreatedAPIKey.self, #"{"id":"\#(Fixture.accountId)","prefix":"sk_test_ab","name":"ci","role":"readonly","mode":"test","createdAt":"2026-05-01T12:00:00.125Z","lastUsedAt":null,"key":"sk_test_abcdef"}"#)
        #expect(created.key == "sk_test_abcdef" && created.role == .readonly)
        let keys = try Self.decode(Page<APIKey>.self, #"{"data":[{"id":"\#(Fixture.accountId)","prefix":"sk_live_ab","name":"admin","role":"admin","mode":"live","createdAt":"2026-05-01T12:00:00.125Z","lastUsedAt":"2026-05-02T12:00:00.125Z"}],"nextCursor":null}"#)
        #expect(keys.data.first?.lastUsedAt != nil)
        let hook = try Self.decode(CreatedWebhook.self, #"{"id":"\#(Fixture.accountId)","url":"https://example.com/hook","events":["coupon.redeemed"],"active":true,"mode":"live","createdAt":"2026-05-01T12:00:00.125Z","secret":"whsec_abc"}"#)
        #expect(hook.secret == "whsec_abc")
        let hooks = try Self.decode(Page<WebhookEndpoint>.self, #"{"data":[{"id":"\#(Fixture.accountId)","url":"https://example.com/hook","events":["coupon.redeemed","redemption.failed"],"active":false,"mode":"live","createdAt":"2026-05-01T12:00:00.125Z"}],"nextCursor":null}"#)
        #expect(hooks.data.first?.events.count == 2)
        let deliveries = try Self.decode(Page<WebhookDelivery>.self, #"{"data":[{"id":"\#(Fixture.accountId)","webhookId":"msg_1","type":"coupon.redeemed","status":"pending","attempts":2,"lastStatusCode":500,"lastError":"HTTP 500","lastResponse":"oops","createdAt":"2026-05-01T12:00:00.125Z","nextAttemptAt":"2026-05-01T12:05:00.125Z"}],"nextCursor":null}"#)
        #expect(deliveries.data.first?.lastStatusCode == 500)
        let plan = try Self.decode(Plan.self, #"{"productId":"pro.monthly","name":"Pro","appStore":{"subscriptionId":"6450000000"},"playStore":{"productId":"pro","basePlanIds":["monthly"]},"mode":"live","createdAt":"2026-05-01T12:00:00.125Z","updatedAt":"2026-05-01T12:00:00.125Z"}"#)
        #expect(plan.playStore?.basePlanIds == ["monthly"])
    }

    @Test func aPatchSendsRemovedFieldsAsNull() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let text = String(decoding: try encoder.encode(CouponPatch(active: true, maxRedemptions: .remove)), as: UTF8.self)
        #expect(text == #"{"active":true,"maxRedemptions":null}"#)
    }
}
