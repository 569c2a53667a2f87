import Bus
import Core
import Cryptography
import Foundation
import HTTP
import Runtime
import Synchronization
import Telemetry

/// The only public HTTP surface: authenticates, rate-limits and turns HTTP into
/// bus requests. Stateless.
public final class Gateway: Sendable {
    public let config: GatewayConfig
    public let logger: Logger
    public let metrics = MetricsRegistry()
    /// This process's place on the bus: every bus socket of the gateway is made from it.
    let bus: BusNode
    let accounts: BusClient
    let coupons: BusClient
    let grants: BusClient
    let auth: Authenticator
    let events: EventSubscriber
    let grantEvents: EventSubscriber
    let waiters = SettlementWaiters()
    let abuse: AbuseGuard
    /// Verifies Apple's signed transactions and notifications; nil when `REDEEM_APPLE_ROOT_CERTS`
    /// and its companions are not set (then every signed document is refused).
    let appleSignedData: AppleSignedData?
    let googlePush: GooglePushVerifier?
    /// Concurrent validations, and reservations, of a code go to coupons together, one message
    /// per batch. Reservations have two messages away at a time, so coupons has the next batch
    /// when a transaction commits (see `ReservationBatcher`).
    let validations: Coalescer<Queued<Coupons.Validate>, Coupons.Validate.Response>
    let reservations: Coalescer<Queued<Coupons.Redeem>, Coupons.Redeem.Response>
    private let background = Mutex<[Task<Void, Never>]>([])
    /// Where this process is in its life, which alone decides `/readyz`: its bus sockets are made
    /// with it (`init` throws otherwise), it serves once the public port listens, and drains from
    /// the first stop.
    let lifecycle = Mutex<Lifecycle>(.starting)

    enum Lifecycle: String, Sendable {
        case starting
        case serving = "up"
        case draining
    }

    public init(config: GatewayConfig) throws {
        self.config = config
        logger = Logger(service: "gateway", minimum: config.logLevel)
        ProcessMetrics.register(on: metrics, service: "gateway")
        Tracer.shared.attach(metrics: metrics)
        bus = BusNode(config.bus, logger: logger)
        accounts = try BusClient(bus: bus, service: "accounts", connect: config.accountsBus, metrics: metrics, defaultTimeout: config.busTimeout)
        coupons = try BusClient(bus: bus, service: "coupons", connect: config.couponsBus, metrics: metrics, defaultTimeout: config.busTimeout)
        grants = try BusClient(bus: bus, service: "grants", connect: config.grantsBus, metrics: metrics, defaultTimeout: config.busTimeout)
        abuse = AbuseGuard(limits: config.limits)
        appleSignedData = try config.appleSignedData?.verifier()
        googlePush = config.googlePush.map(GooglePushVerifier.init)
        let coupons = self.coupons
        let limit = config.busTimeout
        validations = Coalescer(maxBatch: 256) { await Self.send($0, as: Coupons.ValidateMany.self, via: coupons, within: limit) }
        reservations = Coalescer(maxBatch: 256, lanes: 2) { await Self.send($0, as: Coupons.RedeemMany.self, via: coupons, within: limit) }
        let auth = Authenticator(accounts: accounts, logger: logger)
        self.auth = auth
        let logger = self.logger
        events = try EventSubscriber(bus: bus, service: "accounts", connect: config.accountsEvents, logger: logger, handlers: [
            SessionRevoked.topic: { data in
                if let e = EventSubscriber.decode(SessionRevoked.self, data, logger: logger) { auth.sessionRevoked(e.body) }
            },
            APIKeyRevoked.topic: { data in
                if let e = EventSubscriber.decode(APIKeyRevoked.self, data, logger: logger) { auth.apiKeyRevoked(e.body.id) }
            },
        ])
        let waiters = self.waiters
        grantEvents = try EventSubscriber(bus: bus, service: "grants", connect: config.grantsEvents, logger: logger, handlers: [
            RedemptionsSettled.topic: { data in
                guard !waiters.isEmpty else { return }
                if let e = EventSubscriber.decode(RedemptionsSettled.self, data, logger: logger) {
                    for r in e.body.redemptions { waiters.settled(r.redemptionId) }
                }
            },
        ])
    }

    /// Every route of the public API: the router answers these, and `/openapi.json` describes them.
    static let routes: [APIRoute] =
        operationsRoutes + pageRoutes + accountRoutes + appleRoutes + emailRoutes + couponRoutes + statsRoutes
        + customerRoutes + uniqueCodeRoutes + redemptionExportRoutes
        + planRoutes
        + storeRoutes + googleRoutes + stripeRoutes + testHelperRoutes + grantRoutes + auditRoutes + memberRoutes + appRoutes
        + appStoreRoutes
        + mcpRoutes + dashboardRoutes + dashboardSessionRoutes

