import Foundation

/// The grant command: written to the coupons outbox with the reservation, pushed to
/// grants (PUSH/PULL) and re-sent until grants acknowledges it. Grants makes at most one grant
/// per redemption, so a repeated command is harmless.
public struct GrantCommand: BusRequest, Equatable {
    public static let type = "grants.grant"
    public typealias Response = Empty
    public var redemptionId: UUID
    public var accountId: UUID
    public var appUserId: String
    public var entitlementId: String
    public var duration: CouponDuration
    public var sandbox: Bool
    public var coupon: PublicCoupon
    public var platform: Platform
    public var productId: String?
    public var reservedAt: Date
    /// The mode of the redemption's coupon: its webhooks go to that mode's endpoints only.
    public var mode: Mode?
    /// The app of the redemption's coupon: the grant is that app's entitlement, and its webhooks
    /// go to that app's endpoints (`DefaultApp.of`: nil for the default app, and from earlier versions).
    public var app: UUID?
    public init(redemptionId: UUID, accountId: UUID, appUserId: String, entitlementId: String, duration: CouponDuration, sandbox: Bool,
                coupon: PublicCoupon, platform: Platform, productId: String?, reservedAt: Date, mode: Mode, app: UUID? = nil) {
        self.app = app == DefaultApp.id ? nil : app
        self.redemptionId = redemptionId
        self.accountId = accountId
        self.appUserId = appUserId
        self.entitlementId = entitlementId
        self.duration = duration
        self.sandbox = sandbox
        self.coupon = coupon
        self.platform = platform
        self.productId = productId
        self.reservedAt = reservedAt
        self.mode = mode
    }

    /// The coupon's mode. Commands of earlier versions carry none (coupons adds it to those still
    /// in its outbox, migration 10; grants may hold a few): a live redemption is of a live coupon,
    /// and a sandbox one is taken as test, so that it never reaches a live endpoint.
    public var couponMode: Mode { mode ?? (sandbox ? .test : .live) }
}

/// A discount redemption was completed by its store purchase: grants sends its webhook
/// (through the same outbox and pipeline as grant commands).
public struct RedemptionCompletedNotice: BusRequest, Equatable {
    public static let type = "grants.redemptionCompleted"
    public typealias Response = Empty
    public var redemption: RedemptionView
    public var coupon: PublicCoupon
    /// The coupon's mode: the webhook goes to that mode's endpoints only.
    public var mode: Mode?
    /// A Stripe checkout's subscription, for grants to tell RevenueCat (docs/stripe.md).
    public var stripeReceipt: StripeReceipt?
    /// The coupon's app: the webhook goes to that app's endpoints only (`DefaultApp.of`).
    public var app: UUID?
    public init(
        redemption: RedemptionView, coupon: PublicCoupon, mode: Mode, stripeReceipt: StripeReceipt? = nil,
        app: UUID? = nil
    ) {
        self.app = app == DefaultApp.id ? nil : app
        self.redemption = redemption
        self.coupon = coupon
        self.mode = mode
        self.stripeReceipt = stripeReceipt
    }

    /// The coupon's mode, for notices of earlier versions too (as `GrantCommand.couponMode`).
    public var couponMode: Mode { mode ?? (redemption.sandbox ? .test : .live) }
}

/// Grants tells coupons which outbox messages it has safely stored.
public struct OutboxAck: BusRequest {
    public static let type = "coupons.outboxAck"
    public typealias Response = Empty
    public var redemptionIds: [UUID]
    public var type: String
    public init(redemptionIds: [UUID], type: String) {
        self.redemptionIds = redemptionIds
        self.type = type
    }
}

/// Published by grants when redemptions reach their end (wakes long polls): one event per batch
/// of outcomes, where one per redemption cost a message and a decode each.
public struct RedemptionsSettled: BusEvent {
    public static let topic = "redemptions.settled"
    public var redemptions: [RedemptionSettled]
    public init(_ redemptions: [RedemptionSettled]) { self.redemptions = redemptions }
}

/// One redemption's end, in `RedemptionsSettled`. (Grants published it alone, as
/// `redemption.settled`, before batches: during an upgrade such a grants instance wakes no
/// long poll of a newer gateway; those answer when their wait ends, as the long poll allows.)
public struct RedemptionSettled: Codable, Sendable {
    public var redemptionId: UUID
    /// `completed` or `failed`.
    public var status: RedemptionStatus
    public init(redemptionId: UUID, status: RedemptionStatus) {
        self.redemptionId = redemptionId
        self.status = status
    }
}

