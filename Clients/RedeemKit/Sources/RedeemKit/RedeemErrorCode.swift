import Foundation

/// The machine code of a `RedeemError`: the server's (`error.code` in docs/api.md), or RedeemKit's
/// own for a call that got no readable answer. A closed set an app can switch over, with
/// `unknown(_:)` for a code a newer server sends, so an older app still reads it.
public enum RedeemErrorCode: Sendable, Hashable, RawRepresentable, CustomStringConvertible {
    // Who is asking.
    /// No one is signed in (no token, or RedeemKit had no session to send).
    case notIdentified
    /// The access token is expired, revoked or not the server's; RedeemKit refreshes once by itself.
    case invalidToken
    /// A wrong email or password.
    case invalidCredentials
    /// Apple's identity token is not valid (signature, audience, expiry or nonce).
    case invalidIdentityToken
    /// The caller may not do this.
    case forbidden
    /// A one-time sign-in code of the web flow that the server never gave out.
    case invalidSignInCode
    /// A one-time sign-in code already exchanged.
    case signInCodeUsed
    /// A one-time sign-in code past its two minutes.
    case signInCodeExpired
    /// A member with two-step verification signs in with a code as well.
    case totpRequired
    /// A store's signed data that is not the store's, or not this app's.
    case invalidSignedData
    /// A CloudKit record name without a web auth token proving it.
    case recordNameUnproven
    /// Linking Apple or a record name with an unproven email needs a fresh sign-in.
    case reauthenticationRequired
    /// The email must be verified first.
    case emailUnverified
    // What was asked for.
    /// No such thing (or not the caller's).
    case notFound
    /// No such route on this server.
    case routeNotFound
    // What stands in the way.
    /// The email belongs to another account.
    case emailInUse
    /// The record name is linked to another account.
    case recordNameInUse
    /// The coupon code exists already.
    case codeInUse
    /// A plan of this product id exists already.
    case productInUse
    /// The store purchase completed another account's redemption.
    case transactionInUse
    /// Not now: the thing is not in a state that allows it (a redemption already settled).
    case invalidState
    /// The Apple ID signs in to another account.
    case appleIdInUse
    // What was sent.
    /// A field is missing or wrong (`field` names it).
    case invalid
    /// The password is too weak.
    case weakPassword
    /// A store's own limit on offers or codes.
    case storeLimit
    /// The web flow's return address is not allowed.
    case returnNotAllowed
    /// The web flow's state or code verifier does not match.
    case stateMismatch
    /// Too many requests: wait and try again.
    case rateLimited
    /// An `Idempotency-Key` sent again with another request (method, path or body) than its first (422).
    case idempotencyKeyReused
    /// An `Idempotency-Key` whose first request is still running (409): try again shortly.
    case idempotencyKeyInUse
    /// The body is not JSON, or not the JSON the route reads (400).
    case malformedJson
    /// The body is over the route's size limit (413).
    case tooLarge
    /// The body's `Content-Type` is not one the route takes (415).
    case unsupportedMediaType
    /// The path exists, but not with this method (405).
    case methodNotAllowed
    /// A one-time download (new unique codes' CSV) was taken already, or expired (410).
    case downloadGone
    /// The server has no mail set up: no email verification or password reset.
    case mailNotConfigured
    /// The server has no CloudKit set up: record names are refused.
    case cloudKitNotConfigured
    // The server itself.
    /// A service did not answer in time.
    case timeout
    /// A service the call needs is away; try again.
    case unavailable
    /// Something went wrong on the server.
    case `internal`
    /// A refused code (redeem's 422, whose code is the refusal's reason).
    case refused(CouponError.Reason)
    // RedeemKit's own: no readable answer.
    /// The request did not reach the server, or its answer was lost.
    case transport
    /// The answer was not the documented JSON.
    case decoding
    /// The task was cancelled.
    case cancelled
    /// CloudKit gave no web auth token.
    case cloudKitUnavailable
    /// An error answer with this HTTP status and no error body (a proxy's, say).
    case http(Int)
    /// A code this version of RedeemKit does not know.
    case unknown(String)

