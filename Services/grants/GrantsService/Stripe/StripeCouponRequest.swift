import Core
import Foundation

/// What a coupon's terms become at Stripe (docs/stripe.md, "Which coupons become Stripe
/// coupons"): the form of one Stripe coupon and of its promotion code. Pure, so its table is
/// tested without a server.
///
/// - `percent_off` for a percentage, `amount_off` in the currency's minor unit with `currency`
///   for an amount, and `percent_off` 100 for a free period.
/// - `duration`: `repeating` with `duration_in_months` when the terms last whole months (`month`
///   or `year` periods times the period count), else `once` (the first invoice).
/// - `applies_to[products][]`: the products of the plans' prices.
/// - The promotion code's `code` is Redeem's, `max_redemptions` the cap, `expires_at` the expiry,
///   and `restrictions[first_time_transaction]` for new customers only.
enum StripeCouponRequest {
    /// An amount ("4.90") in the currency's minor unit (490), nil when it is not a number.
    static func minorUnits(_ amount: String, currency: String) -> Int? {
        guard let value = Decimal(string: amount, locale: Locale(identifier: "en_US_POSIX")), value >= 0 else {
            return nil
        }
        var scaled = value * (StripeAmount.zeroDecimal.contains(currency.uppercased()) ? 1 : 100)
        var rounded = Decimal()
        NSDecimalRound(&rounded, &scaled, 0, .plain)
        return NSDecimalNumber(decimal: rounded).intValue
    }

    /// Months the discount lasts, nil when the terms are not whole months.
    static func months(_ terms: StoreOfferTerms) -> Int? {
        switch terms.duration.unit {
        case "month": terms.duration.count * max(1, terms.periodCount)
        case "year": 12 * terms.duration.count * max(1, terms.periodCount)
        default: nil
        }
    }

    /// The Stripe coupon's form, or the reason Stripe can't take the terms.
    static func coupon(_ command: StoreProvisionCommand, products: [String]) -> Result<[(String, String)], Problem> {
        var form: [(String, String)] = [
            ("id", command.offerName), ("name", String("Redeem \(command.code)".prefix(40)))
        ]
        switch command.offer.kind {
        case .percentOff:
            guard let percent = command.offer.percentOff, (1...100).contains(percent) else {
                return .failure(Problem("percentOff must be 1 to 100"))
            }
            form.append(("percent_off", String(percent)))
        case .amountOff:
            guard let money = command.offer.amountOff, let minor = minorUnits(money.amount, currency: money.currency),
                minor > 0
            else {
                return .failure(Problem("amountOff must be a positive amount"))
            }
            form += [("amount_off", String(minor)), ("currency", money.currency.lowercased())]
        case .freePeriod:
            form.append(("percent_off", "100"))
        }
        if let months = months(command.offer) {
            form += [("duration", "repeating"), ("duration_in_months", String(months))]
        } else {
            form.append(("duration", "once"))
        }
        form += products.map { ("applies_to[products][]", $0) }
        form += [
            ("metadata[redeem_coupon_id]", command.couponId.lowercasedString),
            ("metadata[redeem_mode]", command.mode.rawValue)
        ]
        return .success(form)
    }

    /// The promotion code's form, on the Stripe coupon `couponId`.
    static func promotionCode(_ command: StoreProvisionCommand, couponId: String) -> [(String, String)] {
        var form: [(String, String)] = [("coupon", couponId), ("code", command.code)]
        if let cap = command.maxRedemptions { form.append(("max_redemptions", String(cap))) }
        if let expires = command.expiresAt { form.append(("expires_at", String(Int(expires.timeIntervalSince1970)))) }
        if command.newCustomersOnly { form.append(("restrictions[first_time_transaction]", "true")) }
        form.append(("metadata[redeem_coupon_id]", command.couponId.lowercasedString))
        return form
    }

    struct Problem: Error, Equatable {
        var message: String
        init(_ message: String) { self.message = message }
    }
}
