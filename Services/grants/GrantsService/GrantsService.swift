import Backend
import Bus
import Core
import Cryptography
import Database
import Foundation
import Runtime
import Synchronization
import Telemetry

/// Grant commands to entitlements, the grant ledger, events and webhooks.
/// Owns schema `grants`.
public final class GrantsService: BackendService {
    public static let name = "grants"
    public static let migrator = Migrator(schema: "grants", migrations: GrantsMigrations.all, functions: GrantsFunctions.all)

    let runtime: ServiceRuntime
    let config: GrantsConfig
    let coupons: BusClient
    let events: EventPublisher
    let worker: GrantWorker
    /// Grants moved periods again under their holder's new id.
    let transfers: TransferWorker
    /// The store's view of holders, under `revenuecat`.
    let storeViews: StoreViews
    /// Another app's view of a holder, in its own RevenueCat project (docs/apps.md).
    let appStoreViews: AppStoreViews
    let deliverer: WebhookDeliverer
    /// Seals the webhook secrets and the apps' store settings as they are stored (`REDEEM_SECRET_KEY`).
    let keyring: SecretKeyring
    /// The entitlement providers by name: the deployment's and each app's RevenueCat project.
    let providers: ProviderDirectory
    /// App Store Connect, when the App Store is connected (docs/stores.md).
    let appStoreConnect: AppStoreConnectClient?
    /// The App Store Server API, when configured (`grants.appleTransaction`).
    let appStoreServer: AppStoreServerClient?
    /// The Google Play Developer API, when Google Play is connected (`grants.playPurchase`).
    let play: PlayDeveloperClient?
    /// Other apps' Google Play Developer API clients, from their own settings (docs/apps.md).
    let appPlay: AppPlayClients
    /// Makes and switches off store offers, when the App Store or Google Play is connected.
    let storeWorker: StoreTaskWorker
    /// Stripe, by the mode each key serves (docs/stripe.md): checkout and the billing portal.
    let stripe: [Mode: StripeClient]
    /// Tells RevenueCat of completed Stripe checkouts.
    let receipts: StripeReceiptWorker
    /// Other apps' Stripe clients, by app and mode, kept while their settings' version holds.
    let appStripeClients = Mutex<[String: AppStripeClient]>([:])
    private let intake = Mutex<Puller?>(nil)
    /// Commands arriving together are stored in one transaction and acknowledged in one request.
    private let commandBatches = Mutex<Coalescer<ReceivedCommand, Empty>?>(nil)
    /// The provider for live grants and the one for sandbox grants, of the default app.
    let liveProvider: String
    let sandboxProvider: String
    /// The providers of each app's grants.
    var providerChoice: ProviderChoice { ProviderChoice(defaultLive: liveProvider, defaultSandbox: sandboxProvider) }

    var pool: PGPool { runtime.pool }
    var logger: Logger { runtime.logger }

