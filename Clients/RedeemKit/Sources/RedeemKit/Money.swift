import Foundation

/// An amount of money: a decimal string and an ISO 4217 currency, as the API writes it.
public struct Money: Codable, Sendable, Equatable, Hashable {
    /// The amount as a decimal string with at most two decimals, such as `"4.99"`.
    public var amount: String
    /// The ISO 4217 currency code, such as `"EUR"`.
    public var currency: String

    /// Makes an amount.
    public init(amount: String, currency: String) {
        self.amount = amount
        self.currency = currency
    }

    /// The amount as a number; nil when the string is not a decimal. The API writes it with a
    /// dot whatever the locale, so it is read that way.
    public var decimalAmount: Decimal? {
        Decimal(string: amount, locale: Locale(identifier: "en_US_POSIX"))
    }

    /// The amount for people, as an amount off is shown (`$4.99`, `4,99 €`, `¥500`, `KWD 1.250`):
    /// the locale's currency format with the currency's own minor units (JPY none, USD two, KWD
    /// three), not a fixed two decimals. An amount that is not a decimal shows as written, with
    /// its currency.
    public func formattedAmountOff(locale: Locale = .current) -> String {
        guard let value = decimalAmount else { return "\(amount) \(currency)" }
        return value.formatted(.currency(code: currency).locale(locale))
    }
}
