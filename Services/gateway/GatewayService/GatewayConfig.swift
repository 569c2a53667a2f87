import Foundation
import Shared

/// The gateway's settings (README configuration table).
public struct GatewayConfig: Sendable {
    public var httpHost: String
    public var httpPort: Int
    public var httpThreads: Int
    public var logLevel: Logger.Level
    public var accountsBus: [String]
    public var couponsBus: [String]
    public var grantsBus: [String]
    public var busTimeout: Duration
    var limits: AbuseGuard.Limits
    /// Publishers of events this gateway listens to.
    public var accountsEvents: [String]
    public var grantsEvents: [String]

    public init(env: Environment) throws {
        httpHost = env.string("REDEEM_HTTP_HOST", default: "127.0.0.1")
        httpPort = try env.port("REDEEM_HTTP_PORT", default: 8080)
        // One libmicrohttpd thread parses and writes for every connection; handlers run as tasks.
        // On two cores one thread served 5–15 % more than two (fewer hand-offs); more cores may want more.
        httpThreads = try env.int("REDEEM_HTTP_THREADS", default: 1, range: 1...64)
        logLevel = try ServiceConfig.logLevel(env)
        accountsBus = try BusAddress.requests("accounts", env)
        couponsBus = try BusAddress.requests("coupons", env)
        grantsBus = try BusAddress.requests("grants", env)
        accountsEvents = try BusAddress.events("accounts", env)
        grantsEvents = try BusAddress.events("grants", env)
        limits = try AbuseGuard.Limits(env: env)
        busTimeout = .milliseconds(try env.int("REDEEM_BUS_TIMEOUT_MS", default: 5000, range: 50...60000))
    }
}
