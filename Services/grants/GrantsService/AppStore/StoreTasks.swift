import Core
import Database
import Foundation

/// Where a store task is (`grants.store_tasks.status`).
enum StoreTaskStatus: String, Sendable, CaseIterable {
    /// Calls to Apple still to make.
    case pending
    /// The calls are done (or refused); coupons has not yet answered the report.
    case reporting
    /// Finished, and coupons knows.
    case done
    /// A switch-off Apple refused (its message in `last_error`).
    case failed
}

/// What grants does for a store command.
enum StoreTaskAction: String, Sendable, CaseIterable {
    case provision, switchOff, switchOn
}

/// `grants.store_tasks`: the store commands coupons' outbox sends (`grants.storeProvision`,
/// `grants.storeSwitch`), one row per (coupon, store, plan, action, switch generation), and what
/// the worker has got from Apple so far (docs/stores.md, "Grants and Apple's APIs").
enum StoreTasks {
    /// A task the worker claimed, with its lease.
    struct Claimed: Sendable {
        var id: UUID
        var action: StoreTaskAction
        var status: StoreTaskStatus
        var command: String
        var subscriptionId: String?
        /// `test`: simulated (`SimulatedStore`), never sent to the store.
        var mode: Mode
        /// The coupon's app: the default app's tasks use the environment's store settings, another
        /// app's its own (`AppCredentials`).
        var app: UUID
        var progress: AppStoreOfferProgress
        var attempts: Int
        var report: StoreOfferState?
        var lastError: String?
        var lease: UUID
    }

    /// Stores a provision command, in its coupon's mode and app; a repeat (the same coupon, store
    /// and plan) changes nothing. True when this call stored it.
    @discardableResult
    static func store(_ c: PGConnection, _ command: StoreProvisionCommand) throws -> Bool {
        try c.query("""
            INSERT INTO grants.store_tasks (id, coupon_id, store, product_id, action, command, subscription_id, offer_name, code, base_plan_id, mode,
                app_id)
            VALUES ($1, $2, $3, $4, 'provision', $5, $6, $7, upper($8), $9, $10, $11) ON CONFLICT DO NOTHING RETURNING id
            """, [command.commandId, command.couponId, command.store.rawValue, command.productId, try json(command),
                  command.subscriptionId, command.offerName, command.code, command.basePlanId ?? "",
                  command.mode.rawValue, DefaultApp.of(command.app)]).rows.count == 1
    }

    /// Stores a switch command (off or on), with the ids coupons knew; a repeat changes nothing.
    /// It takes the mode and app of its offer's provisioning (a switch reaches the store when the
    /// offer was made there, with the same settings), else its coupon's mode and the default app.
    @discardableResult
    static func store(_ c: PGConnection, _ command: StoreSwitchCommand) throws -> Bool {
        let action: StoreTaskAction = command.active ? .switchOn : .switchOff
        return try c.query("""
            INSERT INTO grants.store_tasks AS t (id, coupon_id, store, product_id, action, generation, command, offer_name, code, offer_id, custom_code_id,
                base_plan_id, mode, app_id)
            SELECT $1, $2, $3, $4, $5, $6, $7, $8, upper($9), $10, $11, $12, COALESCE(p.mode, $13), COALESCE(p.app_id, $14)
            FROM (SELECT 1) AS one LEFT JOIN grants.store_tasks p ON p.coupon_id = $2 AND p.store = $3 AND p.product_id = $4
                AND p.base_plan_id = $12 AND p.action = 'provision'
            ON CONFLICT DO NOTHING RETURNING id
            """, [command.commandId, command.couponId, command.store.rawValue, command.productId, action.rawValue, command.generation,
                  try json(command), command.offerName, command.code, command.offerId, command.customCodeId, command.basePlanId ?? "",
                  command.mode.rawValue, DefaultApp.id]).rows.count == 1
    }

