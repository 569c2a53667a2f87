import Bus
import Core
import Database
import Foundation
import Runtime
import Synchronization
import Telemetry

/// Runs the store tasks (`grants.store_tasks`) against App Store Connect and the Google Play
/// Developer API (docs/stores.md, "Grants and Apple's APIs"): claims due tasks of the stores it is
/// connected to under a lease (`FOR UPDATE SKIP LOCKED`, so several grants instances share them),
/// runs each on its own with `OfferProvisioner` or `PlayOfferProvisioner`, recording every id the
/// store gives before the next call, and reports a provisioning's end to coupons
/// (`coupons.storeOfferReport`) until coupons answers.
///
/// A test coupon's tasks are answered by `SimulatedStore` and never reach either store; any
/// instance runs them, connected to the stores or not.
///
/// Its client tries each call once: a 429 (its `Retry-After`), a 5xx or no answer ends the run and
/// the task is due again after Apple's wait or the backoff, so a throttled task holds up no other.
final class StoreTaskWorker: Sendable {
    let pool: PGPool
    let logger: Logger
    /// Sends a report to coupons (`coupons.storeOfferReport` on the bus); throws when coupons
    /// did not answer.
    let report: Report
    typealias Report = @Sendable (Coupons.StoreOfferReport) async throws -> Void
    /// The default app's App Store client (the environment's settings).
    let provisioner: OfferProvisioner?
    /// Opens another app's App Store settings of a mode and builds its client (docs/apps.md); nil
    /// when this worker makes no other app's offers.
    let appStores: AppStoreMaker?
    typealias AppStoreMaker = @Sendable (PGConnection, UUID, Mode) throws -> AppStoreConnectClient?
    /// Opens another app's Stripe settings of a mode and builds its client (docs/apps.md); nil
    /// when this worker makes no other app's Stripe objects.
    let appStripe: StripeMaker?
    typealias StripeMaker = @Sendable (PGConnection, UUID, Mode) throws -> StripeClient?
    /// The default app's Google Play client (the environment's settings).
    let play: PlayOfferProvisioner?
    /// Another app's Google Play client, from its own settings of a mode (docs/apps.md); nil
    /// when this worker makes no other app's offers.
    let playApps: PlayMaker?
    typealias PlayMaker = @Sendable (PGConnection, UUID, Mode) throws -> PlayDeveloperClient?
    /// Stripe, per Redeem mode: a test coupon's Stripe objects are made with the test key only.
    let stripe: [Mode: StripeOfferProvisioner]
    let retry: RetryPolicy
    /// Seconds a claimed task is held; a run makes at most six calls of at most `timeout` each.
    let lease: TimeInterval
    let interval: Duration
    private let doorbell = Doorbell()
    private let inFlight = Atomic<Int>(0)
    static let maxInFlight = 8

    init(pool: PGPool, logger: Logger, report: @escaping Report, client: AppStoreConnectClient?, play: PlayDeveloperClient? = nil,
         stripe: [Mode: StripeClient] = [:], appStores: AppStoreMaker? = nil, playApps: PlayMaker? = nil,
         appStripe: StripeMaker? = nil, retry: RetryPolicy, lease: TimeInterval,
         interval: Duration = .seconds(1)) {
        self.appStores = appStores
        self.playApps = playApps
        self.appStripe = appStripe
        self.stripe = stripe.mapValues(StripeOfferProvisioner.init(client:))
        self.pool = pool
        self.logger = logger
        self.report = report
        self.provisioner = client.map(OfferProvisioner.init(client:))
        self.play = play.map(PlayOfferProvisioner.init(client:))
        self.retry = retry
        self.lease = lease
        self.interval = interval
    }

    /// A task was stored, or one ended: look for due tasks now.
    func nudge() { doorbell.ring() }

