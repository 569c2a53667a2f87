import Foundation
import Testing
@testable import AccountsService
@testable import Shared

/// Password and record-name rules of SPEC §4.1 that need no database.
@Suite struct AccountRulesTests {
    @Test func predictablePasswordsAreWeakWhateverTheirLength() {
        for weak in ["qwerty123456", "1qaz2wsx3edc", "abcdefghij", "a123456789", "          ", "\t\t\t\t\t\t\t\t\t\t", "zyxwvutsrqpo",
                     "aaaaabbbbbccccc", "9876543210x"] {
            #expect(throws: ServiceError.self, "\(weak.debugDescription)") { try AccountRules.checkPassword(weak) }
        }
        for fine in ["correct horse battery", "tr0ub4dor&3x", "qwerty-Lamp-Violet", "my 2 cats eat 9 mice"] {
            #expect(throws: Never.self, "\(fine)") { try AccountRules.checkPassword(fine) }
        }
    }
}
