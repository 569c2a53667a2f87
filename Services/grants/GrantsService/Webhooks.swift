import Core
import Cryptography
import Database
import Foundation
import Glibc

/// Operator webhooks, signed per Standard Webhooks.
enum Webhooks {
    /// `whsec_` + base64 of 24 random bytes; the HMAC key is the decoded bytes.
    static func newSecret() -> String { "whsec_" + Data(Crypto.randomBytes(24)).base64EncodedString() }

    static func key(fromSecret secret: String) -> [UInt8] {
        Array(Data(base64Encoded: String(secret.dropFirst("whsec_".count))) ?? Data())
    }

    /// `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`.
    static func signature(secret: String, id: String, timestamp: Int, body: Data) -> String {
        let signed = Array("\(id).\(timestamp).".utf8) + Array(body)
        return "v1," + Data(Crypto.hmacSHA256(key: key(fromSecret: secret), signed)).base64EncodedString()
    }

    /// The `webhook-id` of an event: one per event, the same on every endpoint and every retry.
    static func eventId(type: WebhookEventType, redemption: UUID) -> String {
        "msg_" + Crypto.sha256(Array("\(type.rawValue)|\(redemption.lowercasedString)".utf8)).hex.prefix(32)
    }

    // MARK: - Destinations

    /// Where a delivery goes: the URL as checked, and the one address it connects to.
    struct Destination: Sendable, Equatable {
        let url: URL
        /// `https` or `http`, the only scheme the connection may use.
        let scheme: String
        /// Numeric IPv4 or IPv6 text.
        let address: String
        let port: Int
    }

    /// The rule for one address: https to a public address, always; http or https to a private or
    /// loopback one, only with `allowPrivate` (REDEEM_WEBHOOK_ALLOW_PRIVATE); plain http to a public
    /// one, never. Answers why not, or nil when the address may be used.
    static func refusal(scheme: String, address: String, allowPrivate: Bool) -> String? {
        if isPrivate(address) { return allowPrivate ? nil : "url resolves to a private or loopback address (\(address))" }
        return scheme == "https" ? nil : "url must use https to reach a public address (\(address))"
    }

    /// Checks a URL and resolves its host, once: before it is stored, and before each delivery,
    /// which then connects to the address answered here and resolves nothing again (no DNS
    /// rebinding between the check and the connect). Every address the name resolves to must pass
    /// `refusal` (a name that answers with a private address among public ones is refused, rather
    /// than trusting the order), and the first, in the resolver's order of preference, is used.
    static func destination(_ text: String, allowPrivate: Bool, resolve: (String) -> [String] = resolve) throws -> Destination {
        let invalid = { (why: String) in ServiceError(.invalid, why, field: "url") }
        guard text.count <= 2000, let url = URL(string: text), let scheme = url.scheme?.lowercased(), var host = url.host, !host.isEmpty else {
            throw invalid("url must be an absolute https URL")
        }
        guard scheme == "https" || (allowPrivate && scheme == "http") else { throw invalid("url must use https") }
        guard url.user == nil, url.password == nil else { throw invalid("url must not carry credentials") }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let addresses = resolve(host.lowercased())
        guard let first = addresses.first else { throw invalid("url's host does not resolve") }
        if let why = addresses.lazy.compactMap({ refusal(scheme: scheme, address: $0, allowPrivate: allowPrivate) }).first {
            throw invalid(why)
        }
        return Destination(url: url, scheme: scheme, address: first, port: url.port ?? (scheme == "https" ? 443 : 80))
    }

    /// Checks a URL before it is stored (see `destination`).
    static func checkURL(_ text: String, allowPrivate: Bool) throws -> URL {
        try destination(text, allowPrivate: allowPrivate).url
    }

