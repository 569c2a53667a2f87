import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The operator's client: coupons, their redemptions and CSV export, API keys, webhooks, plans,
/// members and the audit log, with a secret API key (`sk_live_…` or `sk_test_…`). For servers and
/// tools (the `redeem` command), never for an app: an API key must not ship in one.
///
/// Each call is `async throws`, cancellable and bounded by `timeout`; a refusal throws
/// `RedeemError` with the server's code, message, field and request id.
public struct OperatorClient: Sendable {
    let transport: Transport
    let apiKey: String

    /// A client of the gateway at `baseURL` with `apiKey`.
    public init(baseURL: URL, apiKey: String, timeout: TimeInterval = 30, urlSession: URLSession = .shared) {
        transport = Transport(baseURL: baseURL, session: urlSession, timeout: timeout)
        self.apiKey = apiKey
    }

    private func send(_ request: APIRequest) async throws -> APIResponse {
        try await transport.send(request, token: apiKey)
    }

    private static func segment(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-_."))) ?? text
    }

    private static func id(_ id: UUID) -> String { id.uuidString.lowercased() }

    // MARK: - Coupons

    /// Creates a coupon (`POST /v1/coupons`); with `dryRun` only checks it and shows its store limits.
    public func createCoupon(_ input: CouponInput, dryRun: Bool = false) async throws -> Coupon {
        var request = try APIRequest("POST", "/v1/coupons", json: input)
        if dryRun { request.query = [URLQueryItem(name: "dryRun", value: "true")] }
        return try await send(request).decode(Coupon.self)
    }

    /// One page of coupons, newest first (`GET /v1/coupons`), optionally only active or inactive ones.
    public func coupons(active: Bool? = nil, limit: Int? = nil, cursor: String? = nil) async throws -> Page<Coupon> {
        var query = pageQuery(limit: limit, cursor: cursor)
        if let active { query.append(URLQueryItem(name: "active", value: String(active))) }
        return try await send(APIRequest("GET", "/v1/coupons", query: query)).decode(Page<Coupon>.self)
    }

    /// One coupon with its counts (`GET /v1/coupons/{code}`).
    public func coupon(_ code: String) async throws -> Coupon {
        try await send(APIRequest("GET", "/v1/coupons/\(Self.segment(code))")).decode(Coupon.self)
    }

    /// Changes a coupon (`PATCH /v1/coupons/{code}`).
    public func updateCoupon(_ code: String, _ patch: CouponPatch) async throws -> Coupon {
        try await send(try APIRequest("PATCH", "/v1/coupons/\(Self.segment(code))", json: patch)).decode(Coupon.self)
    }

    /// Deactivates a coupon (`DELETE /v1/coupons/{code}`); its redemptions are kept.
    public func deactivateCoupon(_ code: String) async throws {
        _ = try await send(APIRequest("DELETE", "/v1/coupons/\(Self.segment(code))"))
    }

    // MARK: - Redemptions

    /// One page of a coupon's redemptions, newest first (`GET /v1/coupons/{code}/redemptions`).
    public func redemptions(of code: String, limit: Int? = nil, cursor: String? = nil) async throws -> Page<Redemption> {
        try await send(APIRequest("GET", "/v1/coupons/\(Self.segment(code))/redemptions", query: pageQuery(limit: limit, cursor: cursor)))
            .decode(Page<Redemption>.self)
    }

    /// Every redemption of a coupon as CSV (`Accept: text/csv`), oldest first, with the header row.
    public func exportRedemptionsCSV(of code: String, timeout: TimeInterval? = nil) async throws -> Data {
        var request = APIRequest("GET", "/v1/coupons/\(Self.segment(code))/redemptions", timeout: timeout)
        request.accept = "text/csv"
        return try await send(request).data
    }

    /// Makes `count` unique single-use codes of a coupon (`POST /v1/coupons/{code}/codes`, an admin
    /// key), each `prefix-XXXX-XXXX-XXXX-XXXX` when a prefix is given. The answer holds no code:
    /// fetch them once with `takeCodesCSV(of:)`.
    public func createCodes(of code: String, count: Int, prefix: String? = nil, timeout: TimeInterval? = nil)
        async throws -> CreatedCodes
    {
        struct Body: Encodable {
            var count: Int
            var prefix: String?
        }
        return try await send(
            try APIRequest(
                "POST", "/v1/coupons/\(Self.segment(code))/codes", json: Body(count: count, prefix: prefix),
                timeout: timeout)
        ).decode(CreatedCodes.self)
    }

