import Core
import Foundation

/// What a Play purchase pays in the phase it is in (docs/stores.md, "Completion on Android").
/// `subscriptionsv2` names the phase (`lineItems[].offerPhase`) but carries one price only, the
/// base plan's recurring one (`autoRenewingPlan.recurringPrice`, in the buyer's currency). In an
/// offer's phase, the price is the offer's own for the purchase's region, as the offer Google
/// holds states it (`phases[0].regionalConfigs`, Play's monetization API): a `price`, the recurring price
/// less a `relativeDiscount` share or an `absoluteDiscount` in the same currency, or nothing
/// (`free`); rounded to the currency's minor unit.
enum PlayPhasePrice {
    /// Milliunits (9.99 is 9990) and currency.
    struct Price: Sendable, Equatable {
        var milliunits: Int64
        var currency: String
    }

    /// The price of the phase the purchase is in: in an offer's phase, the offer's own price for
    /// the purchase's region, read from the offer at Google; else the base plan's recurring price,
    /// and so too when the offer is gone or has no price there (`fallback` says why). A read
    /// Google does not answer is `unavailable`: the purchase is acknowledged already, so the
    /// caller's retry only reads again.
    static func read(_ purchase: PlaySubscriptionPurchase, _ item: PlaySubscriptionPurchase.LineItem,
                     client: PlayDeveloperClient) async throws -> (price: Price?, fallback: String?) {
        let recurring = recurring(item)
        guard inOfferPhase(item), let offerId = item.offerDetails?.offerId, let basePlan = item.offerDetails?.basePlanId else {
            return (recurring, nil)
        }
        let offer: PlayOffer?
        do {
            offer = try await client.offer(productId: item.productId, basePlanId: basePlan, offerId: offerId)
        } catch {
            switch error {
            case .refused(let status, let message): throw ServiceError(.unavailable, "Google Play refused the offer's read (\(status)): \(message)")
            case .retryLater(_, let reason): throw ServiceError(.unavailable, "Google Play did not answer for the offer: \(reason)")
            }
        }
        guard let offer else { return (recurring, "Google Play has no offer \(offerId) on \(item.productId)/\(basePlan)") }
        guard let own = offerPrice(offer, region: purchase.regionCode, recurring: recurring) else {
            return (recurring, "the offer has no price for region \(purchase.regionCode ?? "(none)")")
        }
        return (own, nil)
    }

    /// Whether the line item is (or may be) in its offer's phase: it names an offer, and Google
    /// does not say it is in the base price (or proration) phase.
    static func inOfferPhase(_ item: PlaySubscriptionPurchase.LineItem) -> Bool {
        guard item.offerDetails?.offerId != nil else { return false }
        guard let phase = item.offerPhase else { return true }
        return phase.basePrice == nil && phase.prorationPeriod == nil
    }

    /// The base plan's recurring price, as the purchase reports it.
    static func recurring(_ item: PlaySubscriptionPurchase.LineItem) -> Price? {
        item.autoRenewingPlan?.recurringPrice.map { Price(milliunits: $0.milliunits, currency: $0.currencyCode) }
    }

    /// The offer's price in `region`, from its first phase (the one a new purchase starts in);
    /// nil when the offer has no config there or its terms can't be priced from `recurring`.
    static func offerPrice(_ offer: PlayOffer, region: String?, recurring: Price?) -> Price? {
        guard let region, let config = offer.phases?.first?.regionalConfigs?.first(where: { $0.regionCode == region }) else { return nil }
        if let price = config.price { return Price(milliunits: rounded(units(price), currency: price.currencyCode), currency: price.currencyCode) }
        guard let recurring else { return nil }
        let base = Decimal(recurring.milliunits) / 1000
        if config.free != nil { return Price(milliunits: 0, currency: recurring.currency) }
        if let share = config.relativeDiscount, let off = Decimal(string: String(share)), off > 0, off < 1 {
            return Price(milliunits: rounded(base * (1 - off), currency: recurring.currency), currency: recurring.currency)
        }
        if let off = config.absoluteDiscount, off.currencyCode.uppercased() == recurring.currency.uppercased() {
            let left = base - units(off)
            return Price(milliunits: rounded(left > 0 ? left : 0, currency: recurring.currency), currency: recurring.currency)
        }
        return nil
    }

    static func units(_ m: PlayMoney) -> Decimal {
        (Decimal(string: m.units ?? "0") ?? 0) + Decimal(m.nanos ?? 0) / 1_000_000_000
    }

    /// `amount` rounded to the currency's minor unit (ISO 4217 as Foundation's currency format
    /// knows it: 2 for USD, 0 for JPY, 3 for KWD; half to even), in milliunits: formatted in that
    /// currency and read back.
    static func rounded(_ amount: Decimal, currency: String) -> Int64 {
        let style = Decimal.FormatStyle.Currency(code: currency.uppercased(), locale: Locale(identifier: "en_US_POSIX")).grouping(.never)
        let value = (try? Decimal(amount.formatted(style), format: style)) ?? amount
        return NSDecimalNumber(decimal: value * 1000).int64Value
    }
}
