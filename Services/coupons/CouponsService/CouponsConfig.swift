import Foundation
import Runtime

/// Settings of the coupons service (README configuration table).
struct CouponsConfig: Sendable {
    /// Seconds a discount reservation waits for its purchase confirmation.
    var reservationTTL: TimeInterval
    /// How often expired reservations are released.
    var sweepInterval: Duration
    var defaultEntitlement: String
    /// Where grants pulls grant commands (PUSH connects here).
    var grantCommands: [String]

    init(env: Environment) throws {
        reservationTTL = TimeInterval(try env.int("REDEEM_RESERVATION_TTL", default: 86_400, range: 1...(90 * 86_400)))
        sweepInterval = .milliseconds(try env.int("REDEEM_RESERVATION_SWEEP_MS", default: 30_000, range: 100...3_600_000))
        defaultEntitlement = env.string("REDEEM_DEFAULT_ENTITLEMENT", default: "all")
        grantCommands = try BusAddress.grantCommands(env)
    }
}