    public init(runtime: ServiceRuntime, env: Environment) throws {
        self.runtime = runtime
        config = try GrantsConfig(env: env)
        coupons = try BusClient(bus: runtime.bus, service: "coupons", connect: config.couponsBus, metrics: runtime.metrics)
        events = try EventPublisher(bus: runtime.bus, bind: config.eventsBind)
        var providers: [String: any EntitlementProvider] = ["local": LocalLedger(name: "local"), "local-sandbox": LocalLedger(name: "local-sandbox")]
        var limiters: [String: RateLimiter] = [:]
        if config.provider == "revenuecat", let key = config.revenueCatKey {
            let live = RevenueCat(name: "revenuecat", base: config.revenueCatURL, key: key, timeout: config.providerTimeout)
            providers["revenuecat"] = live
            limiters["revenuecat"] = RateLimiter(perSecond: config.providerRate)
            liveProvider = "revenuecat"
            storeViews = StoreViews(revenueCat: live)
        } else {
            liveProvider = "local"
            storeViews = StoreViews(revenueCat: nil)
        }
        if let key = config.revenueCatSandboxKey {
            providers["revenuecat-sandbox"] = RevenueCat(name: "revenuecat-sandbox", base: config.revenueCatURL, key: key, timeout: config.providerTimeout)
            limiters["revenuecat-sandbox"] = RateLimiter(perSecond: config.providerRate)
            sandboxProvider = "revenuecat-sandbox"
        } else {
            sandboxProvider = "local-sandbox"
        }
        keyring = try SecretKeyring(env: env)
        let directory = ProviderDirectory(
            fixed: providers, limiters: limiters, pool: runtime.pool, keyring: keyring,
            revenueCatURL: config.revenueCatURL, timeout: config.providerTimeout, rate: config.providerRate)
        self.providers = directory
        appStoreViews = AppStoreViews(providers: directory, pool: runtime.pool)
        worker = GrantWorker(
            pool: runtime.pool, logger: runtime.logger, metrics: runtime.metrics, coupons: coupons, events: events,
            providers: directory, retry: RetryPolicy(initial: 1, max: config.maxRetryDelay),
            lease: config.providerTimeout + 5,
            claimLimit: limiters.isEmpty ? 500 : max(1, min(500, Int(config.providerRate * 4))))
        transfers = TransferWorker(
            pool: runtime.pool, logger: runtime.logger, providers: directory,
            retry: RetryPolicy(initial: 1, max: config.maxRetryDelay), lease: config.providerTimeout + 5)
        deliverer = WebhookDeliverer(pool: runtime.pool, logger: runtime.logger, schedule: config.webhookSchedule, allowPrivate: config.webhookAllowPrivate,
                                     keyring: keyring)
        let appleRetry = AppleRetry(policy: RetryPolicy(initial: 1, max: config.maxRetryDelay)), timeout = config.providerTimeout
        appStoreConnect = config.appStoreConnect.map { AppStoreConnectClient(settings: $0, timeout: timeout, retry: appleRetry) }
        appStoreServer = config.appStoreServer.map { AppStoreServerClient(settings: $0, timeout: timeout, retry: appleRetry) }
        play = config.play.map { PlayDeveloperClient(settings: $0, timeout: timeout, retry: appleRetry) }
        appPlay = AppPlayClients(
            keyring: keyring, tokenURL: config.googleTokenURL, apiURL: config.playAPIURL, timeout: timeout,
            retry: appleRetry)
        // One try per call: a task Apple throttles is due again after its wait, holding up no other.
        let couponsBus = coupons, storeRetry = RetryPolicy(initial: 1, max: config.maxRetryDelay)
        let once = AppleRetry(policy: appleRetry.policy, maxAttempts: 1)
        let storeClient = config.appStoreConnect.map { AppStoreConnectClient(settings: $0, timeout: timeout, retry: once) }
        let playClient = config.play.map { PlayDeveloperClient(settings: $0, timeout: timeout, retry: once) }
        let appPlayTasks = AppPlayClients(
            keyring: keyring, tokenURL: config.googleTokenURL, apiURL: config.playAPIURL, timeout: timeout, retry: once)
        var stripeClients: [Mode: StripeClient] = [:]
        if let stripe = config.stripe {
            for mode in stripe.keys.modes {
                guard let key = stripe.keys.key(for: mode) else { continue }
                stripeClients[mode] = StripeClient(base: stripe.apiURL, key: key, timeout: timeout, retry: once)
            }
        }
        var checkoutClients: [Mode: StripeClient] = [:]
        if let settings = config.stripe {
            for mode in settings.keys.modes {
                guard let key = settings.keys.key(for: mode) else { continue }
                checkoutClients[mode] = StripeClient(base: settings.apiURL, key: key, timeout: timeout, retry: once)
            }
        }
        stripe = checkoutClients
        receipts = StripeReceiptWorker(
            pool: runtime.pool, logger: runtime.logger,
            receipts: RevenueCatStripeReceipts(base: config.revenueCatURL, timeout: timeout),
            defaultKey: config.revenueCatStripeKey,
            retry: RetryPolicy(initial: 1, max: config.maxRetryDelay), lease: timeout + 5)
        // Always there: test mode's tasks are simulated, with or without a store connected.
        storeWorker = StoreTaskWorker(
            pool: runtime.pool, logger: runtime.logger, report: { report in _ = try await couponsBus.request(report) },
            client: storeClient, play: playClient, stripe: stripeClients,
            appStores: { [keyring, url = config.appStoreConnectURL] c, app, mode in
                // Another app's own App Store settings (docs/apps.md), opened for this run.
                guard let o = try AppCredentials.opened(c, app: app, mode: mode, provider: .appStore, keyring: keyring),
                    let keyId = o.shown.keyId, let issuerId = o.shown.issuerId,
                    let key = o.secrets.privateKey.flatMap({ ES256Key.privateKey(pem: $0) })
                else { return nil }
                return AppStoreConnectClient(
                    base: url, token: AppleAPIToken(api: .appStoreConnect, keyId: keyId, issuerId: issuerId, key: key),
                    timeout: timeout, retry: once)
            },
            playApps: { c, app, mode in try appPlayTasks.client(c, app: app, mode: mode) },
            appStripe: { [keyring, config] c, app, mode in
                // Another app's own Stripe settings (docs/apps.md), opened for this run.
                try AppCredentials.opened(c, app: app, mode: mode, provider: .stripe, keyring: keyring)
                    .flatMap { GrantsService.appStripeClient($0, config: config) }
            },
            retry: storeRetry, lease: timeout * 8 + 30)
    }

