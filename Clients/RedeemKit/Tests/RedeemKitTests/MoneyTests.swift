import Foundation
import RedeemKit
import Testing

/// `Money` formats itself with its currency's minor units, in the locale asked for.
@Suite struct MoneyTests {
    /// The digits after the decimal separator in `text` (none when it has none).
    static func decimals(_ text: String, separator: Character) -> Int {
        guard let i = text.lastIndex(of: separator) else { return 0 }
        return text[text.index(after: i)...].prefix { $0.isNumber }.count
    }

    @Test func eachCurrencyShowsItsOwnMinorUnits() {
        let us = Locale(identifier: "en_US")
        #expect(Money(amount: "4.99", currency: "USD").formattedAmountOff(locale: us) == "$4.99")
        #expect(Money(amount: "5", currency: "USD").formattedAmountOff(locale: us) == "$5.00")
        let yen = Money(amount: "500", currency: "JPY").formattedAmountOff(locale: us)
        #expect(yen.contains("500") && Self.decimals(yen, separator: ".") == 0, "\(yen)")
        let dinar = Money(amount: "1.25", currency: "KWD").formattedAmountOff(locale: us)
        #expect(dinar.contains("1.250") && Self.decimals(dinar, separator: ".") == 3, "\(dinar)")
    }

    @Test func theLocaleWritesTheNumber() {
        let euros = Money(amount: "4.99", currency: "EUR").formattedAmountOff(locale: Locale(identifier: "de_DE"))
        #expect(euros.contains("4,99") && euros.contains("€"), "\(euros)")
    }

    @Test func anAmountThatIsNoNumberShowsAsWritten() {
        #expect(Money(amount: "4.99", currency: "EUR").decimalAmount == Decimal(string: "4.99"))
        #expect(Money(amount: "lots", currency: "EUR").decimalAmount == nil)
        #expect(Money(amount: "lots", currency: "EUR").formattedAmountOff() == "lots EUR")
    }
}
