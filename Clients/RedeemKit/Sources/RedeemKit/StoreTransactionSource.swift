import Foundation

/// One verified store transaction, as much of it as Redeem needs. On Apple platforms
/// `AppStoreTransactions` makes these from StoreKit's `Transaction`; tests make their own.
public struct StoreTransaction: Sendable {
    /// How the purchase got its price, StoreKit's `Transaction.offerType`.
    public enum OfferType: Sendable, Equatable {
        /// An offer code: Redeem's discounts are these.
        case code
        /// A promotional offer.
        case promotional
        /// An introductory offer (a free trial or an intro price).
        case introductory
        /// Another kind of offer (a win-back offer, or one newer than this version).
        case other
        /// No offer: the plan's own price.
        case none
    }

    /// The store's transaction id (`Transaction.id`).
    public var id: String
    /// The plan bought (`Transaction.productID`).
    public var productId: String
    /// How the purchase got its price.
    public var offerType: OfferType
    /// The `appAccountToken` the purchase carries, if the app passed one.
    public var appAccountToken: UUID?
    /// The signed transaction (`VerificationResult.jwsRepresentation`): what Redeem verifies.
    public var signedTransaction: String
    /// Tells the store the purchase is dealt with (`Transaction.finish()`); until then StoreKit
    /// hands it to the app again at every launch.
    public var finish: @Sendable () async -> Void

    /// Makes a transaction.
    public init(
        id: String, productId: String, offerType: OfferType, appAccountToken: UUID? = nil, signedTransaction: String,
        finish: @escaping @Sendable () async -> Void
    ) {
        self.id = id
        self.productId = productId
        self.offerType = offerType
        self.appAccountToken = appAccountToken
        self.signedTransaction = signedTransaction
        self.finish = finish
    }
}

/// Where the purchase listener (`RedeemClient.start()`) gets its transactions: on Apple platforms
/// `AppStoreTransactions` (StoreKit's `Transaction.unfinished`, then `Transaction.updates`). Kept
/// behind this protocol so what is posted, when, and how it is retried runs on Linux with a fake.
public protocol StoreTransactionSource: Sendable {
    /// Every verified transaction: first those left unfinished (made while the app was away or
    /// killed), then each new one as it comes, until the consumer stops iterating.
    func transactions() -> AsyncStream<StoreTransaction>
}

/// What the purchase listener did with an offer-code transaction (`purchaseUpdates` yields it).
public enum StorePurchaseOutcome: Sendable, Equatable {
    /// Posted to the account's reservation and answered: the transaction was finished. The
    /// redemption is `completed` once Redeem verified it with Apple.
    case posted(transactionId: String, Redemption)
    /// The server refused the purchase (a 4xx: not this coupon's offer, another account's
    /// purchase, not Apple's): not posted again, and left unfinished, so StoreKit hands it over
    /// once more at the next launch.
    case refused(transactionId: String, RedeemError)
    /// No reservation of the signed-in account waits for this plan (or no one is signed in): left
    /// unfinished for the app's own purchase handling.
    case unmatched(transactionId: String)
}

/// When the purchase listener posts again after a failure that may pass: no answer, a 5xx or a
/// 429. The pause doubles from `firstDelay` up to `maximumDelay`; a transaction is retried for as
/// long as the app runs (StoreKit hands it over again after a relaunch anyway).
public struct PurchaseRetryPolicy: Sendable, Equatable {
    /// The pause after the first failure, in seconds.
    public var firstDelay: TimeInterval
    /// The longest pause, in seconds.
    public var maximumDelay: TimeInterval

    /// A policy: 1 s, doubling, at most 5 minutes by default.
    public init(firstDelay: TimeInterval = 1, maximumDelay: TimeInterval = 300) {
        self.firstDelay = firstDelay
        self.maximumDelay = maximumDelay
    }

    /// The pause after `failures` failed attempts in a row (1 for the first).
    public func delay(afterFailures failures: Int) -> TimeInterval {
        min(maximumDelay, firstDelay * pow(2, Double(max(failures, 1) - 1)))
    }

    /// Whether a failed post is worth another attempt: no answer, or an answer that says "later"
    /// (5xx, 429). Any other refusal would be answered the same again.
    public static func isTransient(_ error: RedeemError) -> Bool {
        switch error.kind {
        case .transport, .timedOut: true
        case .server(let status): status >= 500 || status == 429
        case .decoding, .notSignedIn, .cancelled, .cloudKit, .unsupported: false
        }
    }
}