    /// Commands are taken only once the schema exists; until then they stay in the coupons
    /// outbox and are re-sent.
    public func start() async throws {
        let resealed = try await Webhooks.resealSecrets(pool, keyring: keyring)
        if resealed > 0 { logger.info("webhook secrets sealed under the current secret key", ["webhooks.resealed": resealed]) }
        let settingsResealed = try await AppCredentials.reseal(pool, keyring: keyring)
        if settingsResealed > 0 {
            logger.info(
                "apps' store settings sealed under the current secret key", ["settings.resealed": settingsResealed])
        }
        var commands = BusRouter(logger: logger)
        commands.on(GrantCommand.self) { [self] command, context in
            try await storeCommand(ReceivedCommand(command, message: context.message))
            return Empty()
        }
        commands.on(StoreProvisionCommand.self) { [self] command, _ in
            try await storeTask(command.commandId, type: StoreProvisionCommand.type) { try StoreTasks.store($0, command) }
            return Empty()
        }
        commands.on(StoreSwitchCommand.self) { [self] command, _ in
            try await storeTask(command.commandId, type: StoreSwitchCommand.type) { try StoreTasks.store($0, command) }
            return Empty()
        }
        commands.on(WebhookEventNotice.self) { [self] notice, _ in
            try await pool.transaction { tx in
                try Webhooks.enqueue(
                    tx, type: notice.event, redemption: notice.subject, data: notice.data, mode: notice.mode,
                    app: DefaultApp.of(notice.app))
            }
            ack([notice.subject], type: WebhookEventNotice.type)
            return Empty()
        }
        commands.on(RedemptionCompletedNotice.self) { [self] notice, _ in
            try await pool.transaction { [receipts] tx in
                try Webhooks.enqueue(tx, type: .couponRedeemed, redemption: notice.redemption.redemptionId,
                                     data: WebhookData(notice.redemption, coupon: notice.coupon), mode: notice.couponMode,
                                     app: DefaultApp.of(notice.app))
                if let receipt = notice.stripeReceipt {
                    try receipts.store(
                        tx, receipt, redemption: notice.redemption.redemptionId, mode: notice.couponMode,
                        app: DefaultApp.of(notice.app))
                }
            }
            ack([notice.redemption.redemptionId], type: RedemptionCompletedNotice.type)
            if notice.stripeReceipt != nil { receipts.nudge() }
            events.publish(RedemptionsSettled([.init(redemptionId: notice.redemption.redemptionId, status: .completed)]))  // wakes long polls
            return Empty()
        }
        if intake.withLock({ $0 == nil }) {
            // A bind that fails (the address taken) fails the start with its reason, retried.
            let puller = try Puller(bus: runtime.bus, bind: config.commandsBind, router: commands)
            intake.withLock { $0 = puller }
        }
    }

    public func workers() -> [any Service] {
        let deliverer = self.deliverer, worker = self.worker, transfers = self.transfers
        return [Worker("grant worker") { await worker.run() },
                Worker("webhook deliverer") { await deliverer.run() },
                Worker("transfer worker") { await transfers.run() },
                Worker("store task worker") { [storeWorker] in await storeWorker.run() },
                Worker("stripe receipt worker") { [receipts] in await receipts.run() }]
    }

    public func stop() async {
        intake.withLock { $0?.stop() }
        events.stop()
        coupons.stop()
    }

