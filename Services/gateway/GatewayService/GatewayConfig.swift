import Bus
import Core
import Cryptography
import Foundation
import HTTP
import Runtime
import Telemetry

/// The gateway's settings (README configuration table).
public struct GatewayConfig: Sendable {
    public var httpHost: String
    public var httpPort: Int
    public var httpThreads: Int
    /// The edge (docs/security.md, "The edge"): proxies allowed to name the client and the one
    /// header they name it in, connections per client address, and how long a connection may take
    /// to send a request's headers, and the whole request.
    public var trustedProxies: [IPNetwork]
    public var trustedProxyHeader: String
    /// The web apps that may call the API from a browser (`REDEEM_CORS_ORIGINS`).
    var cors: CORSPolicy
    public var connectionsPerAddress: Int
    public var headerTimeoutSeconds: Int
    public var requestTimeoutSeconds: Int
    /// The operations port (`/healthz`, `/readyz`, `/metrics`), not public; and whether `/readyz`
    /// and `/metrics` are on the public port too.
    public var opsPort: Int
    public var opsOnPublicPort: Bool
    public var logLevel: Logger.Level
    public var accountsBus: [String]
    public var couponsBus: [String]
    public var grantsBus: [String]
    public var busTimeout: Duration
    /// How the bus is secured and its host names looked up.
    public var bus: BusOptions
    var limits: AbuseGuard.Limits
    /// Publishers of events this gateway listens to.
    public var accountsEvents: [String]
    public var grantsEvents: [String]
    /// Apple's signed data (`REDEEM_APPLE_ROOT_CERTS`, `REDEEM_APPLE_BUNDLE_ID`, `REDEEM_APPLE_APP_ID`):
    /// on when the roots are set, which then need both ids; without them nothing signed by Apple is
    /// accepted (401 `invalidSignedData`).
    public var appleSignedData: AppleSignedDataSettings?
    /// Google's pushes of Play notifications (`REDEEM_PLAY_PUSH_AUDIENCE` and its companions): on
    /// when the audience is set; without it every push is refused (401).
    public var googlePush: GooglePushSettings?
    /// Stripe's webhook signing secrets (`REDEEM_STRIPE_WEBHOOK_SECRET`, `whsec_…`, comma-separated
    /// while one is rolled): set, the gateway takes Stripe's events and web redemptions of coupons
    /// with a Stripe promotion code go through Stripe Checkout (docs/stripe.md).
    public var stripeWebhookSecrets: [String]
    /// Sign in with Apple on the web is configured (`REDEEM_APPLE_SERVICES_ID`, which accounts
    /// reads with the rest of the flow's settings): the redeem page shows its button.
    public var appleWebSignIn: Bool

