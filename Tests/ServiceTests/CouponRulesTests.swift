import Foundation
import Testing
@testable import CouponsService
@testable import Core

/// Field rules of coupons, validate and redeem that need no database.
@Suite struct CouponRulesTests {
    @Test func moneyNeedsACurrencyInUseAndAPositiveAmountUnlessZeroIsAllowed() throws {
        #expect(try CouponRules.checkMoney(Money(amount: "4.99", currency: "EUR"), field: "amountOff").1 == "EUR")
        for currency in ["XYZ", "eur", "EURO", "XTS"] {
            #expect(throws: ServiceError.self, "\(currency)") { try CouponRules.checkMoney(Money(amount: "1.00", currency: currency), field: "amountOff") }
        }
        #expect(throws: ServiceError.self) { try CouponRules.checkMoney(Money(amount: "0.00", currency: "EUR"), field: "amountOff") }
        // A store purchase of a 100 % discount costs nothing, and is confirmed like any other.
        #expect(try CouponRules.checkMoney(Money(amount: "0.00", currency: "EUR"), field: "pricePaid", allowZero: true).0 == 0)
        #expect(throws: ServiceError.self) { try CouponRules.checkMoney(Money(amount: "-1", currency: "EUR"), field: "pricePaid", allowZero: true) }
    }

    @Test func codesAreMatchedWithoutCaseOrSurroundingWhiteSpace() throws {
        #expect(Coupons.normalizeCode(" summer-10\n") == "SUMMER-10")
        #expect(Coupons.normalizeCode("Summer-10") == "SUMMER-10")
        #expect(try CouponRules.checkCode(" new-code ") == "NEW-CODE")
        #expect(throws: ServiceError.self) { try CouponRules.checkCode("in side") }
    }
}
