import Foundation
import Shared

/// Coupons, validation, reservations, redemptions and caps (SPEC §4.2, §4.3). Owns schema `coupons`.
public final class CouponsService: BackendService {
    public static let name = "coupons"
    let runtime: ServiceRuntime

    public init(runtime: ServiceRuntime, env: Environment) throws {
        self.runtime = runtime
    }

    public static let migrator = Migrator(schema: "coupons", migrations: CouponsMigrations.all)

    public func router() -> BusRouter {
        BusRouter(logger: runtime.logger)
    }
}