    func run() async {
        await withDiscardingTaskGroup { group in
            await Periodic(every: interval, doorbell: doorbell).poll { () async -> Periodic.Next in
                let room = Self.maxInFlight - self.inFlight.load(ordering: .acquiring)
                let due = room > 0 ? await claim(limit: room) : []
                for task in due {
                    self.inFlight.wrappingAdd(1, ordering: .acquiringAndReleasing)
                    group.addTask {
                        await self.work(task)
                        self.inFlight.wrappingSubtract(1, ordering: .acquiringAndReleasing)
                        self.doorbell.ring()
                    }
                }
                return due.isEmpty ? .pause : .again
            }
        }
    }

    /// The stores this worker can call for the default app; tasks of the others wait for an
    /// instance that can. Another app's App Store and Google Play tasks are claimed while it has
    /// settings of that store.
    var stores: [Store] {
        (provisioner == nil ? [] : [.appStore]) + (play == nil ? [] : [.playStore]) + (stripe.isEmpty ? [] : [.stripe])
    }

    private func claim(limit: Int) async -> [StoreTasks.Claimed] {
        let lease = self.lease, stores = self.stores
        do { return try await pool.withConnection { try StoreTasks.claimDue($0, limit: limit, lease: lease, stores: stores) } } catch {
            logger.warning("store task claim failed", ["error": String(describing: error)])
            return []
        }
    }

    func work(_ task: StoreTasks.Claimed) async {
        do {
            switch task.action {
            case .provision: try await provision(task)
            case .switchOff, .switchOn: try await switchTo(task)
            }
        } catch is StoreTasks.LeaseLost {
            logger.info("store task taken over by another run", ["task": task.id.lowercasedString])
        } catch {
            logger.warning("store task not recorded; it runs again after its lease", ["task": task.id.lowercasedString, "error": String(describing: error)])
        }
    }

    private func record(_ task: StoreTasks.Claimed) -> OfferProvisioner.Record {
        let pool = self.pool
        return { progress in try await pool.withConnection { try StoreTasks.record($0, id: task.id, lease: task.lease, progress) } }
    }

    private func settle(_ task: StoreTasks.Claimed, _ status: StoreTaskStatus, report: StoreOfferState? = nil, error: String?,
                        after: TimeInterval = 0) async throws {
        try await pool.withConnection { try StoreTasks.settle($0, id: task.id, lease: task.lease, status: status, report: report, error: error, after: after) }
    }

    /// The pause before the next attempt: Apple's `Retry-After` at least, else the backoff.
    private func pause(_ task: StoreTasks.Claimed, after: TimeInterval?) -> TimeInterval {
        retry.delay(afterAttempt: task.attempts, retryAfter: after, random: Double.random(in: 0..<1))
    }

    private func provision(_ claimed: StoreTasks.Claimed) async throws {
        var task = claimed
        let command = try JSONDecoder.bus.decode(StoreProvisionCommand.self, from: Data(task.command.utf8))
        if task.status == .pending {
            var note: String?
            let outcome: AppStoreTaskOutcome
            switch command.store {
            case .stripe:
                // Stripe's own test mode, with the test key: never simulated.
                // No key of this mode here (or another app's settings just removed): due after its lease.
                guard let maker = try await stripeProvisioner(task) else { throw StoreTasks.LeaseLost() }
                outcome = await maker.provision(command, from: task.progress, record: record(task))
            case _ where task.mode == .test:
                outcome = SimulatedStore.provision(command, from: task.progress, now: Date())
            case .appStore: outcome = try await appStoreOutcome(claimed, command)
            case .playStore:
                // No client (another app's settings just removed): due again after its lease.
                guard let play = try await playOffers(task) else { throw StoreTasks.LeaseLost() }
                let result = await play.provision(command, from: task.progress, record: record(task))
                (outcome, note) = (result.outcome, result.note)
            }
            switch outcome {
            case .done(let progress):
                task.progress = progress
                task.report = command.store.waiting
                task.lastError = note
            case .failed(let message, let progress):
                task.progress = progress
                task.report = .failed
                task.lastError = message
                logger.warning("store offer not made", ["store": command.store.rawValue, "coupon": command.couponId.lowercasedString,
                                                        "product": command.productId, "error": message])
            case .retryLater(let after, let reason, _):
                try await settle(task, .pending, error: reason, after: pause(task, after: after))
                return
            }
            // Held for the lease while this run reports; due again at once if the report fails.
            try await settle(task, .reporting, report: task.report, error: task.lastError, after: lease)
            doorbell.ring()  // a switch may have waited for this provisioning
        }
        try await sendReport(task, couponId: command.couponId, store: command.store, productId: command.productId, basePlanId: command.basePlanId)
    }

