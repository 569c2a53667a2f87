import Core
import Foundation
import FoundationNetworking
import Outbound

/// CloudKit Web Services' `users/current`: which iCloud user a web auth token belongs to. The app
/// fetches the token (`CKFetchWebAuthTokenOperation`, with the container's API token); CloudKit
/// spends it on its first use, so a token proves one claim.
struct CloudKitClient: Sendable {
    let settings: CloudKitSettings
    let session: URLSession

    init(settings: CloudKitSettings, timeout: TimeInterval = 8) {
        self.settings = settings
        session = .outbound(timeout: timeout)
    }

    /// What CloudKit said of a web auth token.
    enum Answer: Sendable, Equatable {
        /// The token is the user's whose record name this is (`userRecordName`).
        case user(String)
        /// The token is not one CloudKit takes (421 `AUTHENTICATION_REQUIRED`: unknown, expired or
        /// used) or the answer names no user: never different the next time.
        case refused(status: Int, code: String?)
        /// CloudKit refused the API token (401, 403): the operator's settings are wrong.
        case misconfigured(status: Int, code: String?)
        /// CloudKit is down, slow or throttling.
        case unavailable(String)
    }

    /// What a claim to `recordName` comes to, given CloudKit's answer for its token.
    enum Verdict: Sendable, Equatable {
        case proven, unproven, unavailable
    }

    static func verdict(_ answer: Answer, claimed recordName: String) -> Verdict {
        switch answer {
        case .user(let owner): owner == recordName ? .proven : .unproven
        case .refused: .unproven
        case .misconfigured, .unavailable: .unavailable
        }
    }

    /// Asks CloudKit whose token this is. The URL carries both tokens, so it is never logged.
    func currentUser(webAuthToken: String) async -> Answer {
        guard let url = settings.currentUserURL(webAuthToken: webAuthToken) else { return .refused(status: 0, code: nil) }
        var request = URLRequest(url: url)
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        do {
            let (data, response) = try await session.outboundData(for: request, dependency: "cloudkit")
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            let body = try? JSONDecoder().decode(Body.self, from: data)
            switch status {
            case 200:
                guard let name = body?.userRecordName, !name.isEmpty else { return .refused(status: status, code: "noUserRecordName") }
                return .user(name)
            case 401, 403: return .misconfigured(status: status, code: body?.serverErrorCode)
            case 429, 500...: return .unavailable("CloudKit answered \(status)")
            default: return .refused(status: status, code: body?.serverErrorCode)
            }
        } catch {
            return .unavailable("CloudKit could not be reached")
        }
    }

    /// `users/current`'s answer, or CloudKit's error dictionary.
    private struct Body: Decodable {
        var userRecordName: String?
        var serverErrorCode: String?
    }
}
