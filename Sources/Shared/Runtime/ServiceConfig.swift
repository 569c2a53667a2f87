import Core
import Foundation
import Telemetry

/// Settings every back-end service reads (see the README's configuration table).
public struct ServiceConfig: Sendable {
    public var name: String
    /// The service's runtime role: reads and writes its schema's tables, no DDL.
    public var databaseURL: String
    /// The schema owner's URL, when this instance may migrate at its start (one machine). Unset,
    /// the instance waits until `<service> migrate` has brought the schema up to date.
    public var migrationDatabaseURL: String?
    public var databasePoolSize: Int
    public var logLevel: Logger.Level
    public var httpHost: String
    /// Internal `/healthz` and `/metrics` port.
    public var httpPort: Int
    /// Endpoints this instance's ROUTER binds.
    public var busBind: [String]

    public init(name: String, env: Environment, defaultHTTPPort: Int) throws {
        self.name = name
        databaseURL = try env.databaseURL()
        migrationDatabaseURL = try Self.migrationDatabaseURL(env)
        databasePoolSize = try env.int("REDEEM_DB_POOL_SIZE", default: 8, range: 1...200)
        logLevel = try ServiceConfig.logLevel(env)
        httpHost = env.string("REDEEM_HTTP_HOST", default: "127.0.0.1")
        httpPort = try env.port("REDEEM_\(name.uppercased())_HTTP_PORT", default: defaultHTTPPort)
        busBind = try BusAddress.bind(name, env)
    }

    /// `REDEEM_MIGRATION_DATABASE_URL` (or its file), nil when unset.
    public static func migrationDatabaseURL(_ env: Environment) throws -> String? {
        try env.optionalDatabaseURL("REDEEM_MIGRATION_DATABASE_URL", file: "REDEEM_MIGRATION_DATABASE_URL_FILE")
    }

    public static func logLevel(_ env: Environment) throws -> Logger.Level {
        let text = env.string("REDEEM_LOG_LEVEL", default: "info")
        guard let level = Logger.Level(name: text) else {
            throw ConfigError(variable: "REDEEM_LOG_LEVEL", problem: "expected debug, info, warn or error, got \"\(text)\"")
        }
        return level
    }
}

/// Where each service is found on the bus. Callers connect to every endpoint listed in
/// `REDEEM_<SERVICE>_BUS` (comma-separated), and to every address a host name there has
/// (`tcp://coupons:7102`: one per instance, looked up again as they come and go); an instance
/// binds `REDEEM_<SERVICE>_BUS_BIND`, by default the first of that list. Events and grant
/// commands work the same way, with `_EVENTS` and `_COMMANDS`.
public enum BusAddress {
    static let defaultPorts = ["accounts": 7101, "coupons": 7102, "grants": 7103]

    /// Request endpoints of a service, for callers.
    public static func requests(_ service: String, _ env: Environment) throws -> [String] {
        try env.endpoints("REDEEM_\(service.uppercased())_BUS", default: ["tcp://127.0.0.1:\(defaultPorts[service] ?? 7100)"])
    }

    /// Endpoints this instance binds for requests.
    public static func bind(_ service: String, _ env: Environment) throws -> [String] {
        if env.raw("REDEEM_\(service.uppercased())_BUS_BIND") != nil {
            return try env.endpoints("REDEEM_\(service.uppercased())_BUS_BIND", default: [])
        }
        return [try requests(service, env)[0]]
    }

    /// Where a service publishes events (`REDEEM_<SERVICE>_EVENTS`), for subscribers.
    public static func events(_ service: String, _ env: Environment) throws -> [String] {
        try env.endpoints("REDEEM_\(service.uppercased())_EVENTS", default: ["tcp://127.0.0.1:\((defaultPorts[service] ?? 7100) + 10)"])
    }

    /// Endpoints this instance binds for its events: `REDEEM_<SERVICE>_EVENTS_BIND`, by default
    /// every endpoint of `REDEEM_<SERVICE>_EVENTS`.
    public static func eventsBind(_ service: String, _ env: Environment) throws -> [String] {
        if env.raw("REDEEM_\(service.uppercased())_EVENTS_BIND") != nil {
            return try env.endpoints("REDEEM_\(service.uppercased())_EVENTS_BIND", default: [])
        }
        return try events(service, env)
    }

    /// Where grant commands are pulled (`REDEEM_GRANTS_COMMANDS`), for coupons, which pushes them.
    public static func grantCommands(_ env: Environment) throws -> [String] {
        try env.endpoints("REDEEM_GRANTS_COMMANDS", default: ["tcp://127.0.0.1:7123"])
    }

    /// Endpoints a grants instance binds for grant commands: `REDEEM_GRANTS_COMMANDS_BIND`, by
    /// default every endpoint of `REDEEM_GRANTS_COMMANDS`.
    public static func grantCommandsBind(_ env: Environment) throws -> [String] {
        if env.raw("REDEEM_GRANTS_COMMANDS_BIND") != nil { return try env.endpoints("REDEEM_GRANTS_COMMANDS_BIND", default: []) }
        return try grantCommands(env)
    }
}
