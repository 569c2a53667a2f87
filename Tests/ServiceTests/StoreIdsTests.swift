import Foundation
import Testing
@testable import CouponsService
@testable import Core

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
        let provision = StoreIds.command(StoreProvisionCommand.type, coupon: coupon, store: .appStore, productId: "pro.monthly")
        #expect(provision == StoreIds.command(StoreProvisionCommand.type, coupon: coupon, store: .appStore, productId: "pro.monthly"))
        #expect(provision != StoreIds.command(StoreSwitchCommand.type, coupon: coupon, store: .appStore, productId: "pro.monthly"))
        let token = StoreIds.appAccountToken(account: account)
        #expect(token == StoreIds.appAccountToken(account: account) && token != StoreIds.appAccountToken(account: UUID.random()))
        // Version 8, RFC 9562 variant: a UUID StoreKit takes as it is.
        let text = token.lowercasedString
        #expect(Array(text)[14] == "8" && "89ab".contains(Array(text)[19]))
    }

    @Test func theOfferCodePageCarriesTheAppAndTheCode() {
        #expect(AppStoreHandoff.redemptionURL(appId: "1234567890", code: "SPRING-30")
            == "https://apps.apple.com/redeem?ctx=offercodes&id=1234567890&code=SPRING-30")
        #expect(StoreSettings(appStoreConnected: false, appleAppId: nil, offerSettle: 3600).redemptionURL(code: "X") == nil)
    }

    @Test func settingsAreReadFromTheEnvironmentAndRefusedWhenIncomplete() throws {
        let none = try StoreSettings(env: .init([:]))
        #expect(!none.appStoreConnected && none.appleAppId == nil && none.offerSettle == 3600)
        let connected = try StoreSettings(env: .init(["REDEEM_ASC_KEY_ID": "ABC123", "REDEEM_APPLE_APP_ID": "1234567890", "REDEEM_APPLE_OFFER_SETTLE": "0"]))
        #expect(connected.appStoreConnected && connected.appleAppId == "1234567890" && connected.offerSettle == 0)
        #expect(throws: ConfigError.self) { try StoreSettings(env: .init(["REDEEM_ASC_KEY_ID": "ABC123"])) }
        #expect(throws: ConfigError.self) { try StoreSettings(env: .init(["REDEEM_APPLE_APP_ID": "com.example.app"])) }
        #expect(throws: ConfigError.self) { try StoreSettings(env: .init(["REDEEM_APPLE_OFFER_SETTLE": "-1"])) }
    }

    @Test func storeFieldsAppearOnlyWhereTheyMeanSomething() throws {
        func keys(_ value: some Encodable) throws -> Set<String> {
            Set((try JSONSerialization.jsonObject(with: JSONEncoder.wire().encode(value)) as? [String: Any] ?? [:]).keys)
        }
        let answer = Coupons.Validate.Answer(valid: true, reason: nil, coupon: nil, eligibleProductIds: [])
        #expect(try keys(answer) == ["valid", "eligibleProductIds"])
        var ios = answer
        ios.offer = StoreOfferTerms(kind: .percentOff, percentOff: 30, amountOff: nil, duration: .init(unit: "month", count: 1), periodCount: 3)
        ios.appStore = AppStoreHandoff(redemptionUrl: "https://apps.apple.com/redeem", appAccountToken: nil)
        #expect(try keys(ios) == ["valid", "eligibleProductIds", "offer", "appStore"])
        #expect(try keys(ios.appStore!) == ["redemptionUrl"])
        let r = RedemptionView(redemptionId: UUID.random(), code: "X", status: .reserved, platform: .ios, productId: nil, pricePaid: nil, sandbox: false,
                               reservedAt: Date(timeIntervalSince1970: 1_800_000_000), completedAt: nil, failureReason: nil, entitlement: nil, accountId: account, appUserId: "u")
        #expect(try keys(r) == ["redemptionId", "code", "status", "platform", "productId", "pricePaid", "sandbox", "reservedAt", "accountId", "appUserId"])
        // Read back by a caller that knows these fields (the gateway decodes and re-encodes).
        var handed = r
        handed.appStore = AppStoreHandoff(redemptionUrl: "https://apps.apple.com/redeem", appAccountToken: account)
        #expect(try JSONDecoder.wire().decode(RedemptionView.self, from: JSONEncoder.wire().encode(handed)) == handed)
    }
}