    /// The router of `routes`.
    public func router() -> Router {
        _ = OpenAPIDocument.json  // made now: a description that cannot be made stops the start, not a request
        var r = Router(mapError: { error, request in GatewayErrors.response(for: error, request: request) })
        for route in Self.routes {
            r.add(route.method.rawValue, route.path, route.handler(self))
        }
        if config.opsOnPublicPort {
            for route in Self.internalRoutes where !Self.routes.contains(where: { $0.path == route.path && $0.method == route.method }) {
                r.add(route.method.rawValue, route.path, route.handler(self))
            }
        }
        return r
    }

    /// Starts background work: signing keys and revocation catch-up.
    func startBackground() {
        let auth = self.auth
        background.withLock { $0.append(Task { await auth.runSync() }) }
    }

    public func stop() {
        lifecycle.withLock { $0 = .draining }
        background.withLock { $0.forEach { $0.cancel() } }
        events.stop()
        grantEvents.stop()
        accounts.stop()
        coupons.stop()
        grants.stop()
    }
}

extension Gateway {
    /// The gateway's parts, in the order they start; they stop in reverse: the public HTTP
    /// server drains (up to 3 s), then the bus clients, subscriptions and key sync stop, then the
    /// bus node's lookups.
    public func group() -> ServiceGroup {
        let router = self.router()
        var options = HTTPServer.Options()
        options.host = config.httpHost
        options.port = config.httpPort
        options.threads = config.httpThreads
        options.trustedProxies = config.trustedProxies
        options.connectionsPerAddress = config.connectionsPerAddress
        options.headerTimeoutSeconds = Double(config.headerTimeoutSeconds)
        options.requestTimeoutSeconds = Double(config.requestTimeoutSeconds)
        options.trustedProxyHeader = config.trustedProxyHeader
        let cors = config.cors
        let server = HTTPServer(options: options, logger: logger, metrics: metrics) { request in
            var response: HTTPResponse
            if let preflight = cors.preflight(request) {
                response = preflight
            } else {
                response = await router.handle(request)
                response.headers += cors.headers(for: request)
            }
            response.headers += Gateway.securityHeaders
            response.headers.append(("Redeem-Version", Build.version))
            return response
        }
        var internalOptions = HTTPServer.Options()
        internalOptions.host = config.httpHost
        internalOptions.port = config.opsPort
        internalOptions.threads = 1
        let internalRouter = self.internalRouter()
        let internalServer = HTTPServer(options: internalOptions, logger: logger, metrics: nil, accessLog: false) { await internalRouter.handle($0) }
        let bus = self.bus
        return ServiceGroup([
            StartStopService("bus node", start: { bus.warnIfPlain() }, stop: { bus.stop() }),
            StartStopService("bus clients", start: { [self] in startBackground() }, stop: { [self] in stop() }),
            StartStopService("internal http", start: { [self] in
                try internalServer.start()
                logger.info("operations port listening", ["http.port": internalServer.port])
            }, stop: {
                await internalServer.stop(drainSeconds: 1)
            }),
            StartStopService("public http", start: { [self] in
                try server.start()
                lifecycle.withLock { if $0 == .starting { $0 = .serving } }
                logger.info("gateway listening", ["http.port": server.port])
            }, stop: { [self] in
                lifecycle.withLock { $0 = .draining }
                await server.stop(drainSeconds: 3)
            }),
        ], logger: logger)
    }
}

/// A request waiting for a batch, and since when.
struct Queued<Item: Sendable>: Sendable {
    let item: Item
    let since: ContinuousClock.Instant
    init(_ item: Item, since: ContinuousClock.Instant = .now) {
        self.item = item
        self.since = since
    }
}

extension Gateway {
    /// Sends a batch with what its oldest request has left of the bus timeout: a request that
    /// waited behind a batch which timed out (coupons hanging) must not then wait a whole timeout
    /// more for its own.
    static func send<B: BusBatch>(_ queued: [Queued<B.Item>], as batch: B.Type, via client: BusClient,
                                  within limit: Duration) async -> [Result<B.Item.Response, any Error>] {
        let oldest = queued.map(\.since).min() ?? .now
        let left = limit - (ContinuousClock.now - oldest)
        guard left > .milliseconds(10) else { return queued.map { _ in .failure(ServiceError.timeout) } }
        return await client.requestBatch(queued.map(\.item), as: batch, timeout: left)
    }
}
