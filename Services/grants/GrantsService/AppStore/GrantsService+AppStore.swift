import Core
import Foundation

extension GrantsService {
    /// `grants.appleTransaction`: the signed transaction from the App Store Server API, within
    /// the request's deadline (10 s when it names none).
    func appleTransaction(_ req: Grants.AppleTransaction, deadline: Date?) async throws -> Grants.AppleTransaction.Response {
        guard let client = appStoreServer else {
            throw ServiceError(.unavailable, "the App Store Server API is not configured (REDEEM_APPSTORE_KEY_ID)")
        }
        let signed = try await client.signedTransaction(req.transactionId, deadline: deadline ?? Date().addingTimeInterval(10))
        return .init(signedTransaction: signed)
    }
}
