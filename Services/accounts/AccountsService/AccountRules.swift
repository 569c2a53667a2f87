import Core
import Foundation

/// Input rules of accounts and sessions, as plain functions that throw the error the client sees.
enum AccountRules {
    static let minimumPasswordLength = 10
    static let maximumPasswordLength = 1024

    /// A plausible address: one `@`, a non-empty local part, a dotted domain, no spaces; ≤ 254 chars.
    static func checkEmail(_ email: String, field: String = "email") throws -> String {
        let e = email.trimmingCharacters(in: .whitespaces)
        let parts = e.split(separator: "@", omittingEmptySubsequences: false)
        guard e.count <= 254, parts.count == 2, !parts[0].isEmpty, parts[1].contains("."),
              !parts[1].hasPrefix("."), !parts[1].hasSuffix("."), !parts[1].contains(".."),
              !e.contains(where: { $0.isWhitespace || $0.isNewline || $0 == "<" || $0 == ">" }) else {
            throw ServiceError(.invalid, "email is not a valid email address", field: field)
        }
        return e
    }

    static func checkPassword(_ password: String) throws {
        guard password.count >= minimumPasswordLength else {
            throw ServiceError(.weakPassword, "the password needs at least \(minimumPasswordLength) characters", field: "password")
        }
        guard password.utf8.count <= maximumPasswordLength else {
            throw ServiceError(.invalid, "the password is longer than \(maximumPasswordLength) bytes", field: "password")
        }
        guard !CommonPasswords.contains(password), !CommonPasswords.isPredictable(password) else {
            throw ServiceError(.weakPassword, "this password is among the most common ones; choose another", field: "password")
        }
    }

    /// What a first Sign in with Apple does when its email is already an account's (docs/security.md, "Account linking",
    /// account pre-hijacking). Whoever signs up with an email and a password never proves the
    /// email, so Apple's word that the Apple user owns it must not hand them that account, nor
    /// leave the password with whoever typed it: an account is joined only when its own email
    /// was proven (it came verified from Apple).
    enum AppleEmailMatch: Equatable, Sendable {
        /// Sign in to the account that holds the email.
        case join
        /// Make an account of the Apple identity's own; the existing one keeps the email.
        case separateAccount
        /// 409 `emailInUse`: Apple did not verify the email either.
        case refuse
    }

    static func appleEmailMatch(appleEmailVerified: Bool, accountEmailVerified: Bool) -> AppleEmailMatch {
        guard appleEmailVerified else { return .refuse }
        return accountEmailVerified ? .join : .separateAccount
    }

    /// RevenueCat's reserved App User ID values (RevenueCat's App User IDs), compared without case.
    static let blockedUserIds: Set<String> = [
        "no_user", "null", "none", "nil", "(null)", "nan", "\\x00", "", "unidentified", "undefined",
        "anonymous", "guest", "-1", "0", "[]", "{}", "[object object]", "unknown",
    ]

    /// A CloudKit record name usable as an `appUserId`: 1–100 characters, no `/`, not reserved.
    static func checkRecordName(_ name: String, field: String) throws -> String {
        guard !name.isEmpty, name.count <= 100 else {
            throw ServiceError(.invalid, "\(field) must be 1 to 100 characters", field: field)
        }
        guard !name.contains("/") else {
            throw ServiceError(.invalid, "\(field) must not contain /", field: field)
        }
        guard !blockedUserIds.contains(name.lowercased()), !name.hasPrefix("$RCAnonymousID:") else {
            throw ServiceError(.invalid, "\(field) is a value RevenueCat does not accept as an App User ID", field: field)
        }
        guard !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw ServiceError(.invalid, "\(field) contains control characters", field: field)
        }
        // A record name is an identifier: blank or padded text is a client's mistake, and would
        // become an App User ID nobody can type back.
        guard name.first?.isWhitespace == false, name.last?.isWhitespace == false else {
            throw ServiceError(.invalid, "\(field) must not be blank or begin or end with white space", field: field)
        }
        return name
    }
}