public struct EntitlementView: Codable, Sendable, Equatable {
    public var entitlementId: String
    public var expiresAt: Date
    public var sandbox: Bool
    public var source: String
    public init(entitlementId: String, expiresAt: Date, sandbox: Bool, source: String) {
        self.entitlementId = entitlementId
        self.expiresAt = expiresAt
        self.sandbox = sandbox
        self.source = source
    }
}

public struct WebhookEndpointView: Codable, Sendable {
    public var id: UUID
    public var url: String
    public var events: [WebhookEventType]
    public var active: Bool
    /// The mode of the key that made it: it gets the events of that mode's coupons only.
    public var mode: Mode
    public var createdAt: Date
    public init(id: UUID, url: String, events: [WebhookEventType], active: Bool, mode: Mode, createdAt: Date) {
        self.id = id
        self.url = url
        self.events = events
        self.active = active
        self.mode = mode
        self.createdAt = createdAt
    }

    private enum CodingKeys: String, CodingKey { case id, url, events, active, mode, createdAt }

    /// A grants of an earlier version sends no mode: its endpoints were all live.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(id: try c.decode(UUID.self, forKey: .id), url: try c.decode(String.self, forKey: .url),
                  events: try c.decode([WebhookEventType].self, forKey: .events), active: try c.decode(Bool.self, forKey: .active),
                  mode: try c.decodeIfPresent(Mode.self, forKey: .mode) ?? .live, createdAt: try c.decode(Date.self, forKey: .createdAt))
    }
}

public struct WebhookDeliveryView: Codable, Sendable {
    public var id: UUID
    public var webhookId: String
    public var type: WebhookEventType
    public var status: WebhookDeliveryStatus
    public var attempts: Int
    public var lastStatusCode: Int?
    public var lastError: String?
    /// The start of the last answer's body (at most 1 KiB, as text).
    public var lastResponse: String?
    public var createdAt: Date
    public var deliveredAt: Date?
    public var nextAttemptAt: Date?
    public init(id: UUID, webhookId: String, type: WebhookEventType, status: WebhookDeliveryStatus, attempts: Int, lastStatusCode: Int?, lastError: String?,
                lastResponse: String?, createdAt: Date, deliveredAt: Date?, nextAttemptAt: Date?) {
        self.id = id; self.webhookId = webhookId; self.type = type; self.status = status; self.attempts = attempts
        self.lastStatusCode = lastStatusCode; self.lastError = lastError; self.lastResponse = lastResponse; self.createdAt = createdAt
        self.deliveredAt = deliveredAt; self.nextAttemptAt = nextAttemptAt
    }
}

public enum Grants {
    public struct Entitlements: BusRequest {
        public static let type = "grants.entitlements"
        public struct Response: Codable, Sendable {
            public var data: [EntitlementView]
            /// Under `revenuecat`, true when the store could not be read in time: `data` holds
            /// Redeem's own grants only.
            public var partial: Bool
            public init(data: [EntitlementView], partial: Bool = false) {
                self.data = data
                self.partial = partial
            }
            public init(from decoder: any Decoder) throws {
                let c = try decoder.container(keyedBy: CodingKeys.self)
                data = try c.decode([EntitlementView].self, forKey: .data)
                partial = try c.decodeIfPresent(Bool.self, forKey: .partial) ?? false
            }
            private enum CodingKeys: String, CodingKey { case data, partial }
        }
        public var appUserId: String
        /// Only this app's entitlements: the app the end user's request names (`DefaultApp.of`).
        public var app: UUID?
        public init(appUserId: String, app: UUID? = nil) {
            self.appUserId = appUserId
            self.app = app
        }
    }

    public struct CreateWebhook: BusRequest {
        public static let type = "grants.createWebhook"
        /// Who asks, for the audit log (nil from a gateway of an earlier version).
        public var actor: AuditActor? = nil
        public struct Response: Codable, Sendable {
            public var endpoint: WebhookEndpointView
            public var secret: String
            public init(endpoint: WebhookEndpointView, secret: String) {
                self.endpoint = endpoint
                self.secret = secret
            }
        }
        public var url: String
        /// As the operator wrote them: grants checks each is a `WebhookEventType`, after the URL.
        public var events: [String]
        /// The endpoint's mode: the creating key's (`Mode.of`).
        public var mode: Mode?
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public init(url: String, events: [String], mode: Mode, app: UUID) {
            self.url = url
            self.events = events
            self.mode = mode
            self.app = app
        }
    }

