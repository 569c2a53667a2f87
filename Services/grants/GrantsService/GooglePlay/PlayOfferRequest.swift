import Core
import Foundation

/// A coupon's offer on one base plan as Google Play is to make it (`SubscriptionOffer`,
/// docs/stores.md "Grants and Google's API"): one phase of `periodCount` recurrences of the
/// coupon's duration (one for a free period), in every region of the base plan whose price it can
/// discount, tagged `redeem-coupon`, with no targeting rule (developer-determined eligibility:
/// only an app that asks for the offer's token can buy it, so it never shows as a trial).
struct PlayOfferRequest: Sendable, Equatable {
    enum Discount: Sendable, Equatable {
        /// The share taken off (0.25 is 25 % off), Google's `relativeDiscount`.
        case relative(Double)
        /// The amount taken off each period, `absoluteDiscount`.
        case absolute(PlayMoney)
        case free
    }

    var productId: String
    var basePlanId: String
    var offerId: String
    var recurrenceCount: Int
    /// ISO 8601 (`P1M`).
    var duration: String
    /// Region code → what the offer takes off there.
    var regions: [String: Discount]
    /// Regions of the base plan left out (a price in another currency than an amount off's).
    var omitted: [String]
    var tags: [String] = [PlayDeveloperClient.couponTag]

    /// The offer of `terms` on `basePlan`; throws when no region can have it.
    init(productId: String, offerId: String, terms: StoreOfferTerms, basePlan: PlayBasePlan) throws(OfferPricing.Problem) {
        self.productId = productId
        basePlanId = basePlan.basePlanId
        self.offerId = offerId
        guard let duration = Self.iso8601(terms.duration) else { throw .init(message: "the coupon's duration has no ISO 8601 form") }
        self.duration = duration
        let all = basePlan.prices.keys.sorted()
        guard !all.isEmpty else { throw .init(message: "base plan \(basePlan.basePlanId) of \(productId) has no regions at Google Play") }
        let free = terms.kind == .freePeriod || terms.percentOff == 100
        recurrenceCount = free && terms.kind == .freePeriod ? 1 : max(1, terms.periodCount)
        switch (free, terms.kind) {
        case (true, _):
            regions = Dictionary(uniqueKeysWithValues: all.map { ($0, .free) })
            omitted = []
        case (false, .percentOff):
            guard let p = terms.percentOff, (1...99).contains(p) else { throw .init(message: "percentOff must be from 1 to 99 for a paid offer") }
            regions = Dictionary(uniqueKeysWithValues: all.map { ($0, .relative(Double(p) / 100)) })
            omitted = []
        case (false, .amountOff):
            guard let amount = terms.amountOff, let money = PlayMoney(amount), money.milliunits > 0 || (money.nanos ?? 0) > 0 else {
                throw .init(message: "amountOff must be a positive amount")
            }
            let inCurrency = all.filter { basePlan.prices[$0]?.currencyCode == money.currencyCode }
            guard !inCurrency.isEmpty else {
                throw .init(message: "no region of base plan \(basePlan.basePlanId) of \(productId) is priced in \(money.currencyCode)")
            }
            regions = Dictionary(uniqueKeysWithValues: inCurrency.map { ($0, .absolute(money)) })
            omitted = all.filter { !inCurrency.contains($0) }
        case (false, .freePeriod):
            throw .init(message: "a free period has no price")
        }
    }

    /// A coupon duration in ISO 8601 (`{count: 3, unit: "month"}` is `P3M`).
    static func iso8601(_ d: CouponDuration) -> String? {
        guard d.count > 0, let letter = ["day": "D", "week": "W", "month": "M", "year": "Y"][d.unit] else { return nil }
        return "P\(d.count)\(letter)"
    }

    /// The `SubscriptionOffer` document of `offers.create`.
    func document(packageName: String) -> Data {
        let codes = regions.keys.sorted()
        let configs: [[String: Any]] = codes.map { code in
            var config: [String: Any] = ["regionCode": code]
            switch regions[code]! {
            case .relative(let share): config["relativeDiscount"] = share
            case .absolute(let money):
                var m: [String: Any] = ["currencyCode": money.currencyCode, "units": money.units ?? "0"]
                if let nanos = money.nanos { m["nanos"] = nanos }
                config["absoluteDiscount"] = m
            case .free: config["free"] = [String: Any]()
            }
            return config
        }
        let document: [String: Any] = [
            "packageName": packageName, "productId": productId, "basePlanId": basePlanId, "offerId": offerId,
            "phases": [["recurrenceCount": recurrenceCount, "duration": duration, "regionalConfigs": configs]],
            "regionalConfigs": codes.map { ["regionCode": $0, "newSubscriberAvailability": true] },
            "offerTags": tags.map { ["tag": $0] },
        ]
        return try! JSONSerialization.data(withJSONObject: document, options: [.sortedKeys, .withoutEscapingSlashes])
    }
}
