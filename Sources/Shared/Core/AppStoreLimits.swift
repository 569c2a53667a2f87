import Foundation

/// Apple's limits on subscription offer codes (docs/stores.md), in one place: coupons
/// checks them when a coupon is made, and grants checks them again before it asks App Store
/// Connect for anything, so a coupon that breaks one never becomes a call Apple refuses.
public enum AppStoreLimits {
    /// Redemptions of one custom code (its `numberOfCodes`).
    public static let maxRedemptions = 25_000
    /// A code expires at most this many calendar months (UTC) after it is made.
    public static let maxMonthsAhead = 6
    /// Active offer codes per subscription (coupons counts active offer-code coupons per product).
    public static let activeOffersPerSubscription = 10

    /// The latest expiry of a code made at `now`.
    public static func latestExpiry(madeAt now: Date) -> Date {
        var utc = Calendar(identifier: .gregorian)
        utc.timeZone = TimeZone(identifier: "UTC")!
        return utc.date(byAdding: .month, value: maxMonthsAhead, to: now)!
    }

    /// Throws `storeLimit`, naming the field, unless a custom code may be made at `now` with this
    /// cap (its `numberOfCodes`) and expiry.
    public static func checkCode(maxRedemptions: Int?, expiresAt: Date?, now: Date) throws(ServiceError) {
        guard let max = maxRedemptions else {
            throw ServiceError(.storeLimit, "App Store offer codes need maxRedemptions (at most \(self.maxRedemptions))", field: "maxRedemptions")
        }
        guard max <= self.maxRedemptions else {
            throw ServiceError(.storeLimit, "App Store offer codes allow at most \(self.maxRedemptions) redemptions", field: "maxRedemptions")
        }
        guard let expires = expiresAt else {
            throw ServiceError(.storeLimit, "App Store offer codes need an expiresAt at most \(maxMonthsAhead) months out", field: "expiresAt")
        }
        guard expires <= latestExpiry(madeAt: now) else {
            throw ServiceError(.storeLimit, "App Store offer codes expire at most \(maxMonthsAhead) calendar months after they are made",
                               field: "expiresAt")
        }
    }
}

/// The lengths an App Store offer code's period can have (`duration` of a
/// `subscriptionOfferCodes` resource), each with the coupon duration it stands for.
public enum AppStoreOfferDuration: String, Codable, Sendable, CaseIterable {
    case threeDays = "THREE_DAYS", oneWeek = "ONE_WEEK", twoWeeks = "TWO_WEEKS", oneMonth = "ONE_MONTH", twoMonths = "TWO_MONTHS"
    case threeMonths = "THREE_MONTHS", sixMonths = "SIX_MONTHS", oneYear = "ONE_YEAR"

    public var couponDuration: CouponDuration {
        switch self {
        case .threeDays: CouponDuration(unit: "day", count: 3)
        case .oneWeek: CouponDuration(unit: "week", count: 1)
        case .twoWeeks: CouponDuration(unit: "week", count: 2)
        case .oneMonth: CouponDuration(unit: "month", count: 1)
        case .twoMonths: CouponDuration(unit: "month", count: 2)
        case .threeMonths: CouponDuration(unit: "month", count: 3)
        case .sixMonths: CouponDuration(unit: "month", count: 6)
        case .oneYear: CouponDuration(unit: "year", count: 1)
        }
    }

    /// The App Store's duration for a coupon's, or nil when Apple has none that long.
    public init?(_ duration: CouponDuration) {
        guard let match = Self.allCases.first(where: { $0.couponDuration == duration }) else { return nil }
        self = match
    }
}