    /// The endpoints of one mode (`Mode.of`) not deleted, newest first, a page at a time (`Keyset`).
    public struct ListWebhooks: BusRequest {
        public static let type = "grants.listWebhooks"
        public typealias Response = Page<WebhookEndpointView>
        /// nil (a caller from before pages): the default page size.
        public var limit: Int?
        public var cursor: String?
        public var mode: Mode?
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public init(limit: Int, cursor: String?, mode: Mode, app: UUID) {
            self.limit = limit
            self.cursor = cursor
            self.mode = mode
            self.app = app
        }
    }

    /// Queues a `webhook.test` event to one active endpoint of `mode`: its delivery, signed and
    /// retried like any other.
    public struct TestWebhook: BusRequest {
        public static let type = "grants.testWebhook"
        public typealias Response = WebhookDeliveryView
        public var id: UUID
        public var mode: Mode?
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public init(id: UUID, mode: Mode, app: UUID) {
            self.id = id
            self.mode = mode
            self.app = app
        }
    }

    /// Deletes an endpoint of `mode` (`Mode.of`); `notFound` for one of the other mode.
    public struct DeleteWebhook: BusRequest {
        public static let type = "grants.deleteWebhook"
        /// Who asks, for the audit log (nil from a gateway of an earlier version).
        public var actor: AuditActor? = nil
        public typealias Response = Empty
        public var id: UUID
        public var mode: Mode?
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public init(id: UUID, mode: Mode, app: UUID) {
            self.id = id
            self.mode = mode
            self.app = app
        }
    }

    /// Changes an endpoint of `mode` (`Mode.of`): its URL (checked as at creation), its events and
    /// whether it is `enabled` (`active`), each left as it is when nil. Switching on an endpoint a
    /// 410 disabled clears the reason. `notFound` for an endpoint of the other mode or deleted.
    public struct UpdateWebhook: BusRequest {
        public static let type = "grants.updateWebhook"
        public typealias Response = WebhookEndpointView
        /// Who asks, for the audit log.
        public var actor: AuditActor? = nil
        public var id: UUID
        public var mode: Mode?
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public var url: String?
        /// As the operator wrote them: grants checks each is a `WebhookEventType`.
        public var events: [String]?
        public var enabled: Bool?
        public init(id: UUID, mode: Mode, app: UUID, url: String?, events: [String]?, enabled: Bool?) {
            self.id = id
            self.mode = mode
            self.app = app
            self.url = url
            self.events = events
            self.enabled = enabled
        }
    }

    /// Sends a delivery again: it is due now, as a new attempt of the same event (the same
    /// `webhook-id`), whatever it came to. `notFound` for a delivery not of this endpoint of
    /// `mode`; `invalidState` while the endpoint is disabled.
    public struct RetryDelivery: BusRequest {
        public static let type = "grants.retryDelivery"
        public typealias Response = WebhookDeliveryView
        public var endpointId: UUID
        public var deliveryId: UUID
        public var mode: Mode?
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public init(endpointId: UUID, deliveryId: UUID, mode: Mode, app: UUID) {
            self.endpointId = endpointId
            self.deliveryId = deliveryId
            self.mode = mode
            self.app = app
        }
    }

    /// Gives an endpoint a new secret, answered once. Deliveries carry a signature with each of the
    /// two secrets until `previousSecretExpiresAt` (24 h), then with the new one only.
    public struct RotateWebhookSecret: BusRequest {
        public static let type = "grants.rotateWebhookSecret"
        /// Who asks, for the audit log.
        public var actor: AuditActor? = nil
        public struct Response: Codable, Sendable {
            public var endpoint: WebhookEndpointView
            public var secret: String
            public var previousSecretExpiresAt: Date
            public init(endpoint: WebhookEndpointView, secret: String, previousSecretExpiresAt: Date) {
                self.endpoint = endpoint
                self.secret = secret
                self.previousSecretExpiresAt = previousSecretExpiresAt
            }
        }
        public var id: UUID
        public var mode: Mode?
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public init(id: UUID, mode: Mode, app: UUID) {
            self.id = id
            self.mode = mode
            self.app = app
        }
    }

    /// An endpoint's deliveries, newest first, a page at a time (`Keyset`); `notFound` for an
    /// endpoint of the other mode (`Mode.of`).
    public struct Deliveries: BusRequest {
        public static let type = "grants.deliveries"
        public typealias Response = Page<WebhookDeliveryView>
        public var endpointId: UUID
        public var limit: Int
        public var cursor: String?
        public var mode: Mode?
        /// The app of the key asking (`DefaultApp.of`: nil from a gateway of an earlier version).
        public var app: UUID?
        public init(endpointId: UUID, mode: Mode, app: UUID, limit: Int, cursor: String?) {
            self.endpointId = endpointId
            self.mode = mode
            self.app = app
            self.limit = limit
            self.cursor = cursor
        }
    }
}

