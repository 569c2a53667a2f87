import Foundation
import Shared

/// Accounts, identities, sessions and API keys (SPEC §4.1). Owns schema `accounts`.
public final class AccountsService: BackendService {
    public static let name = "accounts"
    let runtime: ServiceRuntime

    public init(runtime: ServiceRuntime, env: Environment) throws {
        self.runtime = runtime
    }

    public static let migrator = Migrator(schema: "accounts", migrations: AccountsMigrations.all)

    /// The bus requests this service answers.
    public func router() -> BusRouter {
        BusRouter(logger: runtime.logger)
    }
}
