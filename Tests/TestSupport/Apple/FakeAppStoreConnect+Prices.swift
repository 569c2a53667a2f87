import Core
import Foundation
import HTTP

/// `GET /v1/subscriptions/{id}/prices` and `/pricePoints`, and the JSON:API pieces every
/// answer of the fake shares: resources, relationships and pages.
extension FakeAppStoreConnect {
    /// The subscription's current price in each territory (`filter[territory]`, `include`
    /// of `subscriptionPricePoint` and `territory`, at most 200 a page).
    func prices(_ req: HTTPRequest) -> HTTPResponse {
        let id = req.pathParameters["id"] ?? ""
        guard let subscription = state.withLock({ $0.subscriptions[id] }) else { return AppleError.notFound(req.path) }
        guard let include = included(req, allowed: ["subscriptionPricePoint", "territory"]) else { return badParameter("include") }
        let rows = territories(of: subscription, req).map { t in
            let point = subscription.points.first { $0.territory == t.territory && $0.customerPrice == t.current }!
            let priceId = Self.opaqueId(["s": id, "t": t.territory, "sd": "0"])
            let price = resource("subscriptionPrices", priceId, attributes: ["startDate": NSNull(), "preserved": false], relationships: [
                "territory": toOne("territories", t.territory, include.contains("territory"), related: "/v1/subscriptionPrices/\(priceId)/territory"),
                "subscriptionPricePoint": toOne("subscriptionPricePoints", point.id, include.contains("subscriptionPricePoint"),
                                                related: "/v1/subscriptionPrices/\(priceId)/subscriptionPricePoint"),
            ])
            var extra: [[String: Any]] = []
            if include.contains("territory") { extra.append(territory(t)) }
            if include.contains("subscriptionPricePoint") { extra.append(pricePoint(point, includingTerritory: false)) }
            return (price, extra)
        }
        return page(rows, req, maxLimit: 200)
    }

    /// Every price point of the subscription (`filter[territory]`, `include=territory`, at most
    /// 8000 a page), in ascending price within a territory as registered.
    func pricePoints(_ req: HTTPRequest) -> HTTPResponse {
        let id = req.pathParameters["id"] ?? ""
        guard let subscription = state.withLock({ $0.subscriptions[id] }) else { return AppleError.notFound(req.path) }
        guard let include = included(req, allowed: ["territory"]) else { return badParameter("include") }
        let rows = territories(of: subscription, req).flatMap { t in
            subscription.points.filter { $0.territory == t.territory }.map { point in
                (pricePoint(point, includingTerritory: include.contains("territory")), include.contains("territory") ? [territory(t)] : [])
            }
        }
        return page(rows, req, maxLimit: 8000)
    }

    private func territories(of subscription: Subscription, _ req: HTTPRequest) -> [TerritoryPrices] {
        guard let filter = req.query["filter[territory]"] else { return subscription.territories }
        let wanted = Set(filter.split(separator: ",").map(String.init))
        return subscription.territories.filter { wanted.contains($0.territory) }
    }

    private func territory(_ t: TerritoryPrices) -> [String: Any] {
        ["type": "territories", "id": t.territory, "attributes": ["currency": t.currency], "links": ["self": link("/v1/territories/\(t.territory)")]]
    }

    private func pricePoint(_ point: PricePoint, includingTerritory: Bool) -> [String: Any] {
        let proceeds = String(format: "%.2f", (Double(point.customerPrice) ?? 0) * 0.85)
        return resource("subscriptionPricePoints", point.id,
                        attributes: ["customerPrice": point.customerPrice, "proceeds": proceeds, "proceedsYear2": proceeds],
                        relationships: ["territory": toOne("territories", point.territory, includingTerritory,
                                                           related: "/v1/subscriptionPricePoints/\(point.id)/territory")])
    }

    // MARK: JSON:API

    func link(_ path: String) -> String { url.absoluteString + path }

    func resource(_ type: String, _ id: String, attributes: [String: Any], relationships: [String: Any]) -> [String: Any] {
        ["type": type, "id": id, "attributes": attributes, "relationships": relationships, "links": ["self": link("/v1/\(type)/\(id)")]]
    }

    /// A to-one relationship: its linkage when the client asked to include it, else a link.
    func toOne(_ type: String, _ id: String, _ linked: Bool, related: String) -> [String: Any] {
        linked ? ["data": ["type": type, "id": id]] : ["links": ["related": link(related)]]
    }

    /// The names in `include`; nil when one is not `allowed` (Apple answers 400).
    func included(_ req: HTTPRequest, allowed: Set<String>) -> Set<String>? {
        let names = Set((req.query["include"] ?? "").split(separator: ",").map(String.init))
        return names.isSubset(of: allowed) ? names : nil
    }

    func badParameter(_ name: String) -> HTTPResponse {
        AppleError.response(400, "PARAMETER_ERROR.INVALID", "A parameter has an invalid value", "'\(name)' is not valid here.", pointer: nil)
    }

    /// One page of `rows` (a resource and the resources it includes): `limit` (default 50, up
    /// to `maxLimit`) and an opaque `cursor`, with `links.next` while more remain.
    func page(_ rows: [([String: Any], [[String: Any]])], _ req: HTTPRequest, maxLimit: Int) -> HTTPResponse {
        let limit = req.query["limit"].map { Int($0) ?? 0 } ?? 50
        guard (1...maxLimit).contains(limit) else { return badParameter("limit") }
        let offset = req.query["cursor"].flatMap { Base64URL.decode($0) }.flatMap { Int(String(decoding: $0, as: UTF8.self)) } ?? 0
        let slice = rows.dropFirst(offset).prefix(limit)
        var seen = Set<String>(), included: [[String: Any]] = []
        for (_, extra) in slice {
            for item in extra where seen.insert("\(item["type"]!)/\(item["id"]!)").inserted { included.append(item) }
        }
        var links = ["self": pageLink(req, cursor: req.query["cursor"])]
        if offset + limit < rows.count { links["next"] = pageLink(req, cursor: Base64URL.encode(Array(String(offset + limit).utf8))) }
        var document: [String: Any] = ["data": slice.map(\.0), "links": links, "meta": ["paging": ["total": rows.count, "limit": limit]]]
        if !included.isEmpty { document["included"] = included }
        return AppleError.document(200, document)
    }

    private func pageLink(_ req: HTTPRequest, cursor: String?) -> String {
        var components = URLComponents(string: link(req.path))!
        var query = req.query
        query["cursor"] = cursor
        components.queryItems = query.isEmpty ? nil : query.sorted { $0.key < $1.key }.map { URLQueryItem(name: $0.key, value: $0.value) }
        return components.string!
    }
}