    func storeCommand(_ c: ReceivedCommand) async throws {
        let batches = commandBatches.withLock { b -> Coalescer<ReceivedCommand, Empty> in
            if let b { return b }
            let made = Coalescer<ReceivedCommand, Empty>(maxBatch: 500) { [self] commands in await storeCommands(commands) }
            b = made
            return made
        }
        _ = try await batches.submit(c)
    }

    /// Stores a batch in one transaction, then acknowledges it.
    func storeCommands(_ commands: [ReceivedCommand]) async -> [Result<Empty, any Error>] {
        let worker = self.worker
        do {
            // Another app's grants go to its own RevenueCat project when its settings set one:
            // read once per app of the batch (the default app's need no read).
            var connecting = providerChoice
            for app in Set(commands.map { DefaultApp.of($0.command.app) }) where app != DefaultApp.id {
                connecting.connected[app] = try await providers.names(forApp: app)
            }
            let choice = connecting
            let leased = try await pool.transaction { tx in
                try GrantLedger.store(tx, commands, provider: choice.name(for:), lease: worker.leaseAtBirth)
            }
            worker.take(leased)
        } catch {
            logger.warning("grant commands not stored; they will be sent again", ["batch.size": commands.count, "error": String(describing: error)])
            return commands.map { _ in .failure(error) }
        }
        ack(commands.map(\.command.redemptionId), type: GrantCommand.type)
        storeViews.forget(commands.map(\.command.appUserId))
        worker.nudge()
        return commands.map { _ in .success(Empty()) }
    }

    /// Stores a store command (a repeat changes nothing), then acknowledges it: a command is
    /// acknowledged only once it is committed, so a kill -9 before that leaves it in the outbox.
    func storeTask(_ commandId: UUID, type: String, _ insert: @escaping @Sendable (PGConnection) throws -> Bool) async throws {
        do {
            try await pool.transaction { tx in _ = try insert(tx) }
        } catch {
            logger.warning("store command not stored; it will be sent again", ["type": type, "error": String(describing: error)])
            throw error
        }
        ack([commandId], type: type)
        storeWorker.nudge()
    }

    /// Tells coupons a message is stored, so its outbox stops re-sending it.
    func ack(_ ids: [UUID], type: String) {
        let coupons = self.coupons
        let logger = self.logger
        Task {
            do { _ = try await coupons.request(OutboxAck(redemptionIds: ids, type: type)) } catch {
                logger.debug("outbox ack not delivered; the command will come again", ["error": String(describing: error)])
            }
        }
    }

