import Foundation

// What the tests read from the API's answers (docs/api.md), as `Decodable` types: read with
// `HTTPClient.Response.decode(_:)`. Each holds only the fields some test reads; a field the answer
// may leave out is optional. Times stay text (`Timestamp.parse` reads them), so that a test can
// also compare them as the API wrote them.

/// `{"error": {"code", "message", "field"?}}`.
public struct ErrorBody: Decodable, Sendable {
    public struct Detail: Decodable, Sendable {
        public let code: String
        public let message: String?
        public let field: String?
    }
    public let error: Detail
}

/// `{"data": [...], "nextCursor"?}`: one page of a list.
public struct ListBody<Item: Decodable & Sendable>: Decodable, Sendable {
    public let data: [Item]
    public let nextCursor: String?
}

/// A money amount: `{"amount": "4.99", "currency": "USD"}`.
public struct MoneyBody: Decodable, Sendable, Equatable {
    public let amount: String
    public let currency: String
}

/// One entitlement: in a redemption, and in `GET /v1/me/entitlements`.
public struct EntitlementBody: Decodable, Sendable {
    public let entitlementId: String?
    public let expiresAt: String?
    public let sandbox: Bool?
    public let source: String?
}

/// `GET /v1/me/entitlements`.
public struct EntitlementsBody: Decodable, Sendable {
    public let data: [EntitlementBody]
    public let partial: Bool?

    public func entry(_ entitlementId: String) -> EntitlementBody? { data.first { $0.entitlementId == entitlementId } }
}

/// A redemption: `POST /v1/redemptions`, `GET /v1/redemptions/{id}`, a purchase's answer.
public struct RedemptionBody: Decodable, Sendable {
    public struct AppStore: Decodable, Sendable {
        public let appAccountToken: String?
        public let redemptionUrl: String?
    }
    public struct PlayStore: Decodable, Sendable {
        public let obfuscatedAccountId: String?
        public let offerId: String?
    }
    public let redemptionId: String
    public let status: String
    public let sandbox: Bool?
    public let accountId: String?
    public let appUserId: String?
    public let failureReason: String?
    public let completedAt: String?
    public let entitlement: EntitlementBody?
    public let pricePaid: MoneyBody?
    public let appStore: AppStore?
    public let playStore: PlayStore?
}

/// One of a coupon's store offers.
public struct StoreOfferBody: Decodable, Sendable {
    public let store: String?
    public let productId: String?
    public let basePlanId: String?
    public let offerId: String?
    public let state: String?
    public let customCode: String?
}

/// A coupon as operators read it.
public struct CouponBody: Decodable, Sendable {
    public let code: String
    public let kind: String?
    public let mode: String?
    public let remaining: Int?
    public let redeemedCount: Int?
    public let active: Bool?
    public let storeOffers: [StoreOfferBody]?
}

/// A webhook endpoint; `secret` only in the answer that made it.
public struct WebhookEndpointBody: Decodable, Sendable {
    public let id: String
    public let url: String?
    public let secret: String?
    public let active: Bool?
}

/// One line of `GET /v1/webhooks/{id}/deliveries`.
public struct DeliveryBody: Decodable, Sendable {
    public let id: String?
    public let webhookId: String?
    public let status: String?
    public let attempts: Int?
    public let lastStatusCode: Int?
    public let lastError: String?
    public let lastResponse: String?
}

/// An API key; `key` (the secret) only in the answer that made it.
public struct APIKeyBody: Decodable, Sendable {
    public let id: String
    public let name: String?
    public let role: String?
    public let mode: String?
    public let key: String?
}

/// A webhook event as the endpoint receives it: `{"type", "data"}`.
public struct WebhookEventBody<Payload: Decodable & Sendable>: Decodable, Sendable {
    public let type: String
    public let data: Payload
}

/// What `POST /v1/coupons/validate` answers.
public struct ValidationBody: Decodable, Sendable {
    public struct Offer: Decodable, Sendable {
        public let kind: String?
        public let percentOff: Int?
    }
    public struct AppStore: Decodable, Sendable { public let redemptionUrl: String? }
    public struct PlayStore: Decodable, Sendable { public let offerId: String? }
    public let valid: Bool
    public let reason: String?
    public let message: String?
    public let eligibleProductIds: [String]?
    public let basePlanIds: [String: [String]]?
    public let offer: Offer?
    public let appStore: AppStore?
    public let playStore: PlayStore?
}

/// What the gateway answers a store's notification (Apple's, or Google's push).
public struct StoreNotificationAnswer: Decodable, Sendable {
    public let recorded: Bool
    public let redemptionId: String?
}

/// An account and its new session: sign-up, sign-in, a member's acceptance.
public struct AccountSessionBody: Decodable, Sendable {
    public struct Account: Decodable, Sendable {
        public let id: String
        public let appUserId: String?
        public let email: String?
        public let emailVerified: Bool?
    }
    public struct Session: Decodable, Sendable {
        public let accessToken: String
        public let refreshToken: String?
        public let expiresAt: String?
    }
    public let account: Account
    public let session: Session
}
