import Core
import Foundation
import Outbound
import FoundationNetworking
#if canImport(FoundationNetworking)
#endif

/// RevenueCat's v1 customer, `GET {base}/v1/subscribers/{app_user_id}` (RevenueCat's REST API v1): the parts
/// Redeem reads. Expired entitlements are included by RevenueCat; `expires_date` null is lifetime.
struct RevenueCatSubscriber: Decodable, Sendable, Equatable {
    struct Entitlement: Decodable, Sendable, Equatable {
        var expires_date: String?
        var product_identifier: String?
    }
    struct Purchase: Decodable, Sendable, Equatable {
        var store: String?
        var is_sandbox: Bool?
        var expires_date: String?
        var grace_period_expires_date: String?
        var refunded_at: String?
        init(store: String?, is_sandbox: Bool?, expires_date: String? = nil, grace_period_expires_date: String? = nil, refunded_at: String? = nil) {
            self.store = store
            self.is_sandbox = is_sandbox
            self.expires_date = expires_date
            self.grace_period_expires_date = grace_period_expires_date
            self.refunded_at = refunded_at
        }
    }
    var entitlements: [String: Entitlement]
    var subscriptions: [String: Purchase]
    var non_subscriptions: [String: [Purchase]]
    var management_url: String?

    private struct Envelope: Decodable { var subscriber: RevenueCatSubscriber }
    private enum Keys: String, CodingKey { case entitlements, subscriptions, non_subscriptions, management_url }

    init(entitlements: [String: Entitlement] = [:], subscriptions: [String: Purchase] = [:], non_subscriptions: [String: [Purchase]] = [:],
         management_url: String? = nil) {
        self.entitlements = entitlements
        self.subscriptions = subscriptions
        self.non_subscriptions = non_subscriptions
        self.management_url = management_url
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        entitlements = try c.decodeIfPresent([String: Entitlement].self, forKey: .entitlements) ?? [:]
        subscriptions = try c.decodeIfPresent([String: Purchase].self, forKey: .subscriptions) ?? [:]
        non_subscriptions = try c.decodeIfPresent([String: [Purchase]].self, forKey: .non_subscriptions) ?? [:]
        management_url = try c.decodeIfPresent(String.self, forKey: .management_url)
    }

    /// The `subscriber` of a `GET /v1/subscribers/{id}` answer.
    static func decode(_ data: Data) throws -> RevenueCatSubscriber {
        try JSONDecoder().decode(Envelope.self, from: data).subscriber
    }

    /// The lifetime entitlement's expiry as Redeem writes it: the last instant ISO 8601's
    /// four-digit years write (as the ledger's own periods end at the latest).
    static let lifetime = Date(timeIntervalSince1970: 253_402_300_799.999)

    /// Whether anything was bought at a store under this id (a subscription or a one-time
    /// purchase anywhere but `promotional`, expired or not): those purchases sit under this id,
    /// so it must stay the account's `appUserId`.
    var holdsStorePurchase: Bool {
        subscriptions.values.contains { $0.store != "promotional" }
            || non_subscriptions.values.joined().contains { $0.store != "promotional" }
    }

    /// The Google Play subscription products held now, sorted: `play_store` subscriptions not
    /// refunded whose expiry (or grace period) is still ahead, by their Play product id. RevenueCat
    /// keys a Play subscription by its product id, with the base plan as
    /// `product_plan_identifier`, or as `productId:basePlanId`; either way the product is the part
    /// before `:` (Play takes one purchase per subscription product, whatever its base plan).
    func activePlayProducts(now: Date) -> [String] {
        let held = subscriptions.compactMap { id, s -> String? in
            guard s.store == "play_store", s.refunded_at == nil else { return nil }
            let ends = [s.expires_date, s.grace_period_expires_date].compactMap { $0.flatMap(Timestamp.parse) }
            guard s.expires_date == nil || ends.contains(where: { $0 > now }) else { return nil }
            return String(id.prefix { $0 != ":" })
        }
        return Array(Set(held)).sorted()
    }

    /// The active entitlements with the store behind each (`promotional` for RevenueCat's
    /// promotional grants, `rc_promo_…` products), as of `now`.
    func activeEntitlements(now: Date) -> [EntitlementView] {
        entitlements.compactMap { id, e -> EntitlementView? in
            let expires: Date
            if let text = e.expires_date {
                guard let d = Timestamp.parse(text), d > now else { return nil }
                expires = d
            } else {
                expires = Self.lifetime
            }
            let product = e.product_identifier ?? ""
            // A Play entitlement names `productId:basePlanId`; its subscription is keyed by the product.
            let purchase = subscriptions[product] ?? subscriptions[String(product.prefix { $0 != ":" })] ?? non_subscriptions[product]?.last
            let source = purchase?.store ?? (product.hasPrefix("rc_promo") ? "promotional" : "revenuecat")
            return EntitlementView(entitlementId: id, expiresAt: expires, sandbox: purchase?.is_sandbox ?? false, source: source)
        }.sorted { ($0.entitlementId, $0.source) < ($1.entitlementId, $1.source) }
    }
}

extension RevenueCat {
    /// What a subscriber read came to.
    enum SubscriberAnswer: Sendable, Equatable {
        case found(RevenueCatSubscriber)
        /// No answer in time, a non-2xx status, or a body that is not a subscriber.
        case unavailable(String)
    }

    /// `GET {base}/v1/subscribers/{id}`, without `X-Platform` (an informational read), bounded by
    /// `timeout`.
    func subscriber(appUserId: String, timeout: TimeInterval) async -> SubscriberAnswer {
        let path = "/v1/subscribers/\(Self.pathComponent(appUserId))"
        guard let url = URL(string: base.absoluteString.trimmingCharacters(in: CharacterSet(charactersIn: "/")) + path) else { return .unavailable("bad URL") }
        var req = URLRequest(url: url, timeoutInterval: timeout)
        req.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization")
        do {
            let (data, resp) = try await session.outboundData(for: req, dependency: "revenuecat")
            guard let http = resp as? HTTPURLResponse else { return .unavailable("no HTTP answer") }
            guard (200..<300).contains(http.statusCode) else { return .unavailable("status \(http.statusCode)") }
            return .found(try RevenueCatSubscriber.decode(data))
        } catch {
            return .unavailable("unreachable, timed out or not a subscriber")
        }
    }
}