extension Grants {
    /// A transaction as Apple signs it, fetched from the App Store Server API (gateway → grants):
    /// production first, then the sandbox. Grants does not verify it; the gateway verifies it
    /// like any signed transaction. `notFound` when neither environment knows the id, `invalid`
    /// for an id that is not Apple's, `unavailable` when the App Store Server API is not
    /// configured or did not answer in time.
    /// A Google Play subscription purchase read from the Play Developer API
    /// (`purchases.subscriptionsv2.get`) and acknowledged there before the answer (Google refunds
    /// one left unacknowledged for three days; a caller that gets no answer sends it again, and an
    /// acknowledged purchase is not acknowledged twice). The answer holds only what Google said.
    /// `notFound` for a token Google does not know, `unavailable` when Google Play is not connected
    /// or did not answer in time.
    public struct PlayPurchase: BusRequest {
        public static let type = "grants.playPurchase"
        public struct Response: Codable, Sendable, Equatable {
            public var transaction: VerifiedStoreTransaction
            /// The app whose Google Play settings read it; nil: the default app.
            public var app: UUID?
            public init(transaction: VerifiedStoreTransaction, app: UUID? = nil) {
                self.transaction = transaction
                self.app = app
            }
        }
        public var purchaseToken: String
        /// The app whose Google Play settings read it: nil (or the default app) the environment's,
        /// another app its own live `googleplay` settings (docs/apps.md); `invalid` on
        /// `purchaseToken` when it has none.
        public var app: UUID?
        /// A push's package name, when it is not the environment's (`app` nil): read with the
        /// settings of the one app whose live Google Play settings name it; `notFound` when none
        /// or several do.
        public var packageName: String?
        public init(purchaseToken: String, app: UUID? = nil, packageName: String? = nil) {
            self.purchaseToken = purchaseToken
            self.app = app
            self.packageName = packageName
        }
    }

    public struct AppleTransaction: BusRequest {
        public static let type = "grants.appleTransaction"
        public struct Response: Codable, Sendable, Equatable {
            /// `signedTransactionInfo`: a JWS (ES256, `x5c` chain).
            public var signedTransaction: String
            public init(signedTransaction: String) { self.signedTransaction = signedTransaction }
        }
        public var transactionId: String
        public init(transactionId: String) { self.transactionId = transactionId }
    }
}

extension Grants {
    /// What the entitlement provider knows of a holder: whether it holds a store
    /// purchase, the store's management URL, and its entitlements from any store. Under `local`
    /// the ledger holds only Redeem's grants: no purchase, no URL, no entries.
    public struct StoreView: BusRequest {
        public static let type = "grants.storeView"
        public struct Response: Codable, Sendable, Equatable {
            public var holdsStorePurchase: Bool
            public var managementUrl: String?
            /// Active entitlements the stores (and promotional grants not Redeem's) hold.
            public var entitlements: [EntitlementView]
            /// The Google Play subscription products the holder holds now (RevenueCat's
            /// `play_store` subscriptions not expired or refunded, by Play product id, sorted);
            /// nil from a grants of an earlier version.
            public var playSubscriptions: [String]?
            public init(holdsStorePurchase: Bool, managementUrl: String?, entitlements: [EntitlementView], playSubscriptions: [String]? = nil) {
                self.holdsStorePurchase = holdsStorePurchase
                self.managementUrl = managementUrl
                self.entitlements = entitlements
                self.playSubscriptions = playSubscriptions
            }
        }
        public var appUserId: String
        /// Ask the provider now, not a cached answer (a link decides on it).
        public var fresh: Bool
        /// The app whose view it is: nil (or the default app) the environment's provider, another
        /// app its own live RevenueCat project (none: no purchase, no URL), with a Google Play
        /// subscription's page in the app's own package (docs/apps.md).
        public var app: UUID?
        public init(appUserId: String, fresh: Bool, app: UUID? = nil) {
            self.appUserId = appUserId
            self.fresh = fresh
            self.app = app
        }
    }

    /// Moves a holder's grants to the id its account now logs in with: the ledger's
    /// rows follow, the provider is granted each active period again with the same end, commands
    /// still naming the old id are stored under the new one, and `account.appUserIdChanged` goes
    /// out. Idempotent.
    public struct MoveHolder: BusRequest {
        public static let type = "grants.moveHolder"
        public typealias Response = Empty
        public var accountId: UUID
        public var from: String
        public var to: String
        public init(accountId: UUID, from: String, to: String) {
            self.accountId = accountId
            self.from = from
            self.to = to
        }
    }
}