    /// The CSV of the coupon's new unique codes (`GET /v1/coupons/{code}/codes.csv`): once; a
    /// second take is `downloadGone`.
    public func takeCodesCSV(of code: String, timeout: TimeInterval? = nil) async throws -> Data {
        var request = APIRequest("GET", "/v1/coupons/\(Self.segment(code))/codes.csv", timeout: timeout)
        request.accept = "text/csv"
        return try await send(request).data
    }

    /// One redemption (`GET /v1/redemptions/{id}`), of this key's mode.
    public func redemption(_ id: UUID) async throws -> Redemption {
        try await send(APIRequest("GET", "/v1/redemptions/\(Self.id(id))")).decode(Redemption.self)
    }

    /// Confirms a discount's purchase by hand (a support key; audited):
    /// `POST /v1/redemptions/{id}/purchase {pricePaid, storeTransactionId}`.
    public func confirmPurchase(_ id: UUID, pricePaid: Money, storeTransactionId: String) async throws -> Redemption {
        struct Body: Encodable { var pricePaid: Money; var storeTransactionId: String }
        return try await send(try APIRequest("POST", "/v1/redemptions/\(Self.id(id))/purchase",
                                             json: Body(pricePaid: pricePaid, storeTransactionId: storeTransactionId))).decode(Redemption.self)
    }

    // MARK: - API keys

    /// Creates an API key (`POST /v1/api-keys`); the secret is in the answer only. `mode` left
    /// nil is this key's own.
    public func createAPIKey(name: String, role: Role, mode: Mode? = nil) async throws -> CreatedAPIKey {
        struct Body: Encodable { var name: String; var role: Role; var mode: Mode? }
        return try await send(try APIRequest("POST", "/v1/api-keys", json: Body(name: name, role: role, mode: mode))).decode(CreatedAPIKey.self)
    }

    /// One page of API keys, newest first (`GET /v1/api-keys`).
    public func apiKeys(limit: Int? = nil, cursor: String? = nil) async throws -> Page<APIKey> {
        try await send(APIRequest("GET", "/v1/api-keys", query: pageQuery(limit: limit, cursor: cursor))).decode(Page<APIKey>.self)
    }

    /// Revokes an API key (`DELETE /v1/api-keys/{id}`).
    public func revokeAPIKey(_ id: UUID) async throws {
        _ = try await send(APIRequest("DELETE", "/v1/api-keys/\(Self.id(id))"))
    }

    // MARK: - Webhooks

    /// Adds a webhook endpoint (`POST /v1/webhooks`); the signing secret is in the answer only.
    public func createWebhook(url: String, events: [String]) async throws -> CreatedWebhook {
        struct Body: Encodable { var url: String; var events: [String] }
        return try await send(try APIRequest("POST", "/v1/webhooks", json: Body(url: url, events: events))).decode(CreatedWebhook.self)
    }

    /// One page of webhook endpoints, newest first (`GET /v1/webhooks`).
    public func webhooks(limit: Int? = nil, cursor: String? = nil) async throws -> Page<WebhookEndpoint> {
        try await send(APIRequest("GET", "/v1/webhooks", query: pageQuery(limit: limit, cursor: cursor))).decode(Page<WebhookEndpoint>.self)
    }

    /// Removes a webhook endpoint (`DELETE /v1/webhooks/{id}`).
    public func deleteWebhook(_ id: UUID) async throws {
        _ = try await send(APIRequest("DELETE", "/v1/webhooks/\(Self.id(id))"))
    }

    /// Sends a `webhook.test` event to an endpoint (`POST /v1/webhooks/{id}/test`): its delivery,
    /// signed and retried like any other, which the delivery log then shows.
    public func testWebhook(_ id: UUID) async throws -> WebhookDelivery {
        try await send(APIRequest("POST", "/v1/webhooks/\(Self.id(id))/test")).decode(WebhookDelivery.self)
    }

    /// Sends a delivery again (`POST /v1/webhooks/{id}/deliveries/{deliveryId}/retry`): the same
    /// event, with the same `webhook-id`, as a new attempt. Answers the delivery, due now.
    public func retryDelivery(_ delivery: UUID, of webhook: UUID) async throws -> WebhookDelivery {
        try await send(APIRequest("POST", "/v1/webhooks/\(Self.id(webhook))/deliveries/\(Self.id(delivery))/retry"))
            .decode(WebhookDelivery.self)
    }

