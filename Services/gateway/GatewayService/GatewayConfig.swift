import Foundation
import Runtime
import Telemetry

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
        // libmicrohttpd threads parse and write; handlers run as tasks. One per core (at most 8): on
        // two cores, two threads served more reservations than one in 10 of 13 side-by-side rounds
        // (one thread preempted stalls every connection), as many validations (bench/HISTORY.md).
        httpThreads = try env.int("REDEEM_HTTP_THREADS", default: min(8, max(1, ProcessInfo.processInfo.activeProcessorCount)), range: 1...64)
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
