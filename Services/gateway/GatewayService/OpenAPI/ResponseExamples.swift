import Core
import Foundation

/// A response body type with sample values: `/openapi.json` shows them as the `example` (one) or
/// `examples` (several, by name) of its JSON answers. A sample is a value of the type, encoded as
/// every answer is (`JSONEncoder.wire()`), so an example cannot drift from what the gateway sends;
/// the clients' contract tests decode them.
protocol APIExampled: Encodable {
    /// Named samples, the most usual first.
    static var examples: [(name: String, value: Self)] { get }
}

/// Fixed values the samples share, so the document is the same on every start.
enum ExampleValues {
    static let accountId = UUID(uuidString: "6F9619FF-8B86-D011-B42D-00C04FC964FF")!
    static let redemptionId = UUID(uuidString: "0E8D5C1A-3F4B-4E2A-9C7D-1B2A3C4D5E6F")!
    static let createdAt = Date(timeIntervalSince1970: 1_767_225_600)
    static let reservedAt = Date(timeIntervalSince1970: 1_775_001_600)
    static let completedAt = reservedAt.addingTimeInterval(1.25)
    static let expiresAt = Date(timeIntervalSince1970: 1_777_593_600)
    static let appUserId = "9b2e4c1d-7a35-4f60-8e21-3c5d6a7b8c90"
    static let coupon = PublicCoupon(
        code: "SPRING-25", kind: .freePeriod, percentOff: nil, amountOff: nil,
        duration: CouponDuration(unit: "month", count: 1), periodCount: nil, entitlementId: "pro")
    static let discount = PublicCoupon(
        code: "SAVE-30", kind: .percentOff, percentOff: 30, amountOff: nil,
        duration: CouponDuration(unit: "month", count: 1), periodCount: 3, entitlementId: nil)
    static let offer = StoreOfferTerms(
        kind: .percentOff, percentOff: 30, amountOff: nil, duration: CouponDuration(unit: "month", count: 1),
        periodCount: 3)
    static let appStore = AppStoreHandoff(
        redemptionUrl: "https://apps.apple.com/redeem?ctx=offercodes&id=1234567890&code=SAVE-30", appAccountToken: nil,
        redemptionUrls: [
            "pro.monthly": "https://apps.apple.com/redeem?ctx=offercodes&id=1234567890&code=SAVE-30",
            "pro.yearly": "https://apps.apple.com/redeem?ctx=offercodes&id=1234567890&code=SAVE-30-2"
        ])
    static let account = AccountView(
        id: accountId, email: "pilot@example.com", emailVerified: true, appUserId: appUserId,
        identities: [AccountView.Identity(type: "email", email: "pilot@example.com")], createdAt: createdAt)
    static let session = SessionTokens(
        accessToken: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJleGFtcGxlIn0.c2lnbmF0dXJl",
        refreshToken: "rt_3q2-7wEXAMPLEnZ8xK1vYbQ", expiresAt: reservedAt)
}

extension Gateway.AuthBody: APIExampled {
    static var examples: [(name: String, value: Self)] {
        [("session", Self(account: ExampleValues.account, session: ExampleValues.session))]
    }
}

extension Gateway.MeBody: APIExampled {
    static var examples: [(name: String, value: Self)] {
        [
            ("account", Self(ExampleValues.account, managementUrl: "https://apps.apple.com/account/subscriptions")),
            (
                "stripeSubscription",
                Self(
                    ExampleValues.account,
                    managementUrl: "https://redeem.example.com/v1/billing-portal/k3f9a1c2b7d4e."
                        + "9mQx2Lr7vT0pWn4sYb8eKc1Hd5Jf3Ga6Uo2Zi9Xl0Rt7Bq4Nw8Ev1My5Cs3Dp6"
                )
            ),
            ("noSubscription", Self(ExampleValues.account, managementUrl: nil))
        ]
    }
}

extension AccountView: APIExampled {
    static var examples: [(name: String, value: Self)] { [("account", ExampleValues.account)] }
}

extension Coupons.Validate.Answer: APIExampled {
    static var examples: [(name: String, value: Self)] {
        var webOnly = Self(valid: false, reason: .webOnly, coupon: ExampleValues.coupon, eligibleProductIds: [])
        webOnly.redeemUrl = "https://redeem.example.com/redeem?code=SPRING-25"
        return [
            ("valid", Self(valid: true, reason: nil, coupon: ExampleValues.coupon, eligibleProductIds: [])),
            ("refused", Self(valid: false, reason: .exhausted, coupon: nil, eligibleProductIds: [])),
            ("webOnly", webOnly),
            (
                "appStore",
                Self(
                    valid: true, reason: nil, coupon: ExampleValues.discount,
                    eligibleProductIds: ["pro.monthly", "pro.yearly"],
                    offer: ExampleValues.offer, appStore: ExampleValues.appStore)
            ),
            (
                "googlePlay",
                Self(
                    valid: true, reason: nil, coupon: ExampleValues.discount, eligibleProductIds: ["pro.monthly"],
                    offer: ExampleValues.offer, basePlanIds: ["pro.monthly": ["monthly", "monthly-prepaid"]],
                    playStore: PlayStoreHandoff(
                        offerId: "redeem-spring25-1a2b3c", offerTags: [PlayStoreHandoff.couponTag]))
            )
        ]
    }
}