    /// The codes that are neither a refusal, a bare status nor unknown, in the order above.
    static let named: [RedeemErrorCode] = [
        .notIdentified, .invalidToken, .invalidCredentials, .invalidIdentityToken, .forbidden, .invalidSignInCode,
        .signInCodeUsed, .signInCodeExpired, .totpRequired, .invalidSignedData, .recordNameUnproven,
        .reauthenticationRequired, .emailUnverified, .notFound, .routeNotFound, .emailInUse, .recordNameInUse,
        .codeInUse, .productInUse, .transactionInUse, .invalidState, .appleIdInUse, .invalid, .weakPassword,
        .storeLimit, .returnNotAllowed, .stateMismatch, .rateLimited, .idempotencyKeyReused, .idempotencyKeyInUse,
        .malformedJson, .tooLarge, .unsupportedMediaType, .methodNotAllowed, .downloadGone, .mailNotConfigured,
        .cloudKitNotConfigured, .timeout, .unavailable, .internal, .transport, .decoding, .cancelled,
        .cloudKitUnavailable
    ]

    private static let byName: [String: RedeemErrorCode] = {
        var table = Dictionary(uniqueKeysWithValues: named.map { ($0.rawValue, $0) })
        // `notFound` is both "no such thing" and a refusal reason: it stays the former, and
        // `couponReason` reads it as the refusal where a code was refused.
        for reason in CouponError.Reason.allCases where table[reason.rawValue] == nil {
            switch reason {
            case .notIdentified, .unknown: continue
            default: table[reason.rawValue] = .refused(reason)
            }
        }
        return table
    }()

    /// The code as the server spells it; never nil.
    public init(rawValue: String) {
        if let known = Self.byName[rawValue] {
            self = known
        } else if rawValue.hasPrefix("http"), let status = Int(rawValue.dropFirst(4)) {
            self = .http(status)
        } else {
            self = .unknown(rawValue)
        }
    }

    /// The code as the server spells it (`http502` for a status without an error body).
    public var rawValue: String {
        switch self {
        case .notIdentified: "notIdentified"
        case .invalidToken: "invalidToken"
        case .invalidCredentials: "invalidCredentials"
        case .invalidIdentityToken: "invalidIdentityToken"
        case .forbidden: "forbidden"
        case .invalidSignInCode: "invalidSignInCode"
        case .signInCodeUsed: "signInCodeUsed"
        case .signInCodeExpired: "signInCodeExpired"
        case .totpRequired: "totpRequired"
        case .invalidSignedData: "invalidSignedData"
        case .recordNameUnproven: "recordNameUnproven"
        case .reauthenticationRequired: "reauthenticationRequired"
        case .emailUnverified: "emailUnverified"
        case .notFound: "notFound"
        case .routeNotFound: "routeNotFound"
        case .emailInUse: "emailInUse"
        case .recordNameInUse: "recordNameInUse"
        case .codeInUse: "codeInUse"
        case .productInUse: "productInUse"
        case .transactionInUse: "transactionInUse"
        case .invalidState: "invalidState"
        case .appleIdInUse: "appleIdInUse"
        case .invalid: "invalid"
        case .weakPassword: "weakPassword"
        case .storeLimit: "storeLimit"
        case .returnNotAllowed: "returnNotAllowed"
        case .stateMismatch: "stateMismatch"
        case .rateLimited: "rateLimited"
        case .idempotencyKeyReused: "idempotencyKeyReused"
        case .idempotencyKeyInUse: "idempotencyKeyInUse"
        case .malformedJson: "malformedJson"
        case .tooLarge: "tooLarge"
        case .unsupportedMediaType: "unsupportedMediaType"
        case .methodNotAllowed: "methodNotAllowed"
        case .downloadGone: "downloadGone"
        case .mailNotConfigured: "mailNotConfigured"
        case .cloudKitNotConfigured: "cloudKitNotConfigured"
        case .timeout: "timeout"
        case .unavailable: "unavailable"
        case .`internal`: "internal"
        case .transport: "transport"
        case .decoding: "decoding"
        case .cancelled: "cancelled"
        case .cloudKitUnavailable: "cloudKitUnavailable"
        case .refused(let reason): reason.rawValue
        case .http(let status): "http\(status)"
        case .unknown(let code): code
        }
    }

    /// The code as the server spells it.
    public var description: String { rawValue }

    /// Two codes are the same when the server spells them the same (`.unknown("invalidToken")` is
    /// `.invalidToken`), whichever way they were made.
    public static func == (a: RedeemErrorCode, b: RedeemErrorCode) -> Bool { a.rawValue == b.rawValue }

    /// Hashes the spelling, as `==` compares it.
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }

    /// The refusal reason a code of a refused redeem stands for, if it is one.
    var couponReason: CouponError.Reason? {
        switch self {
        case .refused(let reason): reason
        case .notFound: .notFound
        default: nil
        }
    }
}