    /// One page of an endpoint's delivery log, newest first (`GET /v1/webhooks/{id}/deliveries`).
    public func deliveries(of webhook: UUID, limit: Int? = nil, cursor: String? = nil) async throws -> Page<WebhookDelivery> {
        try await send(APIRequest("GET", "/v1/webhooks/\(Self.id(webhook))/deliveries", query: pageQuery(limit: limit, cursor: cursor)))
            .decode(Page<WebhookDelivery>.self)
    }

    // MARK: - Plans

    /// One page of plans, newest first (`GET /v1/plans`).
    public func plans(limit: Int? = nil, cursor: String? = nil) async throws -> Page<Plan> {
        try await send(APIRequest("GET", "/v1/plans", query: pageQuery(limit: limit, cursor: cursor))).decode(Page<Plan>.self)
    }

    /// One plan (`GET /v1/plans/{productId}`).
    public func plan(_ productId: String) async throws -> Plan {
        try await send(APIRequest("GET", "/v1/plans/\(Self.segment(productId))")).decode(Plan.self)
    }

    /// Registers a plan (`POST /v1/plans`), optionally with its App Store subscription id.
    public func createPlan(productId: String, name: String, appStoreSubscriptionId: String? = nil) async throws -> Plan {
        struct Body: Encodable { var productId: String; var name: String; var appStore: Plan.AppStore? }
        return try await send(try APIRequest("POST", "/v1/plans", json: Body(productId: productId, name: name,
                                                                             appStore: appStoreSubscriptionId.map(Plan.AppStore.init))))
            .decode(Plan.self)
    }

    // MARK: - Members and the audit log

    /// Invites a member (`POST /v1/members`): the one-time invite URL is in the answer only.
    public func inviteMember(email: String, role: Role) async throws -> CreatedMemberInvite {
        struct Body: Encodable {
            var email: String
            var role: Role
        }
        return try await send(try APIRequest("POST", "/v1/members", json: Body(email: email, role: role)))
            .decode(CreatedMemberInvite.self)
    }

    /// One page of members, newest first (`GET /v1/members`).
    public func members(limit: Int? = nil, cursor: String? = nil) async throws -> Page<Member> {
        try await send(APIRequest("GET", "/v1/members", query: pageQuery(limit: limit, cursor: cursor)))
            .decode(Page<Member>.self)
    }

    /// Changes a member's role (`PATCH /v1/members/{id}`); their sessions end.
    public func updateMember(_ id: UUID, role: Role) async throws -> Member {
        struct Body: Encodable { var role: Role }
        return try await send(try APIRequest("PATCH", "/v1/members/\(Self.id(id))", json: Body(role: role)))
            .decode(Member.self)
    }

    /// Removes a member (`DELETE /v1/members/{id}`); the account stays.
    public func removeMember(_ id: UUID) async throws {
        _ = try await send(APIRequest("DELETE", "/v1/members/\(Self.id(id))"))
    }

    /// One page of pending invitations, newest first (`GET /v1/members/invites`).
    public func memberInvites(limit: Int? = nil, cursor: String? = nil) async throws -> Page<MemberInvite> {
        try await send(APIRequest("GET", "/v1/members/invites", query: pageQuery(limit: limit, cursor: cursor)))
            .decode(Page<MemberInvite>.self)
    }

    /// Revokes a pending invitation (`DELETE /v1/members/invites/{id}`): its URL makes no member.
    public func revokeMemberInvite(_ id: UUID) async throws {
        _ = try await send(APIRequest("DELETE", "/v1/members/invites/\(Self.id(id))"))
    }

    /// One page of the audit log in the key's mode, newest first (`GET /v1/audit`).
    public func auditLog(_ filter: AuditFilter = AuditFilter(), limit: Int? = nil, cursor: String? = nil)
        async throws -> Page<AuditEntry>
    {
        var query = pageQuery(limit: limit, cursor: cursor)
        let named: [(String, String?)] = [
            ("objectType", filter.objectType), ("objectId", filter.objectId),
            ("actorId", filter.actorId.map(Self.id)), ("action", filter.action)
        ]
        for (name, value) in named { if let value { query.append(URLQueryItem(name: name, value: value)) } }
        return try await send(APIRequest("GET", "/v1/audit", query: query)).decode(Page<AuditEntry>.self)
    }

    // MARK: - Every page

    /// Every item of a list, following `nextCursor` page after page.
    public func all<Item>(_ page: (String?) async throws -> Page<Item>) async throws -> [Item] {
        var items: [Item] = []
        var cursor: String?
        repeat {
            let p = try await page(cursor)
            items += p.data
            cursor = p.nextCursor
        } while cursor != nil
        return items
    }
}
