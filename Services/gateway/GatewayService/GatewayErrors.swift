import Core
import Foundation
import HTTP

/// The one place service errors become HTTP statuses.
enum GatewayErrors {
    /// Exhaustive: a code added to `ErrorCode` does not compile until it has its status here.
    static func status(of code: ErrorCode) -> Int {
        switch code {
        case .notIdentified, .invalidToken, .invalidCredentials, .invalidIdentityToken, .invalidSignedData: 401
        case .invalidSignInCode, .signInCodeUsed, .signInCodeExpired, .totpRequired: 401
        case .forbidden, .mailNotConfigured, .cloudKitNotConfigured, .reauthenticationRequired, .emailUnverified: 403
        case .notFound, .routeNotFound: 404
        case .emailInUse, .recordNameInUse, .codeInUse, .productInUse, .transactionInUse, .invalidState, .appleIdInUse: 409
        case .returnNotAllowed, .stateMismatch: 400
        case .invalid, .weakPassword, .storeLimit, .recordNameUnproven: 422
        case .rateLimited: 429
        case .downloadGone: 410
        case .unavailable: 503
        case .timeout: 504
        case .malformedMessage, .unknownMessageType, .unsupportedVersion, .internal: 500
        }
    }

    /// How long a client should wait after a 503 `unavailable` (a password hash over its bound,
    /// a service out of reach): about as long as a few hashes take.
    static let retryAfterSeconds = 1

    static func response(for error: any Error, request: HTTPRequest) -> HTTPResponse {
        switch error {
        case let e as HTTPError:
            return .error(e)
        case let e as ServiceError:
            let status = status(of: e.code)
            // Internals of a failed service stay in the logs, not the body.
            if status >= 500 && e.code != .timeout && e.code != .unavailable {
                return .error(HTTPError(500, "internal", "something went wrong on our side"))
            }
            // A service that is busy or out of reach now may not be in a moment: say when to try again.
            let retry = (e.retryAfter ?? (e.code == .unavailable ? retryAfterSeconds : nil)).map { [("Retry-After", String(max(1, $0)))] } ?? []
            return .error(HTTPError(status, e.code.rawValue, e.message, field: e.field, headers: retry))
        default:
            return .error(HTTPError(500, "internal", "something went wrong on our side"))
        }
    }
}