    static func json<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try JSONEncoder.bus.encode(value), as: UTF8.self)
    }

    /// Claims due tasks with a lease of `lease` seconds (`FOR UPDATE SKIP LOCKED`: instances never
    /// take the same one). A switch waits while the provisioning of its (coupon, store, plan)
    /// still has calls to make, and, when no provisioning was stored (the two commands crossed),
    /// for a minute; and while a switch of an earlier generation is unfinished, so the last one
    /// coupons asked for is the one Apple is left with. A switch starts from the ids its
    /// provisioning recorded. Only tasks of `stores` (those this instance is connected to) are
    /// claimed; the others wait. Test-mode tasks are simulated, so any instance claims them, except
    /// Stripe's, which go to Stripe's own test mode with the test key (docs/stripe.md). `stores`
    /// are the default app's; another app's live App Store and Google Play tasks, and its Stripe
    /// tasks of either mode, are claimed by any instance while the app has settings of that store
    /// in the task's mode (docs/apps.md). An offer is (coupon, store, plan, base plan).
    static func claimDue(_ c: PGConnection, limit: Int, lease: TimeInterval, stores: [Store] = Store.allCases) throws -> [Claimed] {
        try c.query("""
            UPDATE grants.store_tasks t SET attempts = t.attempts + 1, next_attempt_at = now() + make_interval(secs => $2), lease_token = gen_random_uuid()
            WHERE t.id IN (
                SELECT s.id FROM grants.store_tasks s
                WHERE s.status IN ('pending', 'reporting') AND s.next_attempt_at <= now()
                  AND ((s.store = ANY($3::text[]) AND s.app_id = $4) OR (s.mode = 'test' AND s.store <> 'stripe')
                    OR (s.app_id <> $4 AND s.store IN ('appStore', 'playStore', 'stripe') AND EXISTS (
                        SELECT 1 FROM grants.app_store_settings a WHERE a.app_id = s.app_id AND a.mode = s.mode
                          AND a.provider = CASE s.store WHEN 'appStore' THEN 'appstore' WHEN 'playStore' THEN 'googleplay'
                            ELSE 'stripe' END)))
                  AND (s.action = 'provision' OR (COALESCE(
                        (SELECT p.status <> 'pending' FROM grants.store_tasks p
                         WHERE p.coupon_id = s.coupon_id AND p.store = s.store AND p.product_id = s.product_id
                           AND p.base_plan_id = s.base_plan_id AND p.action = 'provision'),
                        s.created_at < now() - interval '1 minute')
                    AND NOT EXISTS (SELECT 1 FROM grants.store_tasks e
                        WHERE e.coupon_id = s.coupon_id AND e.store = s.store AND e.product_id = s.product_id
                          AND e.base_plan_id = s.base_plan_id AND e.action <> 'provision'
                          AND e.generation < s.generation AND e.status IN ('pending', 'reporting'))))
                ORDER BY s.next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED
            )
            RETURNING t.id, t.action, t.status, t.command, t.mode, t.app_id, t.attempts, t.report, t.last_error, t.lease_token,
                t.code_created_at, t.code_switched, t.offer_switched,
                COALESCE(t.subscription_id, (SELECT p.subscription_id FROM grants.store_tasks p WHERE \(provisionOf))) AS subscription_id,
                COALESCE(t.offer_id, (SELECT p.offer_id FROM grants.store_tasks p WHERE \(provisionOf))) AS offer_id,
                COALESCE(t.custom_code_id, (SELECT p.custom_code_id FROM grants.store_tasks p WHERE \(provisionOf))) AS custom_code_id
            """, [limit, lease, PGArray(stores.map(\.rawValue)), DefaultApp.id]).rows.map { row in
            Claimed(id: try row.decode("id"), action: StoreTaskAction(rawValue: try row.decode("action")) ?? .provision,
                    status: StoreTaskStatus(rawValue: try row.decode("status")) ?? .pending, command: try row.decode("command"),
                    subscriptionId: try row.decodeIfPresent("subscription_id"),
                    mode: Mode(rawValue: try row.decode("mode")) ?? .live,
                    app: try row.decode("app_id"),
                    progress: AppStoreOfferProgress(offerId: try row.decodeIfPresent("offer_id"), customCodeId: try row.decodeIfPresent("custom_code_id"),
                                                    codeCreatedAt: try row.decodeIfPresent("code_created_at"),
                                                    codeSwitched: try row.decode("code_switched"), offerSwitched: try row.decode("offer_switched")),
                    attempts: try row.decode("attempts"), report: (try row.decodeIfPresent("report", as: String.self)).flatMap(StoreOfferState.init(rawValue:)),
                    lastError: try row.decodeIfPresent("last_error"), lease: try row.decode("lease_token"))
        }
    }

    /// The provisioning row of the task `t`'s (coupon, store, plan, base plan).
    static let provisionOf = """
        p.coupon_id = t.coupon_id AND p.store = t.store AND p.product_id = t.product_id AND p.base_plan_id = t.base_plan_id AND p.action = 'provision'
        """

    /// The task's lease was taken over (or the task is gone): nothing of this run may be recorded.
    struct LeaseLost: Error {}

    /// Records what provisioning or a switch has got so far, under the claim's lease.
    static func record(_ c: PGConnection, id: UUID, lease: UUID, _ p: AppStoreOfferProgress) throws {
        let updated = try c.query("""
            UPDATE grants.store_tasks SET offer_id = $3, custom_code_id = $4, code_created_at = $5, code_switched = $6, offer_switched = $7
            WHERE id = $1 AND lease_token = $2 RETURNING id
            """, [id, lease, p.offerId, p.customCodeId, p.codeCreatedAt, p.codeSwitched, p.offerSwitched]).rows.count
        guard updated == 1 else { throw LeaseLost() }
    }

    /// Moves a task on under its lease: to `status`, with its report and message, due again after
    /// `after` seconds (when it is still to run).
    static func settle(_ c: PGConnection, id: UUID, lease: UUID, status: StoreTaskStatus, report: StoreOfferState? = nil, error: String?,
                       after: TimeInterval = 0) throws {
        let updated = try c.query("""
            UPDATE grants.store_tasks SET status = $3, report = COALESCE($4, report), last_error = $5, next_attempt_at = now() + make_interval(secs => $6),
                finished_at = CASE WHEN $3 IN ('done', 'failed') THEN now() END
            WHERE id = $1 AND lease_token = $2 RETURNING id
            """, [id, lease, status.rawValue, report?.rawValue, error, after]).rows.count
        guard updated == 1 else { throw LeaseLost() }
    }

    /// Redeem's live offers for `subscriptionId` made at Apple and not switched off, other than
    /// task `id`'s: an offer counts unless its latest switch is off and done (one being switched
    /// back on counts already). Test mode's simulated offers are not at Apple, so never count.
    static func ownActiveOffers(_ c: PGConnection, subscriptionId: String, besides id: UUID) throws -> Int {
        try c.query("""
            SELECT count(*)::int AS n FROM grants.store_tasks t
            WHERE t.action = 'provision' AND t.store = 'appStore' AND t.mode = 'live' AND t.subscription_id = $1 AND t.id <> $2
              AND t.offer_id IS NOT NULL
              AND NOT EXISTS (SELECT 1 FROM grants.store_tasks s WHERE s.coupon_id = t.coupon_id AND s.store = t.store
                              AND s.product_id = t.product_id AND s.action = 'switchOff' AND s.offer_switched
                              AND NOT EXISTS (SELECT 1 FROM grants.store_tasks n WHERE n.coupon_id = t.coupon_id AND n.store = t.store
                                              AND n.product_id = t.product_id AND n.action = 'switchOn' AND n.generation > s.generation))
            """, [subscriptionId, id]).rows.first!.decode("n")
    }

    /// The plan whose offer holds task `id`'s custom code, when another does or goes first: Apple
    /// takes a custom code once per app, so of the provisionings asking for one code, one makes it
    /// (docs/stores.md, "One App Store plan per code"). Another goes first when it has its code
    /// already; else, of the same coupon, when its product id sorts first; else, of another coupon
    /// (the same code, made again after a deactivation), when it was stored first. A provisioning
    /// that failed holds nothing, nor does a test coupon's: its code is simulated, never Apple's,
    /// nor another app's: its codes are of its own Apple app.
    static func codeHolder(_ c: PGConnection, id: UUID) throws -> String? {
        try c.query("""
            SELECT o.product_id, o.coupon_id = t.coupon_id AS same_coupon FROM grants.store_tasks t
            JOIN grants.store_tasks o ON o.code = t.code AND o.store = t.store AND o.action = 'provision' AND o.id <> t.id AND o.mode = 'live'
                AND o.app_id = t.app_id
                AND o.report IS DISTINCT FROM 'failed'
            WHERE t.id = $1 AND (o.custom_code_id IS NOT NULL
                OR (o.coupon_id = t.coupon_id AND o.product_id < t.product_id)
                OR (o.coupon_id <> t.coupon_id AND (o.created_at, o.id) < (t.created_at, t.id)))
            ORDER BY o.custom_code_id IS NULL, o.created_at LIMIT 1
            """, [id]).rows.first.map { row in
            try row.decode("same_coupon", as: Bool.self)
                ? "plan \(try row.decode("product_id", as: String.self))" : "another coupon"
        }
    }
}
