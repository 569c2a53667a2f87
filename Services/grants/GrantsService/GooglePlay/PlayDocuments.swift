import Core
import Foundation

// The Google Play Developer API's documents Redeem reads and writes (androidpublisher v3), in
// Google's field names.

/// Google's `Money`: a currency, whole units as a string, and nanos (10⁻⁹ units).
struct PlayMoney: Codable, Sendable, Equatable {
    var currencyCode: String
    var units: String?
    var nanos: Int?

    init(currencyCode: String, units: String?, nanos: Int?) {
        self.currencyCode = currencyCode
        self.units = units
        self.nanos = nanos
    }

    /// A coupon's amount ("4.99") as Google's money; nil unless it is a decimal with at most 9 places.
    init?(_ money: Money) {
        let parts = money.amount.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let whole = Int(parts[0]), whole >= 0,
              parts.count == 1 || (1...9).contains(parts[1].count) && parts[1].allSatisfy(\.isNumber) else { return nil }
        let fraction = parts.count == 2 ? String(parts[1]) : ""
        self.init(currencyCode: money.currency.uppercased(), units: String(whole),
                  nanos: fraction.isEmpty ? nil : Int(fraction.padding(toLength: 9, withPad: "0", startingAt: 0)))
    }

    /// The amount in milliunits (9.99 is 9990), as store purchases record it.
    var milliunits: Int64 { (Int64(units ?? "0") ?? 0) * 1000 + Int64((nanos ?? 0) / 1_000_000) }
}

/// A `SubscriptionOffer` as Google answers it: the fields Redeem reads.
struct PlayOffer: Decodable, Sendable, Equatable {
    /// A phase's price in one region (`RegionalSubscriptionOfferPhaseConfig`): exactly one of a
    /// price, a share off (`relativeDiscount`, 0.25 is 25 % off), an amount off, or free.
    struct RegionalConfig: Decodable, Sendable, Equatable {
        struct Free: Decodable, Sendable, Equatable {}
        var regionCode: String
        var price: PlayMoney?
        var relativeDiscount: Double?
        var absoluteDiscount: PlayMoney?
        var free: Free?
    }
    /// `SubscriptionOfferPhase`: the fields Redeem reads.
    struct Phase: Decodable, Sendable, Equatable {
        var recurrenceCount: Int?
        var duration: String?
        var regionalConfigs: [RegionalConfig]?
    }
    var productId: String
    var basePlanId: String
    var offerId: String
    /// `DRAFT`, `ACTIVE` or `INACTIVE`.
    var state: String?
    var phases: [Phase]?
}

/// One base plan of a subscription (`Subscription.basePlans[]`), with its price per region.
struct PlayBasePlan: Sendable, Equatable {
    var basePlanId: String
    var state: String?
    /// Region code → the base plan's price there.
    var prices: [String: PlayMoney]
}

/// A subscription purchase (`SubscriptionPurchaseV2`), the fields Redeem reads.
struct PlaySubscriptionPurchase: Decodable, Sendable, Equatable {
    struct LineItem: Decodable, Sendable, Equatable {
        struct OfferDetails: Decodable, Sendable, Equatable {
            var basePlanId: String?
            var offerId: String?
            var offerTags: [String]?
        }
        struct AutoRenewingPlan: Decodable, Sendable, Equatable {
            var recurringPrice: PlayMoney?
        }
        /// Which pricing phase the line item is in (`OfferPhase`): exactly one of these, each an
        /// empty object; Google reports no price for it.
        struct OfferPhase: Decodable, Sendable, Equatable {
            struct Marker: Decodable, Sendable, Equatable {}
            var basePrice: Marker?
            var freeTrial: Marker?
            var introductoryPrice: Marker?
            var prorationPeriod: Marker?
        }
        var productId: String
        var expiryTime: String?
        var offerDetails: OfferDetails?
        var autoRenewingPlan: AutoRenewingPlan?
        var offerPhase: OfferPhase?
    }
    struct ExternalAccountIdentifiers: Decodable, Sendable, Equatable {
        var obfuscatedExternalAccountId: String?
    }
    /// Present, as an empty object, only for a test purchase.
    struct TestPurchase: Decodable, Sendable, Equatable {}

    var lineItems: [LineItem]
    var subscriptionState: String?
    var acknowledgementState: String?
    var testPurchase: TestPurchase?
    var linkedPurchaseToken: String?
    var externalAccountIdentifiers: ExternalAccountIdentifiers?
    var regionCode: String?
    var startTime: String?

    var isAcknowledged: Bool { acknowledgementState == "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED" }
}

/// Google's error document: `{"error": {code, message, status}}`.
struct PlayError: Decodable {
    struct Body: Decodable { var code: Int?; var message: String?; var status: String? }
    var error: Body

    static func message(_ body: Data, status: Int) -> String {
        let parsed = try? JSONDecoder().decode(PlayError.self, from: body)
        return parsed?.error.message.map { String($0.prefix(500)) } ?? "Google Play refused the request (\(status))"
    }
}
