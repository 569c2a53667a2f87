import Foundation
import Shared

/// The one place service errors become HTTP statuses (SPEC §4).
enum GatewayErrors {
    static let statusByCode: [String: Int] = [
        "notIdentified": 401, "invalidToken": 401, "invalidCredentials": 401, "invalidIdentityToken": 401,
        "forbidden": 403,
        "notFound": 404, "routeNotFound": 404,
        "emailInUse": 409, "recordNameInUse": 409, "codeInUse": 409, "transactionInUse": 409,
        "invalid": 422, "weakPassword": 422, "storeLimit": 422,
        "rateLimited": 429,
        "timeout": 504, "unavailable": 503,
        "malformedMessage": 500, "invalidState": 409, "unknownMessageType": 500, "unsupportedVersion": 500, "internal": 500,
    ]

    static func response(for error: any Error, request: HTTPRequest) -> HTTPResponse {
        switch error {
        case let e as HTTPError:
            return .error(e)
        case let e as ServiceError:
            let status = statusByCode[e.code] ?? 422
            // Internals of a failed service stay in the logs, not the body.
            if status >= 500 && e.code != "timeout" && e.code != "unavailable" {
                return .error(HTTPError(500, "internal", "something went wrong on our side"))
            }
            return .error(HTTPError(status, e.code, e.message, field: e.field))
        default:
            return .error(HTTPError(500, "internal", "something went wrong on our side"))
        }
    }
}
