import Core
import Foundation

// What the App Store signs, decoded: the field names are Apple's (App Store Server API,
// "JWSTransactionDecodedPayload" and "responseBodyV2DecodedPayload"), so these types decode
// Apple's JSON as it is and encode it back the same way (the test fakes sign them). Dates are
// Unix milliseconds on the wire. Fields Apple does not always send are optional.

/// The server environment a purchase or notification belongs to (Apple's `environment`).
public enum AppStoreEnvironment: String, Codable, Sendable, Hashable, CaseIterable {
    case production = "Production"
    case sandbox = "Sandbox"
    case xcode = "Xcode"
    case localTesting = "LocalTesting"
}

/// A name from one of Apple's open sets (notification types, product types, …). Apple adds
/// names over time, so an unknown one still decodes (and matches none of the names below)
/// instead of making a whole notification unreadable.
public struct AppleName<Kind>: RawRepresentable, Codable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
}

/// A transaction as the App Store signs it: `signedTransactionInfo`, or what StoreKit hands the app.
public struct JWSTransactionDecodedPayload: Codable, Sendable, Equatable {
    public enum ProductTypeName {}
    public enum OfferDiscountTypeName {}
    public enum TransactionReasonName {}
    public typealias ProductType = AppleName<ProductTypeName>
    public typealias OfferDiscountType = AppleName<OfferDiscountTypeName>
    public typealias TransactionReason = AppleName<TransactionReasonName>

    /// `offerType`: which kind of offer the purchase used (numbers, unlike Apple's other sets).
    public struct OfferType: RawRepresentable, Codable, Hashable, Sendable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        public static let introductory = OfferType(rawValue: 1)
        public static let promotional = OfferType(rawValue: 2)
        /// An offer code, typed in the App Store or in the app's redemption sheet.
        public static let offerCode = OfferType(rawValue: 3)
        public static let winBack = OfferType(rawValue: 4)
    }

    public var transactionId: String
    /// Stays the same across renewals and restores: one purchase chain.
    public var originalTransactionId: String
    public var webOrderLineItemId: String?
    public var bundleId: String
    public var productId: String
    public var subscriptionGroupIdentifier: String?
    public var purchaseDate: Date
    public var originalPurchaseDate: Date?
    public var expiresDate: Date?
    public var quantity: Int?
    public var type: ProductType?
    /// The UUID the app passed to StoreKit at purchase, if any.
    public var appAccountToken: UUID?
    public var inAppOwnershipType: String?
    public var signedDate: Date?
    public var revocationReason: Int?
    public var revocationDate: Date?
    public var isUpgraded: Bool?
    public var offerType: OfferType?
    /// For an offer code, the offer's reference name.
    public var offerIdentifier: String?
    public var offerDiscountType: OfferDiscountType?
    /// ISO 8601 duration of the offer, e.g. `P1M`.
    public var offerPeriod: String?
    public var environment: AppStoreEnvironment
    /// Three-letter code of the App Store country or region.
    public var storefront: String?
    public var storefrontId: String?
    public var transactionReason: TransactionReason?
    /// ISO 4217 currency of `price`.
    public var currency: String?
    /// What the customer paid, in milliunits of `currency` (9990 is 9.99).
    public var price: Int64?
    public var appTransactionId: String?

    public init(transactionId: String, originalTransactionId: String, bundleId: String, productId: String,
                purchaseDate: Date, environment: AppStoreEnvironment) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.bundleId = bundleId
        self.productId = productId
        self.purchaseDate = purchaseDate
        self.environment = environment
    }
}

extension AppleName where Kind == JWSTransactionDecodedPayload.ProductTypeName {
    public static let autoRenewable = Self("Auto-Renewable Subscription")
    public static let nonRenewing = Self("Non-Renewing Subscription")
    public static let nonConsumable = Self("Non-Consumable")
    public static let consumable = Self("Consumable")
}

extension AppleName where Kind == JWSTransactionDecodedPayload.OfferDiscountTypeName {
    public static let freeTrial = Self("FREE_TRIAL")
    public static let payAsYouGo = Self("PAY_AS_YOU_GO")
    public static let payUpFront = Self("PAY_UP_FRONT")
    public static let oneTime = Self("ONE_TIME")
}

