import Core
import Cryptography
import Foundation

/// The App Store Server API's Get Transaction Info (`GET /inApps/v1/transactions/{id}`): the
/// transaction as Apple signs it (`signedTransactionInfo`), for the gateway to verify like any
/// signed transaction. A transaction id belongs to one environment: production is asked first,
/// and the sandbox when production answers "not found" (`4040010`), as Apple's
/// app-store-server-library does for receipts. Each request carries a new token (In-App
/// Purchase key, `bid`, 5 minutes), as Apple asks; 429s, 5xx and timeouts are retried within the
/// request's deadline (`AppleRetry`).
struct AppStoreServerClient: Sendable {
    let production: AppleHTTP
    let sandbox: AppleHTTP
    let token: AppleAPIToken
    let retry: AppleRetry
    let now: @Sendable () -> Date

    /// Apple's error codes read here (`{errorCode, errorMessage}`).
    static let transactionNotFound = 4_040_010
    static let invalidTransactionId = 4_000_006

    init(production: URL, sandbox: URL, token: AppleAPIToken, timeout: TimeInterval, retry: AppleRetry, now: @escaping @Sendable () -> Date = { Date() }) {
        self.production = AppleHTTP(base: production, timeout: timeout, dependency: "app_store_server")
        self.sandbox = AppleHTTP(base: sandbox, timeout: timeout, dependency: "app_store_server")
        self.token = token
        self.retry = retry
        self.now = now
    }

    init(settings: AppStoreServerSettings, timeout: TimeInterval, retry: AppleRetry) {
        self.init(production: settings.url, sandbox: settings.sandboxURL,
                  token: AppleAPIToken(api: .appStoreServer(bundleId: settings.bundleId), keyId: settings.keyId, issuerId: settings.issuerId,
                                       key: settings.privateKey),
                  timeout: timeout, retry: retry)
    }

    /// The signed transaction, from production or else the sandbox. Throws `notFound` when
    /// neither knows it, `invalid` for an id Apple refuses, `unavailable` when Apple could not
    /// answer in time (rate limited, down, or past `deadline`).
    func signedTransaction(_ transactionId: String, deadline: Date?) async throws(ServiceError) -> String {
        guard (1...40).contains(transactionId.count), transactionId.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw ServiceError(.invalid, "transactionId must be Apple's transaction id, digits only", field: "transactionId")
        }
        do {
            return try await signedTransaction(transactionId, from: production, deadline: deadline)
        } catch let e where e.code == .notFound {
            return try await signedTransaction(transactionId, from: sandbox, deadline: deadline)
        }
    }

    private func signedTransaction(_ id: String, from host: AppleHTTP, deadline: Date?) async throws(ServiceError) -> String {
        let outcome = await retry.run(idempotent: true, deadline: deadline, now: now) {
            guard let issued = try? token.issue(now: now(), lifetime: 300) else { return .unreachable }
            return await host.send("GET", "/inApps/v1/transactions/\(AppleHTTP.encode(id))", token: issued.token)
        }
        switch outcome {
        case .success(let body):
            struct Info: Decodable { var signedTransactionInfo: String }
            guard let info = try? JSONDecoder().decode(Info.self, from: body) else {
                throw ServiceError(.unavailable, "the App Store Server API's answer could not be read")
            }
            return info.signedTransactionInfo
        case .retry(let after, let reason):
            throw ServiceError(.unavailable, "the App Store Server API did not answer: \(reason)" + (after.map { "; try again in \(Int($0.rounded(.up))) s" } ?? ""))
        case .refused(let status, let body):
            struct AppleError: Decodable { var errorCode: Int?; var errorMessage: String? }
            let error = try? JSONDecoder().decode(AppleError.self, from: body)
            let message = error?.errorMessage.map { String($0.prefix(300)) } ?? "the App Store Server API refused the request (\(status))"
            switch error?.errorCode {
            case Self.transactionNotFound?: throw ServiceError(.notFound, message)
            case Self.invalidTransactionId?: throw ServiceError(.invalid, message, field: "transactionId")
            default: throw ServiceError(.unavailable, message)
            }
        }
    }
}
