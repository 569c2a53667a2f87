import Foundation

// Deleting an account (App Review guideline 5.1.1(v)).

extension Accounts {
    /// Deletes an account: every session revoked (published), its identities and credentials
    /// removed, its ids released; the row stays as a tombstone no sign-in reaches.
    public struct Delete: BusRequest {
        public static let type = "accounts.delete"
        public typealias Response = Empty
        public var accountId: UUID
        public init(accountId: UUID) { self.accountId = accountId }
    }
}

extension Coupons {
    /// Anonymises a deleted account's redemptions: they stay, so caps still count them, but name
    /// no account and no appUserId. Its reservations still waiting for a store purchase end
    /// (`released`) and give their uses back first. Idempotent.
    public struct ForgetAccount: BusRequest {
        public static let type = "coupons.forgetAccount"
        public struct Response: Codable, Sendable {
            public var anonymised: Int
            public init(anonymised: Int) { self.anonymised = anonymised }
        }
        public var accountId: UUID
        public init(accountId: UUID) { self.accountId = accountId }
    }
}
