import Core
import Foundation

/// A record name is claimed only with proof (docs/security.md): the claim is checked before
/// anything is written, wherever a record name comes in (sign-up, Sign in with Apple, a link).
extension AccountsService {
    /// The record name `name` once its `webAuthToken` proved it (or, with
    /// `REDEEM_CLOUDKIT_TRUST_CLIENT=1`, once its shape is valid); nil when none was sent.
    /// 403 `cloudKitNotConfigured` without CloudKit settings, 422 `recordNameUnproven` when the
    /// token is missing, not CloudKit's, spent, or another user's; 503 when CloudKit can't answer.
    func provenRecordName(_ name: String?, webAuthToken: String?, field: String) async throws -> String? {
        guard let name else { return nil }
        let recordName = try AccountRules.checkRecordName(name, field: field)
        switch config.recordNames {
        case .notConfigured:
            throw RecordNameProof.notConfiguredError
        case .trustClient:
            return recordName
        case .cloudKit:
            guard let cloudKit, let token = webAuthToken, !token.isEmpty, token.utf8.count <= 4096 else {
                throw RecordNameProof.unproven(field)
            }
            let answer = await cloudKit.currentUser(webAuthToken: token)
            switch CloudKitClient.verdict(answer, claimed: recordName) {
            case .proven:
                return recordName
            case .unproven:
                runtime.logger.info("record name claimed without proof", ["cloudkit.answer": String(describing: Self.redacted(answer))])
                throw RecordNameProof.unproven(field)
            case .unavailable:
                if case .misconfigured(let status, let code) = answer {
                    runtime.logger.error("CloudKit refused the API token: check REDEEM_CLOUDKIT_CONTAINER, _ENVIRONMENT and _API_TOKEN",
                                         ["http.status": status, "cloudkit.error": code ?? ""])
                }
                throw ServiceError(.unavailable, "CloudKit could not confirm the record name; try again")
            }
        }
    }

    /// An answer fit for a log: another user's record name is not written down.
    private static func redacted(_ answer: CloudKitClient.Answer) -> String {
        switch answer {
        case .user: "another iCloud user's token"
        case .refused(let status, let code): "refused \(status) \(code ?? "")"
        case .misconfigured(let status, _): "misconfigured \(status)"
        case .unavailable(let why): why
        }
    }
}