    /// An App Store provisioning's outcome: refused before any call when another plan holds the
    /// code, else `OfferProvisioner`'s.
    private func appStoreOutcome(_ claimed: StoreTasks.Claimed, _ command: StoreProvisionCommand) async throws -> AppStoreTaskOutcome {
        // No client (another app's settings just removed): due again after its lease.
        guard let provisioner = try await appStore(claimed) else { throw StoreTasks.LeaseLost() }
        let (own, holder) = try await pool.withConnection { c in
            (try StoreTasks.ownActiveOffers(c, subscriptionId: command.subscriptionId, besides: claimed.id),
             try claimed.progress.offerId == nil ? StoreTasks.codeHolder(c, id: claimed.id) : nil)
        }
        if let holder {
            // Refused before any call: Apple would make the offer, then refuse its code.
            return .failed("the App Store takes a custom code once per app: \(command.code) is the code of \(holder)'s offer; "
                           + "make one coupon per App Store plan", claimed.progress)
        }
        return await provisioner.provision(AppStoreOfferSpec(command), from: claimed.progress, ownActiveOffers: own, record: record(claimed))
    }

    /// The App Store client of a task's app: the environment's for the default app (no read);
    /// another app's built from its own App Store settings of the task's mode, read at each run
    /// (tasks are few), nil when it has none now.
    private func appStore(_ task: StoreTasks.Claimed) async throws -> OfferProvisioner? {
        guard task.app != DefaultApp.id else { return provisioner }
        guard let appStores else { return nil }
        let client = try await pool.withConnection { c in try appStores(c, task.app, task.mode) }
        return client.map(OfferProvisioner.init(client:))
    }

    /// The Stripe provisioner of a task's app and mode: the environment's key for the default app
    /// (no read); another app's built from its own Stripe settings of the task's mode, read at
    /// each run, nil when it has none now.
    private func stripeProvisioner(_ task: StoreTasks.Claimed) async throws -> StripeOfferProvisioner? {
        guard task.app != DefaultApp.id else { return stripe[task.mode] }
        guard let appStripe else { return nil }
        let client = try await pool.withConnection { c in try appStripe(c, task.app, task.mode) }
        return client.map(StripeOfferProvisioner.init(client:))
    }

    /// The Google Play client of a task's app: the environment's for the default app (no read);
    /// another app's from its own Google Play settings of the task's mode (kept while they stay
    /// the same), nil when it has none now.
    private func playOffers(_ task: StoreTasks.Claimed) async throws -> PlayOfferProvisioner? {
        guard task.app != DefaultApp.id else { return play }
        guard let playApps else { return nil }
        let client = try await pool.withConnection { c in try playApps(c, task.app, task.mode) }
        return client.map(PlayOfferProvisioner.init(client:))
    }

