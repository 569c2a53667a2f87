import Core
import Foundation

/// The prices of a discount offer per territory, pure: for each territory of the subscription,
/// the price point nearest to the discounted price and never above it, so the customer never pays
/// more than the coupon promises.
///
/// - A percent off is taken off each territory's current price.
/// - An amount off is taken off in the territories whose currency is the coupon's. Elsewhere it
///   is the same share of the price as it is of the lowest current price in the coupon's
///   currency (Redeem knows no exchange rates; that share is the largest the amount gives).
/// - A territory with no price point at or below its discounted price is left out of the offer
///   (the code does not work there); an offer left with no territory is not made.
enum OfferPricing {
    /// The price new customers pay now in a territory.
    struct Current: Sendable, Equatable {
        var territory: String
        var currency: String
        var price: Decimal
    }

    /// A price point of the subscription.
    struct Point: Sendable, Equatable {
        var id: String
        var territory: String
        var price: Decimal
    }

    enum Discount: Sendable, Equatable {
        case percent(Int)
        case amount(Decimal, currency: String)
    }

    struct Choice: Sendable, Equatable {
        /// Territory → price point id.
        var prices: [String: String]
        /// Territories without a price point at or below the discounted price.
        var leftOut: [String]
    }

    struct Problem: Error, Sendable, Equatable {
        var message: String
    }

    /// The discounted price in each territory.
    static func targets(_ current: [Current], _ discount: Discount) throws(Problem) -> [String: Decimal] {
        switch discount {
        case .percent(let percent):
            return Dictionary(uniqueKeysWithValues: current.map { ($0.territory, $0.price * Decimal(100 - percent) / 100) })
        case .amount(let amount, let currency):
            let same = current.filter { $0.currency == currency }
            guard let lowest = same.map(\.price).min(), lowest > 0 else {
                throw Problem(message: "no territory of the subscription is priced in \(currency), the currency of amountOff")
            }
            let share = amount / lowest
            return Dictionary(uniqueKeysWithValues: current.map {
                ($0.territory, $0.currency == currency ? $0.price - amount : $0.price * (1 - share))
            })
        }
    }

    static func choose(current: [Current], points: [Point], discount: Discount) throws(Problem) -> Choice {
        let targets = try targets(current, discount)
        var byTerritory: [String: [Point]] = [:]
        for p in points { byTerritory[p.territory, default: []].append(p) }
        var prices: [String: String] = [:], leftOut: [String] = []
        for territory in targets.keys.sorted() {
            let target = targets[territory]!
            let best = (byTerritory[territory] ?? []).filter { $0.price > 0 && $0.price <= target }.max { $0.price < $1.price }
            if let best { prices[territory] = best.id } else { leftOut.append(territory) }
        }
        guard !prices.isEmpty else {
            throw Problem(message: "no territory has a price point at or below the discounted price")
        }
        return Choice(prices: prices, leftOut: leftOut)
    }

    /// Apple's prices are decimal strings (`"9.99"`).
    static func decimal(_ text: String) -> Decimal? { Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) }
}