extension AppleName where Kind == JWSTransactionDecodedPayload.TransactionReasonName {
    public static let purchase = Self("PURCHASE")
    public static let renewal = Self("RENEWAL")
}

/// An App Store Server Notification V2, the decoded `signedPayload`.
public struct ResponseBodyV2DecodedPayload: Codable, Sendable, Equatable {
    public enum NotificationTypeName {}
    public enum SubtypeName {}
    public typealias NotificationType = AppleName<NotificationTypeName>
    public typealias Subtype = AppleName<SubtypeName>

    /// The app and purchase a notification is about.
    public struct NotificationData: Codable, Sendable, Equatable {
        /// The app's Apple id; sandbox notifications may leave it out.
        public var appAppleId: Int64?
        public var bundleId: String?
        public var bundleVersion: String?
        public var environment: AppStoreEnvironment?
        /// A `JWSTransactionDecodedPayload`, signed on its own.
        public var signedTransactionInfo: String?
        /// A renewal info document, signed on its own.
        public var signedRenewalInfo: String?
        public var status: Int?

        public init(appAppleId: Int64?, bundleId: String?, environment: AppStoreEnvironment?,
                    signedTransactionInfo: String? = nil, signedRenewalInfo: String? = nil) {
            self.appAppleId = appAppleId
            self.bundleId = bundleId
            self.environment = environment
            self.signedTransactionInfo = signedTransactionInfo
            self.signedRenewalInfo = signedRenewalInfo
        }
    }

    /// Sent instead of `data` for a request that covered many customers (renewal extensions).
    public struct Summary: Codable, Sendable, Equatable {
        public var appAppleId: Int64?
        public var bundleId: String?
        public var environment: AppStoreEnvironment?
        public var productId: String?
        public var requestIdentifier: String?
    }

    public var notificationType: NotificationType
    public var subtype: Subtype?
    /// Unique per notification; a retried delivery carries the same one.
    public var notificationUUID: String
    public var version: String?
    public var signedDate: Date?
    public var data: NotificationData?
    public var summary: Summary?

    public init(notificationType: NotificationType, subtype: Subtype? = nil, notificationUUID: String,
                signedDate: Date?, data: NotificationData?) {
        self.notificationType = notificationType
        self.subtype = subtype
        self.notificationUUID = notificationUUID
        self.version = "2.0"
        self.signedDate = signedDate
        self.data = data
    }
}

extension AppleName where Kind == ResponseBodyV2DecodedPayload.NotificationTypeName {
    /// A customer redeemed a promotional offer or an offer code.
    public static let offerRedeemed = Self("OFFER_REDEEMED")
    public static let subscribed = Self("SUBSCRIBED")
    public static let didRenew = Self("DID_RENEW")
    public static let didChangeRenewalStatus = Self("DID_CHANGE_RENEWAL_STATUS")
    public static let didFailToRenew = Self("DID_FAIL_TO_RENEW")
    public static let expired = Self("EXPIRED")
    public static let refund = Self("REFUND")
    public static let revoke = Self("REVOKE")
    public static let test = Self("TEST")
}

extension AppleName where Kind == ResponseBodyV2DecodedPayload.SubtypeName {
    public static let initialBuy = Self("INITIAL_BUY")
    public static let resubscribe = Self("RESUBSCRIBE")
    public static let upgrade = Self("UPGRADE")
    public static let downgrade = Self("DOWNGRADE")
}

extension JSONDecoder {
    /// Decodes Apple's signed payloads: dates are Unix milliseconds.
    public static let appleSignedData: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            Date(timeIntervalSince1970: Double(try decoder.singleValueContainer().decode(Int64.self)) / 1000)
        }
        return decoder
    }()
}

extension JSONEncoder {
    /// Encodes as Apple signs: dates as whole Unix milliseconds, keys sorted.
    public static let appleSignedData: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(Int64((date.timeIntervalSince1970 * 1000).rounded()))
        }
        return encoder
    }()
}
