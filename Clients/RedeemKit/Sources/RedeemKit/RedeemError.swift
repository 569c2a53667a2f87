import Foundation

/// A call that did not get the answer it asked for: the server refused it (its `code`, `message`,
/// `field` and the request's id), or it never got an answer (timeout, no connection, cancelled).
public struct RedeemError: Error, Sendable, Equatable, LocalizedError, CustomStringConvertible {
    /// What went wrong, broadly.
    public enum Kind: Sendable, Equatable {
        /// The server answered with this HTTP status and its error body.
        case server(status: Int)
        /// No answer within the call's timeout.
        case timedOut
        /// The request did not reach the server, or its answer was lost.
        case transport
        /// The answer could not be read as the documented JSON.
        case decoding
        /// The call needs a signed-in user, and there is none (no request was made).
        case notSignedIn
        /// The task was cancelled.
        case cancelled
        /// CloudKit gave no web auth token to prove the record name with (no iCloud account, no
        /// network, a wrong API token): no request was made.
        case cloudKit
        /// This platform cannot do it (an App Store page on a system without one): no request was made.
        case unsupported
    }

    /// What went wrong, broadly.
    public var kind: Kind
    /// The server's machine code (`.invalidToken`, `.weakPassword`, `.storeLimit`, …), or RedeemKit's
    /// own (`.timeout`, `.transport`, `.decoding`, `.notIdentified`, `.cancelled`, `.cloudKitUnavailable`).
    public var code: RedeemErrorCode
    /// The server's sentence for people, or RedeemKit's.
    public var message: String
    /// The field a 422 is about.
    public var field: String?
    /// The server's request id (`X-Request-Id`), to find the request in its logs.
    public var requestId: String?
    /// For a code refused as `webOnly`: the redeem page with the code filled in, where the user
    /// redeems it in a browser.
    public var redeemUrl: URL?

    /// Makes an error.
    public init(kind: Kind, code: RedeemErrorCode, message: String, field: String? = nil, requestId: String? = nil,
                redeemUrl: URL? = nil) {
        self.kind = kind
        self.code = code
        self.message = message
        self.field = field
        self.requestId = requestId
        self.redeemUrl = redeemUrl
    }

    /// The HTTP status, when the server answered.
    public var status: Int? {
        if case .server(let status) = kind { return status }
        return nil
    }

    /// The server's message.
    public var errorDescription: String? { message }

    /// `code: message (field, request id)`.
    public var description: String {
        var text = "\(code): \(message)"
        if let field { text += " (field \(field))" }
        if let requestId { text += " [request \(requestId)]" }
        return text
    }

    static func timedOut(after seconds: TimeInterval) -> RedeemError {
        RedeemError(kind: .timedOut, code: .timeout, message: "no answer within \(Int(seconds.rounded())) s")
    }

    static func transport(_ error: any Error) -> RedeemError {
        RedeemError(
            kind: .transport, code: .transport,
            message: "the server could not be reached (\(error.localizedDescription))")
    }

    static let notSignedIn = RedeemError(kind: .notSignedIn, code: .notIdentified, message: "no one is signed in")
    static let cancelled = RedeemError(kind: .cancelled, code: .cancelled, message: "the call was cancelled")

    /// The refusal a refused redeem (a 422 whose code is a reason) stands for; nil for any other error.
    var refusal: CouponError? {
        guard status == 422, let reason = code.couponReason else { return nil }
        return CouponError(reason, serverMessage: message, requestId: requestId, redeemUrl: redeemUrl)
    }
}

/// Why a code was refused, as a value: validate answers it as `reason`, redeem as its outcome.
/// Its `localizedDescription` is the sentence to show people for each reason.
public struct CouponError: Error, Sendable, Equatable, LocalizedError {
    /// The machine reason (the API's `reason`, or a refused redeem's `error.code`).
    public enum Reason: String, Codable, Sendable, CaseIterable {
        /// There is no coupon with this code.
        case notFound
        /// The coupon was deactivated.
        case inactive
        /// The coupon's window has not begun.
        case notStarted
        /// The coupon's window has ended.
        case expired
        /// Every use of the coupon is taken.
        case exhausted
        /// This account already redeemed the coupon.
        case alreadyRedeemed
        /// The coupon does not cover this account (new customers only), platform or product.
        case notEligible
        /// The discount's store offer is not ready yet.
        case notReady
        /// The store account already holds the plan (Google Play, known to the server through
        /// RevenueCat): nothing is bought and the coupon is not used.
        case alreadyOwned
        /// A free period granted by Redeem, which an iOS app may not sell or give (App Review
        /// 3.1.1): the user redeems it on the web, at `redeemUrl`. The operator may allow a coupon
        /// in apps (`allowInApp`).
        case webOnly
        /// A unique code with a typing error (its check character does not match), caught
        /// before any lookup.
        case mistyped
        /// A unique code already used by another redemption.
        case codeUsed
        /// No one is signed in (answered by RedeemKit without a request).
        case notIdentified
        /// A reason this version of RedeemKit does not know.
        case unknown

        /// Reads a reason this version does not know as `.unknown`.
        public init(from decoder: any Decoder) throws {
            self = Reason(rawValue: try decoder.singleValueContainer().decode(String.self)) ?? .unknown
        }
    }

    /// The machine reason.
    public var reason: Reason
    /// The server's own sentence, when it sent one (a refused redeem's `error.message`).
    public var serverMessage: String?
    /// The server's request id, when a request was made.
    public var requestId: String?
    /// For `webOnly`: the redeem page with the code filled in (open it in a browser).
    public var redeemUrl: URL?

    /// Makes a refusal.
    public init(_ reason: Reason, serverMessage: String? = nil, requestId: String? = nil, redeemUrl: URL? = nil) {
        self.reason = reason
        self.serverMessage = serverMessage
        self.requestId = requestId
        self.redeemUrl = redeemUrl
    }

    /// The sentence for people, one per reason (the redeem page's, in English).
    public var errorDescription: String? {
        switch reason {
        case .notFound: "There is no coupon with this code."
        case .inactive: "This coupon is no longer active."
        case .notStarted: "This coupon can't be used yet."
        case .expired: "This coupon has expired."
        case .exhausted: "This coupon has been used up."
        case .alreadyRedeemed: "You have already redeemed this coupon."
        case .notEligible: "This coupon doesn't apply to your account, platform or product."
        case .notReady: "This offer isn't available in the store yet; try again later."
        case .alreadyOwned: "Your store account already has this plan, so this coupon can't be used for it."
        case .webOnly: "This coupon is redeemed on the web: open its page to redeem it."
        case .mistyped: "This code has a typing error: check each character and try again."
        case .codeUsed: "This code has already been used."
        case .notIdentified: "Sign in to redeem a coupon."
        case .unknown: serverMessage ?? "This coupon can't be redeemed."
        }
    }

    /// Equality by reason: two refusals for the same reason are the same refusal.
    public static func == (a: CouponError, b: CouponError) -> Bool { a.reason == b.reason }
}
