import Core
import Foundation
import HTTP

/// `/healthz`, `/readyz` and `/metrics` (docs/operations.md).
extension Gateway {
    struct Health: APIBody, Encodable {
        static let schemaName: String? = "Status"
        var status: String
    }

    struct Readiness: APIBody, Codable, Sendable {
        struct Part: Codable, Sendable {
            var status: String
            var database: String?
            var instance: String?
            var error: String?
        }
        var status: String
        var services: [String: Part]

        static let schemaName: String? = "Readiness"
        static let fieldRules: [String: [JSONSchema.Rule]] = ["status": [.oneOf(["ready", "notReady"])]]
    }

    /// On the public port: a load balancer's liveness check.
    static let operationsRoutes: [APIRoute] = [
        .route(.get, "/healthz", "The process is up", answers: [200: .json(Health.self)], handle: Gateway.health),
    ]

    /// On the operations port (`REDEEM_GATEWAY_HTTP_PORT`), which is not public: what the stack
    /// looks like from inside is for the operator, not for anyone on the internet. Also on the
    /// public port when `REDEEM_OPS_ON_PUBLIC_PORT` is on (then outside the OpenAPI description).
    static let internalRoutes: [APIRoute] = operationsRoutes + [
        .route(.get, "/readyz", "This gateway can serve: started and not stopping",
               answers: [200: .json(Readiness.self), 503: .json(Readiness.self)], handle: Gateway.ready),
        .route(.get, "/backends", "Every back-end reachable over the bus with its database up",
               answers: [200: .json(Readiness.self), 503: .json(Readiness.self)], handle: Gateway.backendsPage),
        .route(.get, "/metrics", "Prometheus metrics", answers: [200: .text("text/plain")], handle: Gateway.metricsPage),
    ]

    /// The operations port's router.
    func internalRouter() -> Router {
        var r = Router(mapError: { error, request in GatewayErrors.response(for: error, request: request) })
        for route in Self.internalRoutes { r.add(route.method.rawValue, route.path, route.handler(self)) }
        return r
    }

    func health(_ req: HTTPRequest) -> HTTPResponse { .json(200, Health(status: "up")) }

    /// Readiness is this process's own state, never a back-end's: one back-end down must not take
    /// every gateway out of its Service (each request to it is answered `unavailable` instead, and
    /// `/backends` and the back-ends' own probes say which one). Not ready before the public port
    /// listens and once it drains.
    func ready(_ req: HTTPRequest) async -> HTTPResponse {
        let state = lifecycle.withLock { $0 }
        let ready = state == .serving
        return .json(
            ready ? 200 : 503,
            Readiness(status: ready ? "ready" : "notReady", services: ["gateway": .init(status: state.rawValue)]))
    }

    /// What this gateway sees of the back-ends: 200 when each answers its ping and is ready, 503
    /// otherwise. For operators and tests waiting for the whole stack, not for a readiness probe.
    func backendsPage(_ req: HTTPRequest) async -> HTTPResponse {
        let report = await readiness()
        return .json(report.status == "ready" ? 200 : 503, report)
    }

    func metricsPage(_ req: HTTPRequest) -> HTTPResponse {
        .text(200, metrics.render(), contentType: "text/plain; version=0.0.4; charset=utf-8")
    }

    /// Pings every back-end over the bus (in parallel, one second each).
    func readiness() async -> Readiness {
        let clients = [accounts, coupons, grants]
        var parts: [String: Readiness.Part] = ["gateway": .init(status: lifecycle.withLock { $0 }.rawValue)]
        await withTaskGroup(of: (String, Readiness.Part).self) { group in
            for client in clients {
                group.addTask {
                    do {
                        let p = try await client.request(Ping(), timeout: .seconds(1))
                        return (client.service, .init(status: p.ready ? "up" : "notReady", database: p.database, instance: p.instance))
                    } catch let e as ServiceError {
                        return (client.service, .init(status: "down", error: e.code.rawValue))
                    } catch {
                        return (client.service, .init(status: "down", error: "internal"))
                    }
                }
            }
            for await (name, part) in group { parts[name] = part }
        }
        let ready = parts.allSatisfy { $0.key == "gateway" || $0.value.status == "up" }
        return Readiness(status: ready ? "ready" : "notReady", services: parts)
    }
}
