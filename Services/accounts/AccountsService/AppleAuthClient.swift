import Core
import Foundation
import FoundationNetworking
import Outbound

/// Apple's token and revoke endpoints (Sign in with Apple REST API): form posts authenticated by
/// the client secret (`client_secret_post`).
struct AppleAuthClient: Sendable {
    let settings: AppleWebSettings
    let session: URLSession

    init(settings: AppleWebSettings, timeout: TimeInterval = 10) {
        self.settings = settings
        session = .outbound(timeout: timeout)
    }

    /// What `/auth/token` answers for an authorization code (`access_token` is reserved by
    /// Apple and unused).
    struct Tokens: Decodable, Sendable {
        var id_token: String
        var refresh_token: String?
    }

    /// What an exchange came to.
    enum Answer: Sendable, Equatable {
        case ok(Data)
        /// Apple refused (a 4xx other than 429): never different the next time.
        case refused(status: Int, error: String?)
        /// Apple is down, slow or throttling: worth another try later.
        case unavailable(String)
    }

    /// Exchanges the authorization code Apple posted to the callback.
    func exchange(code: String, now: Date = Date()) async throws -> Tokens {
        switch await post(settings.tokenURL, [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", settings.redirectURI)], now: now) {
        case .ok(let data):
            guard let tokens = try? JSONDecoder().decode(Tokens.self, from: data) else {
                throw ServiceError(.unavailable, "Apple's token answer could not be read")
            }
            return tokens
        case .refused(_, let error):
            throw ServiceError(.invalidIdentityToken, "Apple refused the authorization (\(error ?? "no reason given")); sign in again")
        case .unavailable:
            throw ServiceError(.unavailable, "Apple could not be reached; try again")
        }
    }

    /// Revokes a refresh token (account deletion, as Apple requires).
    func revoke(refreshToken: String, now: Date = Date()) async -> Answer {
        await post(settings.revokeURL, [("token", refreshToken), ("token_type_hint", "refresh_token")], now: now)
    }

    private func post(_ url: URL, _ fields: [(String, String)], now: Date) async -> Answer {
        guard let secret = settings.clientSecret(now: now) else { return .unavailable("the client secret could not be signed") }
        let all = [("client_id", settings.servicesId), ("client_secret", secret)] + fields
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let body = all.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }.joined(separator: "&")
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        request.httpBody = Data(body.utf8)
        do {
            let (data, response) = try await session.outboundData(for: request, dependency: "sign_in_with_apple")
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            switch status {
            case 200..<300: return .ok(data)
            case 429, 500...: return .unavailable("Apple answered \(status)")
            default:
                let error = (try? JSONDecoder().decode([String: String].self, from: data))?["error"]
                return .refused(status: status, error: error)
            }
        } catch {
            return .unavailable("Apple could not be reached")
        }
    }
}
