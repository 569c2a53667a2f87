import Core
import Foundation
import HTTP

/// `/healthz`, `/readyz` and `/metrics` (SPEC §4.6).
extension Gateway {
    struct Readiness: Codable, Sendable {
        struct Part: Codable, Sendable {
            var status: String
            var database: String?
            var instance: String?
            var error: String?
        }
        var status: String
        var services: [String: Part]
    }

    func addOperationsRoutes(to r: inout Router) {
        r.get("/healthz") { _ in .json(200, ["status": "up"]) }
        r.get("/readyz") { [self] _ in
            let report = await readiness()
            return .json(report.status == "ready" ? 200 : 503, report)
        }
        r.get("/metrics") { [self] _ in
            .text(200, metrics.render(), contentType: "text/plain; version=0.0.4; charset=utf-8")
        }
    }

    /// Pings every service over the bus (in parallel, one second each).
    func readiness() async -> Readiness {
        let clients = [accounts, coupons, grants]
        var parts: [String: Readiness.Part] = ["gateway": .init(status: "up")]
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
        let ready = parts.values.allSatisfy { $0.status == "up" }
        return Readiness(status: ready ? "ready" : "notReady", services: parts)
    }
}