    static func resolve(_ host: String) -> [String] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &result) == 0, let first = result else { return [] }
        defer { freeaddrinfo(result) }
        var out: [String] = []
        var p: UnsafeMutablePointer<addrinfo>? = first
        while let ai = p {
            var buf = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if getnameinfo(ai.pointee.ai_addr, ai.pointee.ai_addrlen, &buf, socklen_t(buf.count), nil, 0, NI_NUMERICHOST) == 0 {
                out.append(buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
            }
            p = ai.pointee.ai_next
        }
        return out
    }

    /// Whether an address (IPv4 or IPv6 text) is one a webhook must not reach: loopback, private,
    /// link-local, site-local, shared, IETF-reserved, benchmarking, multicast or unspecified, also when an IPv6 address carries such an IPv4
    /// address (mapped, compatible, NAT64, 6to4) or hides one (Teredo). Unparseable text counts as
    /// private.
    static func isPrivate(_ address: String) -> Bool {
        var v4 = in_addr()
        if inet_pton(AF_INET, address, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { isPrivate(v4: Array($0)) }
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, address, &v6) == 1 else { return true }
        let b = withUnsafeBytes(of: &v6) { Array($0) }
        let zeros = { (r: Range<Int>) in b[r].allSatisfy { $0 == 0 } }
        if zeros(0..<15) && b[15] <= 1 { return true }  // :: and ::1
        if b[0] & 0xfe == 0xfc || b[0] == 0xff { return true }  // fc00::/7, ff00::/8
        if b[0] == 0xfe && b[1] & 0x80 == 0x80 { return true }  // fe80::/10 link-local, fec0::/10 (deprecated) site-local
        if zeros(0..<10) && ((b[10] == 0xff && b[11] == 0xff) || (b[10] == 0 && b[11] == 0)) { return isPrivate(v4: Array(b[12..<16])) }  // mapped, compatible
        if b[0..<12] == [0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0] { return isPrivate(v4: Array(b[12..<16])) }  // NAT64 64:ff9b::/96
        if b[0..<6] == [0, 0x64, 0xff, 0x9b, 0, 1] { return true }  // local-use NAT64 64:ff9b:1::/48
        if b[0] == 0x20 && b[1] == 0x02 { return isPrivate(v4: Array(b[2..<6])) }  // 6to4 2002::/16
        if b[0..<4] == [0x20, 0x01, 0, 0] { return true }  // Teredo 2001::/32
        if b[0..<8] == [0x01, 0, 0, 0, 0, 0, 0, 0] { return true }  // discard-only 100::/64
        return false
    }

    static func isPrivate(v4 o: [UInt8]) -> Bool {
        switch (o[0], o[1]) {
        case (10, _), (127, _), (0, _): return true
        case (169, 254), (192, 168): return true
        case (192, 0) where o[2] == 0: return true  // IETF protocol assignments 192.0.0.0/24
        case (198, 18...19): return true  // benchmarking 198.18.0.0/15
        case (172, 16...31): return true
        case (100, 64...127): return true
        case (224...255, _): return true
        default: return false
        }
    }

    // MARK: - Storage

    static func event(_ text: String) throws -> WebhookEventType {
        guard let e = WebhookEventType(rawValue: text) else { throw ServiceError(.internal, "an endpoint stores an unknown event type") }
        return e
    }

    static func endpointView(_ row: PGRow) throws -> WebhookEndpointView {
        WebhookEndpointView(id: try row.decode("id"), url: try row.decode("url"), events: try PGArray.parse(try row.decode("events")).map(event),
                            active: try row.decode("active"), mode: Mode(rawValue: try row.decode("mode")) ?? .live,
                            createdAt: try row.decode("created_at"))
    }

    /// Queues one delivery of an event to every active endpoint of `mode` (the mode of the
    /// redemption's coupon) that takes it, in the caller's transaction; a repeat of the same event
    /// adds nothing. A test coupon's event never reaches a live endpoint, nor a live one a test
    /// endpoint.
    static func enqueue(_ tx: PGConnection, type: WebhookEventType, redemption: UUID, data: some Encodable, mode: Mode) throws {
        let payload = String(decoding: try JSONEncoder.wire().encode(WebhookBody(type: type, timestamp: Date(), data: data)), as: UTF8.self)
        try tx.query("""
            INSERT INTO grants.webhook_deliveries (id, endpoint_id, webhook_id, type, payload)
            SELECT gen_random_uuid(), e.id, $1, $2, $3 FROM grants.webhook_endpoints e WHERE e.active AND $2 = ANY(e.events) AND e.mode = $4
            ON CONFLICT (endpoint_id, webhook_id) DO NOTHING
            """, [eventId(type: type, redemption: redemption), type, payload, mode.rawValue])
    }

    /// Queues a `webhook.test` event to the active endpoint `endpoint` of `mode`: `data` names the
    /// endpoint. Its `webhook-id` is new each time (each test is its own event).
    static func enqueueTest(_ c: PGConnection, endpoint: UUID, mode: Mode) throws -> WebhookDeliveryView {
        struct TestData: Encodable { var endpointId: UUID; var message: String }
        let body = WebhookBody(type: .webhookTest, timestamp: Date(),
                               data: TestData(endpointId: endpoint, message: "A test event from Redeem: this endpoint is reached."))
        let payload = String(decoding: try JSONEncoder.wire().encode(body), as: UTF8.self)
        guard let row = try c.query("""
            INSERT INTO grants.webhook_deliveries (id, endpoint_id, webhook_id, type, payload)
            SELECT gen_random_uuid(), e.id, $2, $3, $4 FROM grants.webhook_endpoints e WHERE e.id = $1 AND e.mode = $5 AND e.active
            RETURNING id, webhook_id, type, status, attempts, last_status_code, last_error, last_response, created_at, delivered_at, next_attempt_at
            """, [endpoint, "msg_test_" + UUID.random().lowercasedString.replacingOccurrences(of: "-", with: ""), WebhookEventType.webhookTest,
                  payload, mode.rawValue]).first else { throw ServiceError(.notFound, "no such active webhook") }
        return try deliveryView(row)
    }

    /// Whether any active endpoint takes `type` (so a batch with none skips the inserts).
    static func anyEndpoint(_ c: PGConnection, type: WebhookEventType) throws -> Bool {
        try c.prepared("any_endpoint", "SELECT EXISTS (SELECT 1 FROM grants.webhook_endpoints WHERE active AND $1 = ANY(events)) AS yes",
                       [type]).first!.decode("yes", as: Bool.self)
    }

    struct Due: Sendable {
        let id: UUID
        let endpoint: UUID
        let url: String
        /// As stored: sealed (base64) under the key `secretKeyId` names, or plain when that is nil.
        let secret: String
        let secretKeyId: String?
        let webhookId: String
        let payload: String
        let attempts: Int
    }

    /// Deletes (deactivates) an endpoint of `mode`, and its queue with it in the same statement: a
    /// deleted endpoint is sent nothing more. Answers whether there was such an endpoint.
    static func delete(_ c: PGConnection, id: UUID, mode: Mode) throws -> Bool {
        try c.query("""
            WITH gone AS (
                UPDATE grants.webhook_endpoints SET active = false, disabled_at = now(), disabled_reason = 'deleted'
                WHERE id = $1 AND mode = $2 AND disabled_reason IS DISTINCT FROM 'deleted' RETURNING id
            ), dropped AS (
                UPDATE grants.webhook_deliveries d SET status = 'failed', last_error = 'endpoint deleted'
                FROM gone WHERE d.endpoint_id = gone.id AND d.status = 'pending'
            )
            SELECT id FROM gone
            """, [id, mode.rawValue]).first != nil
    }

    /// What an endpoint's sealed secret is bound to: its row.
    static func secretContext(_ endpoint: UUID) -> String { "grants.webhook_endpoints/" + endpoint.lowercasedString }

    /// An endpoint's secret sealed for storing: the text of the `secret` column and its key id.
    static func seal(secret: String, endpoint: UUID, keyring: SecretKeyring) -> (text: String, keyId: String) {
        let sealed = keyring.seal(Array(secret.utf8), context: secretContext(endpoint))
        return (Data(sealed.sealed).base64EncodedString(), sealed.keyId)
    }

    /// The secret of an endpoint as stored (`secret`, `secret_key_id`).
    static func openSecret(_ stored: String, keyId: String?, endpoint: UUID, keyring: SecretKeyring) throws -> String {
        guard keyId != nil else { return stored }
        guard let bytes = Data(base64Encoded: stored) else { throw SecretKeyring.Failure.altered(secretContext(endpoint)) }
        let plain = try keyring.open(Array(bytes), keyId: keyId, context: secretContext(endpoint))
        guard let text = String(bytes: plain, encoding: .utf8) else { throw SecretKeyring.Failure.altered(secretContext(endpoint)) }
        return text
    }

    /// Seals under the current key every endpoint secret that is plain (stored before secrets were
    /// sealed) or sealed under another key (before a rotation), a page at a time. Instances
    /// starting together reseal each row once: the rows are locked, and one resealed no longer
    /// matches. Answers how many it sealed.
    static func resealSecrets(_ pool: PGPool, keyring: SecretKeyring) async throws -> Int {
        var total = 0
        while true {
            let sealed = try await pool.transaction { tx in
                let rows = try tx.query("""
                    SELECT id, secret, secret_key_id FROM grants.webhook_endpoints WHERE secret_key_id IS DISTINCT FROM $1 LIMIT 500 FOR UPDATE
                    """, [keyring.current.id]).rows
                for row in rows {
                    let id: UUID = try row.decode("id")
                    let plain = try openSecret(try row.decode("secret"), keyId: try row.decodeIfPresent("secret_key_id", as: String.self), endpoint: id, keyring: keyring)
                    let again = seal(secret: plain, endpoint: id, keyring: keyring)
                    try tx.query("UPDATE grants.webhook_endpoints SET secret = $2, secret_key_id = $3 WHERE id = $1", [id, again.text, again.keyId])
                }
                return rows.count
            }
            total += sealed
            if sealed < 500 { return total }
        }
    }

    static func claimDue(_ c: PGConnection, limit: Int, lease: TimeInterval) throws -> [Due] {
        try c.query("""
            UPDATE grants.webhook_deliveries d SET attempts = d.attempts + 1, next_attempt_at = now() + make_interval(secs => $2)
            FROM grants.webhook_endpoints e
            WHERE e.id = d.endpoint_id AND d.id IN (
                SELECT id FROM grants.webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= now()
                ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED
            )
            RETURNING d.id, d.endpoint_id, e.url, e.secret, e.secret_key_id, e.active, d.webhook_id, d.payload, d.attempts
            """, [limit, lease]).rows.map {
            Due(id: try $0.decode("id"), endpoint: try $0.decode("endpoint_id"), url: try $0.decode("url"), secret: try $0.decode("secret"),
                secretKeyId: try $0.decodeIfPresent("secret_key_id", as: String.self),
                webhookId: try $0.decode("webhook_id"), payload: try $0.decode("payload"), attempts: try $0.decode("attempts"))
        }
    }

    static func deliveryView(_ row: PGRow) throws -> WebhookDeliveryView {
        let status = try row.decode("status", as: WebhookDeliveryStatus.self)
        return WebhookDeliveryView(id: try row.decode("id"), webhookId: try row.decode("webhook_id"), type: try row.decode("type"),
                                   status: status, attempts: try row.decode("attempts"), lastStatusCode: try row.decodeIfPresent("last_status_code"),
                                   lastError: try row.decodeIfPresent("last_error"), lastResponse: try row.decodeIfPresent("last_response"),
                                   createdAt: try row.decode("created_at"),
                                   deliveredAt: try row.decodeIfPresent("delivered_at"),
                                   nextAttemptAt: status == .pending ? try row.decodeIfPresent("next_attempt_at") : nil)
    }
}

/// `{type, timestamp, data}`.
struct WebhookBody<D: Encodable>: Encodable {
    var type: WebhookEventType
    var timestamp: Date
    var data: D
}