    /// Reports the end of a task that has one (`report`) to coupons, then ends it; a report coupons
    /// did not answer is sent again after the backoff.
    private func sendReport(_ task: StoreTasks.Claimed, couponId: UUID, store: Store, productId: String, basePlanId: String?) async throws {
        guard let state = task.report else { return try await settle(task, .done, error: task.lastError) }
        let message = Coupons.StoreOfferReport(couponId: couponId, store: store, productId: productId, basePlanId: basePlanId, state: state,
                                              offerId: task.progress.offerId, customCodeId: task.progress.customCodeId,
                                              codeCreatedAt: task.progress.codeCreatedAt, message: task.lastError)
        do {
            try await report(message)
        } catch {
            logger.debug("store offer report not answered; sent again", ["error": String(describing: error)])
            return try await settle(task, .reporting, error: task.lastError, after: pause(task, after: nil))
        }
        try await settle(task, .done, error: task.lastError)
    }

    /// Switches an offer and its code off or back on. A switch-off ends there (`failed` with
    /// Apple's message if refused); a switch-on is reported to coupons like a provisioning
    /// (`waitingForApple`, which is `ready` again since the code settled long ago, or `failed`),
    /// because coupons holds the offer back (`creating`) until Apple has it on.
    private func switchTo(_ claimed: StoreTasks.Claimed) async throws {
        var task = claimed
        let command = try JSONDecoder.bus.decode(StoreSwitchCommand.self, from: Data(task.command.utf8))
        if task.status == .pending {
            var start = task.progress
            if start.offerId == nil { start.offerId = command.offerId }
            if start.customCodeId == nil { start.customCodeId = command.customCodeId }
            let outcome: AppStoreTaskOutcome
            var apple: OfferProvisioner?
            var google: PlayOfferProvisioner?
            if command.store == .appStore && task.mode == .live { apple = try await appStore(task) }
            if command.store == .playStore && task.mode == .live { google = try await playOffers(task) }
            switch (command.store, apple, google) {
            case (.stripe, _, _):
                // No key of this mode here (or another app's settings just removed): due after its lease.
                guard let maker = try await stripeProvisioner(task) else { throw StoreTasks.LeaseLost() }
                outcome = await maker.switchTo(active: command.active, from: start, record: record(task))
            case _ where task.mode == .test:
                outcome = SimulatedStore.switchTo(from: start)
            case (.appStore, let provisioner?, _):
                outcome = await provisioner.switchTo(active: command.active, subscriptionId: task.subscriptionId, offerName: command.offerName,
                                                     code: command.code, from: start, record: record(task))
            case (.playStore, _, let play?):
                outcome = await play.switchTo(active: command.active, command, product: task.subscriptionId, from: start, record: record(task))
            default:
                throw StoreTasks.LeaseLost()  // never claimed without the client
            }
            switch outcome {
            case .done(let progress):
                guard command.active else { return try await settle(task, .done, error: nil) }
                task.progress = progress
                task.report = command.store.waiting
                task.lastError = nil
            case .failed(let message, let progress):
                logger.warning(command.active ? "store offer not switched back on" : "store offer not switched off",
                               ["store": command.store.rawValue, "coupon": command.couponId.lowercasedString, "product": command.productId,
                                "error": message])
                guard command.active else { return try await settle(task, .failed, error: message) }
                task.progress = progress
                task.report = .failed
                task.lastError = message
            case .retryLater(let after, let reason, _):
                return try await settle(task, .pending, error: reason, after: pause(task, after: after))
            }
            try await settle(task, .reporting, report: task.report, error: task.lastError, after: lease)
            doorbell.ring()  // the offer's next switch may have waited for this one
        }
        try await sendReport(task, couponId: command.couponId, store: command.store, productId: command.productId, basePlanId: command.basePlanId)
    }
}

extension AppStoreOfferSpec {
    /// The offer a provision command asks for.
    init(_ command: StoreProvisionCommand) {
        self.init(subscriptionId: command.subscriptionId, offerName: command.offerName, code: command.code, kind: command.offer.kind,
                  percentOff: command.offer.percentOff, amountOff: command.offer.amountOff, duration: command.offer.duration,
                  periodCount: command.offer.periodCount, newCustomersOnly: command.newCustomersOnly,
                  maxRedemptions: command.maxRedemptions, expiresAt: command.expiresAt)
    }
}
