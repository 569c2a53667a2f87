import Core
import Cryptography
import Foundation

/// OAuth access tokens for a service account (Google's server-to-server flow): an RS256
/// assertion (`GoogleServiceAccount`) posted to the token URL with
/// `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer` is answered `{access_token,
/// expires_in}`. A token is reused until `renewBefore` seconds before it expires, and callers that
/// ask while an exchange is under way wait for that one: one exchange per token's life, however
/// many tasks call Google at once.
actor GoogleAccessTokens {
    struct Issued: Sendable, Equatable {
        var token: String
        var expires: Date
    }

    let account: GoogleServiceAccount
    let scope: String
    let endpoint: AppleHTTP
    let retry: AppleRetry
    let renewBefore: TimeInterval
    let now: @Sendable () -> Date
    private var current: Issued?
    private var exchange: Task<Issued, any Error>?

    init(account: GoogleServiceAccount, scope: String = GoogleServiceAccount.androidPublisherScope, tokenURL: URL, timeout: TimeInterval,
         retry: AppleRetry, renewBefore: TimeInterval = 60, now: @escaping @Sendable () -> Date = { Date() }) {
        self.account = account
        self.scope = scope
        endpoint = AppleHTTP(base: tokenURL, timeout: timeout, dependency: "google_oauth")
        var retry = retry
        retry.api = "Google"
        self.retry = retry
        self.renewBefore = renewBefore
        self.now = now
    }

    /// The token to send now: the cached one while it has more than `renewBefore` left, else a new one.
    func token() async throws(AppleCallError) -> String {
        if let current, current.expires.timeIntervalSince(now()) > renewBefore { return current.token }
        let running = exchange ?? Task { try await self.exchanged() }
        exchange = running
        do {
            let issued = try await running.value
            if exchange == running { exchange = nil }
            current = issued
            return issued.token
        } catch {
            if exchange == running { exchange = nil }
            throw error as? AppleCallError ?? .retryLater(after: nil, reason: "Google's token endpoint: \(error)")
        }
    }

    /// Forgets `token` (Google answered 401 to it: revoked, or the clock ran ahead).
    func invalidate(_ token: String) {
        if current?.token == token { current = nil }
    }

    /// Forgets the cached token, whichever it is.
    func invalidateAll() { current = nil }

    nonisolated private func exchanged() async throws(AppleCallError) -> Issued {
        let audience = endpoint.base.absoluteString
        let assertion: String
        do { assertion = try account.assertion(scope: scope, audience: audience, now: now()) } catch {
            throw .refused(status: 0, message: "the service account's key cannot sign an assertion")
        }
        let form = "grant_type=\(AppleHTTP.encode(GoogleServiceAccount.jwtBearerGrant))&assertion=\(AppleHTTP.encode(assertion))"
        let sent = now()
        let outcome = await retry.run(idempotent: true, now: now) {
            await endpoint.send("POST", "", body: Data(form.utf8), contentType: "application/x-www-form-urlencoded", token: nil)
        }
        switch outcome {
        case .success(let body):
            struct Answer: Decodable { var access_token: String; var expires_in: Double? }
            guard let answer = try? JSONDecoder().decode(Answer.self, from: body), !answer.access_token.isEmpty else {
                throw .retryLater(after: nil, reason: "Google's token endpoint answered what cannot be read")
            }
            return Issued(token: answer.access_token, expires: sent.addingTimeInterval(answer.expires_in ?? 3600))
        case .retry(let after, let reason):
            throw .retryLater(after: after, reason: reason)
        case .refused(let status, let body):
            // OAuth's error shape (RFC 6749 §5.2): {error, error_description}.
            struct Refusal: Decodable { var error: String?; var error_description: String? }
            let refusal = try? JSONDecoder().decode(Refusal.self, from: body)
            let text = [refusal?.error, refusal?.error_description].compactMap { $0 }.joined(separator: ": ")
            throw .refused(status: status, message: "Google refused the service account's assertion (\(status))" + (text.isEmpty ? "" : ": \(text.prefix(300))"))
        }
    }
}
