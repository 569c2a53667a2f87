import Foundation

// Email verification and password reset: tokens sent by mail through the accounts
// service's outbox, each random, stored as its SHA-256 only, used once, and expiring.

extension Accounts {
    /// Sends a verification mail to the account's email. `invalidState` when it is verified
    /// already, `invalid` (field `email`) when the account has none, `mailNotConfigured` without SMTP,
    /// `rateLimited` (with `retryAfter`) past the mail limits of the email or of `clientAddress`.
    public struct SendEmailVerification: BusRequest {
        public static let type = "accounts.sendEmailVerification"
        public typealias Response = Empty
        public var accountId: UUID
        /// Who asked (the gateway's client address), for the per-address mail limit.
        public var clientAddress: String?
        public init(accountId: UUID, clientAddress: String? = nil) {
            self.accountId = accountId
            self.clientAddress = clientAddress
        }
    }

    /// Spends a verification token: the email it was sent to is verified, if it is still the
    /// account's. `invalidToken` for a token unknown, used, expired or for another address.
    public struct ConfirmEmail: BusRequest {
        public static let type = "accounts.confirmEmail"
        public typealias Response = Empty
        public var token: String
        public init(token: String) { self.token = token }
    }

    /// Sends a reset mail when an account has this email, and answers the same either way (no
    /// account enumeration); `mailNotConfigured` without SMTP, for every email alike; `rateLimited`
    /// (with `retryAfter`) past the mail limits of the email or of `clientAddress`, whether or not
    /// an account has it.
    public struct RequestPasswordReset: BusRequest {
        public static let type = "accounts.requestPasswordReset"
        public typealias Response = Empty
        public var email: String
        /// Who asked (the gateway's client address), for the per-address mail limit.
        public var clientAddress: String?
        public init(email: String, clientAddress: String? = nil) {
            self.email = email
            self.clientAddress = clientAddress
        }
    }

    /// Spends a reset token: sets the password (the sign-up rules), verifies the email the token
    /// was sent to, revokes every session of the account and opens a new one.
    public struct ResetPassword: BusRequest {
        public static let type = "accounts.resetPassword"
        public typealias Response = AuthResult
        public var token: String
        public var password: String
        public init(token: String, password: String) {
            self.token = token
            self.password = password
        }
    }
}
