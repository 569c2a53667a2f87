/// Where an end user redeems a code (validate's and redeem's `platform`). A closed set: adding
/// one is a compile error wherever platforms are told apart.
public enum Platform: String, Codable, Sendable, CaseIterable {
    case ios, android, web

    /// `ios, android or web`, for messages about a value that is none of them.
    public static let listed = allCases.map(\.rawValue).dropLast().joined(separator: ", ") + " or " + allCases.last!.rawValue
}

/// What a coupon gives.
public enum CouponKind: String, Codable, Sendable, CaseIterable {
    /// An entitlement for a duration, granted by Redeem.
    case freePeriod
    /// Discounts, charged by the store.
    case percentOff, amountOff

    public var isDiscount: Bool {
        switch self {
        case .freePeriod: false
        case .percentOff, .amountOff: true
        }
    }
}