    public init(env: Environment) throws {
        httpHost = env.string("REDEEM_HTTP_HOST", default: "127.0.0.1")
        httpPort = try env.port("REDEEM_HTTP_PORT", default: 8080)
        // libmicrohttpd threads parse and write; handlers run as tasks. One per core (at most 8): on
        // two cores, two threads served more reservations than one in 10 of 13 side-by-side rounds
        // (one thread preempted stalls every connection), as many validations (bench/HISTORY.md).
        httpThreads = try env.int("REDEEM_HTTP_THREADS", default: min(8, max(1, ProcessInfo.processInfo.activeProcessorCount)), range: 1...64)
        trustedProxies = try IPNetwork.list(env.string("REDEEM_TRUSTED_PROXIES", default: ""), variable: "REDEEM_TRUSTED_PROXIES")
        cors = try CORSPolicy(setting: env.string("REDEEM_CORS_ORIGINS", default: ""))
        trustedProxyHeader = try ClientAddress.headerName(env.string("REDEEM_TRUSTED_PROXY_HEADER", default: ClientAddress.defaultHeader),
                                                          variable: "REDEEM_TRUSTED_PROXY_HEADER")
        // Each connection may hold a body of up to 1 MiB while it arrives: 64 of them from one
        // address stay well within the gateway's memory, and a browser opens 6 per host. Trusted
        // proxies are not counted; a load test from one machine raises it.
        connectionsPerAddress = try env.int("REDEEM_HTTP_CONNECTIONS_PER_ADDRESS", default: 64, range: 0...100_000)
        // As long as libmicrohttpd's idle timeout: an idle keep-alive connection goes when it would
        // anyway, and only a client trickling its headers is cut sooner than it was.
        headerTimeoutSeconds = try env.int("REDEEM_HTTP_HEADER_TIMEOUT_SECONDS", default: 30, range: 0...3600)
        // A trickled body is cut too: the whole request within 30 s of the connection opening or
        // of its previous answer.
        requestTimeoutSeconds = try env.int("REDEEM_HTTP_REQUEST_TIMEOUT_SECONDS", default: 30, range: 0...3600)
        opsPort = try env.port("REDEEM_GATEWAY_HTTP_PORT", default: 8084)
        opsOnPublicPort = try env.flag("REDEEM_OPS_ON_PUBLIC_PORT", default: false)
        logLevel = try ServiceConfig.logLevel(env)
        accountsBus = try BusAddress.requests("accounts", env)
        couponsBus = try BusAddress.requests("coupons", env)
        grantsBus = try BusAddress.requests("grants", env)
        accountsEvents = try BusAddress.events("accounts", env)
        grantsEvents = try BusAddress.events("grants", env)
        limits = try AbuseGuard.Limits(env: env)
        busTimeout = .milliseconds(try env.int("REDEEM_BUS_TIMEOUT_MS", default: 5000, range: 50...60000))
        appleSignedData = try AppleSignedDataSettings(env: env)
        bus = try BusOptions(env: env)
        googlePush = try GooglePushSettings(env: env)
        stripeWebhookSecrets = env.list("REDEEM_STRIPE_WEBHOOK_SECRET", default: [])
        appleWebSignIn = env.raw("REDEEM_APPLE_SERVICES_ID") != nil
    }
}

/// Where the gateway reads the roots Apple's signed data must chain to, and which app it must be
/// about. The roots are read once, at start: a file that holds no certificate stops the start.
public struct AppleSignedDataSettings: Sendable {
    public var rootCertificatesFile: String
    public var bundleId: String
    public var appAppleId: Int64

    static let names = ["REDEEM_APPLE_ROOT_CERTS", "REDEEM_APPLE_BUNDLE_ID", "REDEEM_APPLE_APP_ID"]

    /// nil when `REDEEM_APPLE_ROOT_CERTS` is not set (nothing signed is believed); with it, the
    /// bundle and app ids are required (exit 2). The two ids alone are fine: coupons and grants
    /// read them too, and one environment often serves every service.
    init?(env: Environment) throws {
        let values = Self.names.map { env.raw($0) }
        if values[0] == nil { return nil }
        for (name, value) in zip(Self.names, values) where value == nil {
            throw ConfigError(variable: name, problem: "required with REDEEM_APPLE_ROOT_CERTS")
        }
        rootCertificatesFile = values[0]!
        bundleId = values[1]!
        guard let id = Int64(values[2]!), id > 0 else {
            throw ConfigError(variable: "REDEEM_APPLE_APP_ID", problem: "expected the app's Apple id, a number such as 1234567890")
        }
        appAppleId = id
    }

    /// The verifier, with the roots read from the file: both environments are accepted, and each
    /// document says which it is from.
    func verifier() throws -> AppleSignedData {
        do {
            return try AppleSignedData(rootCertificatesFile: rootCertificatesFile, bundleId: bundleId, appAppleId: appAppleId,
                                       environments: Set(AppStoreEnvironment.allCases))
        } catch {
            throw ConfigError(variable: "REDEEM_APPLE_ROOT_CERTS", problem: "no certificate could be read from \(rootCertificatesFile)")
        }
    }
}