extension RedemptionView: APIExampled {
    static var examples: [(name: String, value: Self)] {
        let completed = Self(
            redemptionId: ExampleValues.redemptionId, code: "SPRING-25", status: .completed, platform: .web,
            productId: nil, pricePaid: nil, sandbox: false, reservedAt: ExampleValues.reservedAt,
            completedAt: ExampleValues.completedAt, failureReason: nil,
            entitlement: .init(entitlementId: "pro", expiresAt: ExampleValues.expiresAt),
            accountId: ExampleValues.accountId, appUserId: ExampleValues.appUserId)
        var reserved = Self(
            redemptionId: ExampleValues.redemptionId, code: "SAVE-30", status: .reserved, platform: .ios,
            productId: "pro.yearly", pricePaid: nil, sandbox: false, reservedAt: ExampleValues.reservedAt,
            completedAt: nil, failureReason: nil, entitlement: nil,
            accountId: ExampleValues.accountId, appUserId: ExampleValues.appUserId)
        reserved.appStore = AppStoreHandoff(
            redemptionUrl: "https://apps.apple.com/redeem?ctx=offercodes&id=1234567890&code=SAVE-30-2",
            appAccountToken: UUID(uuidString: "8C4B2A10-5D6E-8F70-8123-456789ABCDEF")!)
        var gift = completed
        gift.code = "GIFTS-2026"
        gift.uniqueCodeLast4 = "W9PA"
        var checkout = reserved
        checkout.platform = .web
        checkout.appStore = nil
        checkout.stripe = StripeHandoff(checkoutUrl: "https://checkout.stripe.com/c/pay/cs_live_a1B2c3D4")
        return [
            ("completed", completed), ("reservedForTheAppStore", reserved), ("completedWithAUniqueCode", gift),
            ("reservedForStripeCheckout", checkout)
        ]
    }
}

extension Page: APIExampled where Item: APIExampled {
    static var examples: [(name: String, value: Self)] {
        [("page", Self(data: Item.examples.map(\.value), nextCursor: nil))]
    }
}

extension Grants.Entitlements.Response: APIExampled {
    static var examples: [(name: String, value: Self)] {
        let pro = EntitlementView(
            entitlementId: "pro", expiresAt: ExampleValues.expiresAt, sandbox: false,
            source: "local")
        return [("active", Self(data: [pro]))]
    }
}

extension Gateway.CustomerBody: APIExampled {
    static var examples: [(name: String, value: Self)] {
        let redemptions = RedemptionView.examples.map(\.value).filter { $0.status == .completed }
        let entitlements = Grants.Entitlements.Response.examples[0].value
        return [
            (
                "customer",
                Self(
                    ExampleValues.account, redemptions: Page(data: redemptions, nextCursor: nil),
                    entitlements: entitlements)
            )
        ]
    }
}

extension Accounts.LinkCloudKit.Response: APIExampled {
    static var examples: [(name: String, value: Self)] {
        [
            (
                "changed",
                Self(
                    appUserId: "_a1b2c3d4e5f60718293a4b5c6d7e8f90", changed: true,
                    previousAppUserId: ExampleValues.appUserId)
            )
        ]
    }
}

extension OpenAPI.MediaType {
    /// A JSON answer's media type: its schema, and the samples of a type that has them.
    static func json(_ type: any APIBody.Type, schema: JSONSchema, catalog: SchemaCatalog) throws -> Self {
        guard let exampled = type as? any APIExampled.Type else {
            let sample = SchemaSample.value(schema, schemas: catalog.schemas)
            return Self(schema: schema, example: sample, exampleFromSchema: true)
        }
        let samples = try exampled.encodedExamples()
        if samples.count == 1 { return Self(schema: schema, example: samples[0].value) }
        let named = samples.map { ($0.name, OpenAPI.Example(value: $0.value)) }
        return Self(schema: schema, examples: Dictionary(uniqueKeysWithValues: named))
    }
}

extension APIExampled {
    /// The samples as the gateway would send them.
    static func encodedExamples() throws -> [(name: String, value: JSONValue)] {
        try examples.map { ($0.name, try JSONValue.of($0.value)) }
    }
}

extension RedemptionExport: APIExampled {
    static var examples: [(name: String, value: Self)] {
        [
            (
                "export",
                Self(
                    code: "SUMMER-2026", count: 312,
                    downloadUrl: "https://redeem.example.com/v1/redemption-downloads/"
                        + "9Xk2-pEXAMPLEqL4vR7wZc1Xk2-pEXAMPLEqL4vR7w",
                    expiresAt: ExampleValues.expiresAt)
            )
        ]
    }
}

extension CodesCreated: APIExampled {
    static var examples: [(name: String, value: Self)] {
        [
            (
                "codes",
                Self(
                    code: "GIFTS-2026", count: 1000, prefix: "GIFT",
                    csvUrl: "https://redeem.example.com/v1/coupons/GIFTS-2026/codes.csv",
                    downloadUrl: "https://redeem.example.com/v1/code-downloads/"
                        + "3q2-7wEXAMPLEnZ8xK1vYbQ3q2-7wEXAMPLEnZ8xK1v",
                    expiresAt: ExampleValues.expiresAt)
            )
        ]
    }
}
