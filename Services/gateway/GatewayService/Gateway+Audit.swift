import Core
import Foundation
import HTTP

/// The audit log (docs/operations.md#audit-log): every operator change, as each service recorded it
/// in the transaction of the change, merged here newest first.
extension Gateway {
    static let auditRoutes: [APIRoute] = [
        .route(
            .get, "/v1/audit", "The audit log of operator changes in the caller's app and mode, newest first",
            access: .appKey(.admin),
            query: [
                QueryParameter(
                    name: "objectType", schema: .oneOf(Gateway.auditObjectTypes),
                    description: "only changes to this kind of object"),
                QueryParameter(
                    name: "objectId", schema: .string,
                    description: "only changes to this object (a coupon's code, a plan's productId, an id)"),
                QueryParameter(
                    name: "actorId",
                    schema: {
                        var s = JSONSchema.string
                        s.format = "uuid"
                        return s
                    }(),
                    description: "only changes made by this API key or member"),
                QueryParameter(name: "action", schema: .string, description: "only this action, e.g. coupon.create")
            ] + QueryParameter.page,
            answers: [200: .json(Page<AuditEntry>.self)], errors: [422], handle: Gateway.auditLog)
    ]

    static let auditObjectTypes = AuditAction.objectTypes

    func auditLog(_ req: HTTPRequest, _ key: Authenticator.Key) async throws -> HTTPResponse {
        let keyset = try Keyset(limit: try Query.limit(req), cursor: req.query["cursor"])
        func text(_ name: String) throws -> String? {
            guard let value = req.query[name] else { return nil }
            guard !value.isEmpty, value.utf8.count <= 200, !value.contains("\u{0}") else { throw HTTPError.invalid(name, "\(name) must be 1 to 200 characters") }
            return value
        }
        let objectType = try text("objectType")
        if let objectType, !Self.auditObjectTypes.contains(objectType) {
            throw HTTPError.invalid("objectType", "objectType must be one of \(Self.auditObjectTypes.joined(separator: ", "))")
        }
        let actorId = try text("actorId").map { text in
            guard let id = UUID(parsing: text) else { throw HTTPError.invalid("actorId", "actorId must be the id of an API key or member") }
            return id
        }
        // Ids are kept as the API writes them (upper case); one sent in lower case finds them too.
        let objectId = try text("objectId").map { UUID(parsing: $0)?.uppercasedString ?? $0 }
        let query = AuditQuery(mode: key.mode, app: key.app, objectType: objectType, objectId: objectId,
            actorId: actorId, action: try text("action"),
                               limit: keyset.fetch, beforeMicros: keyset.afterMicros, beforeId: keyset.afterId)
        async let fromAccounts = accounts.request(Audit.ReadAccounts(query: query))
        async let fromCoupons = coupons.request(Audit.ReadCoupons(query: query))
        async let fromGrants = grants.request(Audit.ReadGrants(query: query))
        let merged = Audit.merge(try await [fromAccounts, fromCoupons, fromGrants], limit: keyset.limit)
        let next = merged.more ? merged.rows.last.map { KeysetCursor(micros: $0.micros, id: $0.entry.id).text } : nil
        return .json(200, Page(data: merged.rows.map(\.entry), nextCursor: next))
    }
}
