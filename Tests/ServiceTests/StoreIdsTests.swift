import Foundation
import Testing

@testable import Core
@testable import CouponsService

/// The values coupons derives for stores (`StoreIds`), and the JSON the store fields add: each
/// present only where it means something, so the shapes clients already read are unchanged.
@Suite struct StoreIdsTests {
    let coupon = UUID(parsing: "0192f5a4-7b1c-7d3e-9a4b-1c2d3e4f5a6b")!
    let account = UUID(parsing: "6f9c2a0e-1b7d-4a53-9b7e-2d1c1f0a9e11")!

    @Test func derivedValuesAreStableAndDistinct() {
        let name = StoreIds.offerName(coupon: coupon, store: .appStore, productId: "pro.monthly")
        #expect(name == StoreIds.offerName(coupon: coupon, store: .appStore, productId: "pro.monthly"))
        #expect(name.hasPrefix("redeem-") && name.count == 31)
        #expect(name != StoreIds.offerName(coupon: coupon, store: .appStore, productId: "pro.yearly"))
        #expect(name != StoreIds.offerName(coupon: UUID.random(), store: .appStore, productId: "pro.monthly"))
        let provision = StoreIds.command(
            StoreProvisionCommand.type, coupon: coupon, store: .appStore, productId: "pro.monthly")
        #expect(
            provision
                == StoreIds.command(
                    StoreProvisionCommand.type, coupon: coupon, store: .appStore, productId: "pro.monthly"))
        #expect(
            provision
                != StoreIds.command(StoreSwitchCommand.type, coupon: coupon, store: .appStore, productId: "pro.monthly")
        )
        let token = StoreIds.appAccountToken(account: account)
        #expect(
            token == StoreIds.appAccountToken(account: account)
                && token != StoreIds.appAccountToken(account: UUID.random()))
        // Version 8, RFC 9562 variant: a UUID StoreKit takes as it is.
        let text = token.lowercasedString
        #expect(Array(text)[14] == "8" && "89ab".contains(Array(text)[19]))
    }

    @Test func theOfferCodePageCarriesTheAppAndTheCode() {
        #expect(
            AppStoreHandoff.redemptionURL(appId: "1234567890", code: "SPRING-30")
                == "https://apps.apple.com/redeem?ctx=offercodes&id=1234567890&code=SPRING-30")
        #expect(
            StoreSettings(appStoreConnected: false, appleAppId: nil, offerSettle: 3600).redemptionURL(code: "X") == nil)
    }

    /// Apple takes a custom code once per app: the first plan by product id keeps the coupon's
    /// code, the others get a suffix in product id order, whatever order the coupon lists them in.
    @Test func eachAppStorePlanHasItsOwnCodeAndTheFirstKeepsTheCoupons() {
        let codes = AppStoreCodes.byProduct(code: "SPRING25", productIds: ["pro.yearly", "pro.monthly", "pro.weekly"])
        #expect(codes == ["pro.monthly": "SPRING25", "pro.weekly": "SPRING25-2", "pro.yearly": "SPRING25-3"])
        #expect(AppStoreCodes.byProduct(code: "ONE", productIds: ["pro.monthly"]) == ["pro.monthly": "ONE"])
        #expect(
            AppStoreCodes.longestCode(plans: 1) == 64 && AppStoreCodes.longestCode(plans: 9) == 62
                && AppStoreCodes.longestCode(plans: 10) == 61)
        // Validate hands each ready plan's page, and the first plan's as the default.
        let settings = StoreSettings(appStoreConnected: true, appleAppId: "1234567890", offerSettle: 3600)
        let handoff = settings.appStoreHandoff(
            codes: ["pro.yearly": "SPRING25-3", "pro.monthly": "SPRING25"], coupon: "SPRING25")
        #expect(handoff?.redemptionUrl == "https://apps.apple.com/redeem?ctx=offercodes&id=1234567890&code=SPRING25")
        #expect(
            handoff?.redemptionUrls?["pro.yearly"]
                == "https://apps.apple.com/redeem?ctx=offercodes&id=1234567890&code=SPRING25-3")
        // Redeem sends a plan's client to its own code; without a plan, the first ready plan's.
        let offers = StoreOffers.Ready(
            plans: [.appStore: ["pro.yearly": [""]]],
            appStoreCodes: ["pro.monthly": "SPRING25", "pro.yearly": "SPRING25-3"])
        #expect(StoreOffers.appStoreCode(offers, plan: "pro.monthly", coupon: "SPRING25") == "SPRING25")
        #expect(StoreOffers.appStoreCode(offers, plan: nil, coupon: "SPRING25") == "SPRING25-3")
        #expect(StoreOffers.appStoreCode(StoreOffers.Ready(), plan: nil, coupon: "SPRING25") == "SPRING25")
    }

    @Test func settingsAreReadFromTheEnvironmentAndRefusedWhenIncomplete() throws {
        let none = try StoreSettings(env: .init([:]))
        #expect(!none.appStoreConnected && none.appleAppId == nil && none.offerSettle == 3600)
        let connected = try StoreSettings(
            env: .init([
                "REDEEM_ASC_KEY_ID": "ABC123", "REDEEM_APPLE_APP_ID": "1234567890", "REDEEM_APPLE_OFFER_SETTLE": "0"
            ]))
        #expect(connected.appStoreConnected && connected.appleAppId == "1234567890" && connected.offerSettle == 0)
        #expect(throws: ConfigError.self) { try StoreSettings(env: .init(["REDEEM_ASC_KEY_ID": "ABC123"])) }
        #expect(throws: ConfigError.self) { try StoreSettings(env: .init(["REDEEM_APPLE_APP_ID": "com.example.app"])) }
        #expect(throws: ConfigError.self) { try StoreSettings(env: .init(["REDEEM_APPLE_OFFER_SETTLE": "-1"])) }
    }

    @Test func storeFieldsAppearOnlyWhereTheyMeanSomething() throws {
        func keys(_ value: some Encodable) throws -> Set<String> {
            Set(
                (try JSONSerialization.jsonObject(with: JSONEncoder.wire().encode(value)) as? [String: Any] ?? [:]).keys
            )
        }
        let answer = Coupons.Validate.Answer(valid: true, reason: nil, coupon: nil, eligibleProductIds: [])
        #expect(try keys(answer) == ["valid", "eligibleProductIds"])
        var ios = answer
        ios.offer = StoreOfferTerms(
            kind: .percentOff, percentOff: 30, amountOff: nil, duration: .init(unit: "month", count: 1), periodCount: 3)
        ios.appStore = AppStoreHandoff(redemptionUrl: "https://apps.apple.com/redeem", appAccountToken: nil)
        #expect(try keys(ios) == ["valid", "eligibleProductIds", "offer", "appStore"])
        #expect(try keys(ios.appStore!) == ["redemptionUrl"])
        let r = RedemptionView(
            redemptionId: UUID.random(), code: "X", status: .reserved, platform: .ios, productId: nil, pricePaid: nil,
            sandbox: false,
            reservedAt: Date(timeIntervalSince1970: 1_800_000_000), completedAt: nil, failureReason: nil,
            entitlement: nil, accountId: account, appUserId: "u")
        #expect(
            try keys(r) == [
                "redemptionId", "code", "status", "platform", "productId", "pricePaid", "sandbox", "reservedAt",
                "accountId", "appUserId"
            ])
        // Read back by a caller that knows these fields (the gateway decodes and re-encodes).
        var handed = r
        handed.appStore = AppStoreHandoff(redemptionUrl: "https://apps.apple.com/redeem", appAccountToken: account)
        #expect(try JSONDecoder.wire().decode(RedemptionView.self, from: JSONEncoder.wire().encode(handed)) == handed)
    }
}