    public func router() -> BusRouter {
        var r = BusRouter(logger: logger)
        r.on(Grants.Entitlements.self) { [self] req, _ in
            try await entitlements(req.appUserId, app: DefaultApp.of(req.app))
        }
        r.on(Grants.StoreView.self) { [self] req, _ in
            let holder = try await pool.withConnection { try GrantLedger.currentHolder($0, req.appUserId) }
            let view: Grants.StoreView.Response?
            if let app = req.app, app != DefaultApp.id {
                view = try await appStoreViews.view(holder, app: app, fresh: req.fresh)
            } else {
                view = await storeViews.view(holder, fresh: req.fresh)
            }
            guard let view else {
                throw ServiceError(.unavailable, "the entitlement provider could not be read; try again")
            }
            return view
        }
        r.on(Grants.MoveHolder.self) { [self] req, _ in
            guard req.from != req.to else { return Empty() }
            let moved = try await pool.transaction { tx in try GrantLedger.move(tx, account: req.accountId, from: req.from, to: req.to) }
            storeViews.forget([req.from, req.to])
            if moved.new {
                logger.info("holder moved to its record name", ["account.id": req.accountId.lowercasedString, "grants.transfers": moved.transfers])
            }
            transfers.nudge()
            return Empty()
        }
        r.on(Grants.CreateWebhook.self) { [self] req, context in
            let url = try await Webhooks.checkURL(req.url, allowPrivate: config.webhookAllowPrivate)
            let events = try Webhooks.checkEvents(req.events)
            let secret = Webhooks.newSecret()
            let mode = Mode.of(req.mode)
            let app = DefaultApp.of(req.app)
            let id = UUID.random()
            let sealed = Webhooks.seal(secret: secret, endpoint: id, keyring: keyring)
            return try await pool.transaction { tx in
                let row = try tx.query("""
                    INSERT INTO grants.webhook_endpoints (id, url, events, secret, secret_key_id, mode, app_id)
                    VALUES ($1, $2, $3::text[], $4, $5, $6, $7)
                    RETURNING id, url, events, active, mode, created_at
                    """,
                    [
                        id, url.absoluteString, PGArray(events.map(\.rawValue)), sealed.text, sealed.keyId,
                        mode.rawValue, app
                    ]
                ).first!
                let endpoint = try Webhooks.endpointView(row)  // never the secret
                try Self.audit(
                    tx, req.actor, .webhookCreate, endpoint.id.uppercasedString, before: nil, after: endpoint, context,
                    mode,
                    app: app)
                return .init(endpoint: endpoint, secret: secret)
            }
        }
        r.on(Grants.ListWebhooks.self) { [self] req, _ in try await Webhooks.list(pool, req) }
        r.on(Grants.DeleteWebhook.self) { [self] req, context in
            let mode = Mode.of(req.mode)
            let app = DefaultApp.of(req.app)
            try await pool.transaction { tx in
                guard let before = try Webhooks.find(tx, id: req.id, mode: mode, app: app),
                    try Webhooks.delete(tx, id: req.id, mode: mode, app: app)
                else { throw ServiceError(.notFound, "no such webhook") }
                try Self.audit(
                    tx, req.actor, .webhookDelete, req.id.uppercasedString, before: before, after: nil, context, mode, app: app)
            }
            return Empty()
        }
        r.on(Grants.UpdateWebhook.self) { [self] req, context in try await updateWebhook(req, context) }
        r.on(Grants.RotateWebhookSecret.self) { [self] req, context in try await rotateSecret(req, context) }
        r.on(AppStores.Put.self) { [self] req, context in try await putAppStore(req, context) }
        r.on(AppStores.List.self) { [self] req, _ in
            try await pool.withConnection { .init(data: try AppCredentials.list($0, app: req.app, mode: req.mode)) }
        }
        r.on(AppStores.Clear.self) { [self] req, context in try await clearAppStore(req, context) }
        r.on(Grants.RetryDelivery.self) { [self] req, _ in
            try await pool.transaction { try Webhooks.retry($0, req) }
        }
        r.on(Grants.TestWebhook.self) { [self] req, _ in
            try await pool.withConnection {
                try Webhooks.enqueueTest($0, endpoint: req.id, mode: Mode.of(req.mode), app: DefaultApp.of(req.app))
            }
        }
        r.on(Audit.ReadGrants.self) { [self] req, _ in try await pool.withConnection { try AuditTable.read($0, schema: "grants", req.query) } }
        r.on(Grants.Deliveries.self) { [self] req, _ in try await Webhooks.deliveries(pool, req) }
        r.on(Grants.AppleTransaction.self) { [self] req, context in try await appleTransaction(req, deadline: context.deadline) }
        r.on(Grants.PlayPurchase.self) { [self] req, context in try await playPurchase(req, deadline: context.deadline) }
        r.on(Grants.StripeCheckout.self) { [self] req, _ in try await stripeCheckout(req) }
        r.on(Grants.StripePortal.self) { [self] req, _ in try await stripePortal(req) }
        r.on(Grants.StripePortalLink.self) { [self] req, _ in try await stripePortalLink(req) }
        r.on(Grants.StripeVerify.self) { [self] req, _ in try await stripeVerify(req) }
        return r
    }

    /// Redeem's grants of the holder in `app` (under the id it moved to, if it moved), merged
    /// when the app's grants go to `revenuecat` with the store's entries; Redeem's alone,
    /// `partial`, when the store is slow or down.
    func entitlements(_ appUserId: String, app: UUID) async throws -> Grants.Entitlements.Response {
        let (holder, ledger) = try await pool.withConnection { c in
            let holder = try GrantLedger.currentHolder(c, appUserId)
            return (holder, try GrantLedger.entitlements(c, appUserId: holder, app: app))
        }
        guard providerChoice.names(app: app).live == "revenuecat" else { return .init(data: ledger) }
        guard let view = await storeViews.view(holder, fresh: false) else { return .init(data: ledger, partial: true) }
        return .init(data: StoreViews.merge(ledger: ledger, store: view.entitlements))
    }
}
