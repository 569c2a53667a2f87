import Foundation
import Shared

/// Grant commands to entitlements, the grant ledger, events and webhooks (SPEC §3, §4.4, §5).
/// Owns schema `grants`.
public final class GrantsService: BackendService {
    public static let name = "grants"
    let runtime: ServiceRuntime

    public init(runtime: ServiceRuntime, env: Environment) throws {
        self.runtime = runtime
    }

    public static let migrator = Migrator(schema: "grants", migrations: GrantsMigrations.all)

    public func router() -> BusRouter {
        BusRouter(logger: runtime.logger)
    }
}
