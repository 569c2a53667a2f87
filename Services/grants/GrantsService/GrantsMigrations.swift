import Core
import Database
import Runtime

/// Schema `grants`: the grant ledger (one grant per redemption, by primary key) and webhooks
/// (one delivery per event and endpoint, by a unique constraint).
enum GrantsMigrations {
    static let all: [Migration] = [
        Migration(1, "grants", """
            CREATE TABLE grants (
                redemption_id uuid PRIMARY KEY,
                account_id uuid NOT NULL,
                app_user_id text NOT NULL,
                entitlement_id text NOT NULL,
                sandbox boolean NOT NULL,
                provider text NOT NULL,
                start_time timestamptz NOT NULL,
                -- computed once when the command is stored, reused by every attempt
                end_time timestamptz NOT NULL,
                status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
                attempts int NOT NULL DEFAULT 0,
                next_attempt_at timestamptz NOT NULL DEFAULT now(),
                failure_reason text,
                command text NOT NULL,
                coupons_notified boolean NOT NULL DEFAULT false,
                created_at timestamptz NOT NULL DEFAULT now(),
                settled_at timestamptz
            );
            CREATE INDEX grants_due ON grants (next_attempt_at) WHERE status = 'pending' OR NOT coupons_notified;
            CREATE INDEX grants_holder ON grants (app_user_id, entitlement_id, sandbox, end_time);

            CREATE TABLE webhook_endpoints (
                id uuid PRIMARY KEY,
                url text NOT NULL,
                events text[] NOT NULL,
                secret text NOT NULL,
                active boolean NOT NULL DEFAULT true,
                created_at timestamptz NOT NULL DEFAULT now(),
                disabled_at timestamptz,
                disabled_reason text
            );

            CREATE TABLE webhook_deliveries (
                id uuid PRIMARY KEY,
                endpoint_id uuid NOT NULL REFERENCES webhook_endpoints(id),
                webhook_id text NOT NULL,
                type text NOT NULL,
                payload text NOT NULL,
                status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
                attempts int NOT NULL DEFAULT 0,
                next_attempt_at timestamptz NOT NULL DEFAULT now(),
                last_status_code int,
                last_error text,
                created_at timestamptz NOT NULL DEFAULT now(),
                delivered_at timestamptz,
                UNIQUE (endpoint_id, webhook_id)
            );
            CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
            CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, created_at DESC, id DESC);
            """),
        // The statements every batch of grants runs are functions, so each connection keeps their
        // plans instead of planning them per batch, and they are planned with sequential scans off:
        // a kept plan does not follow the table's growth, and one made while the table was small
        // would read all of it every batch, for as long as the statistics lag behind a flash sale
        // (the reasoning of coupons migration 7; `GrantPlanTests`).
        Migration(2, "batch statements keep their plans", """
            SELECT 1; -- its functions are in SQL/, applied at every start
            """),
        // An entitlement ends by 9999-12-31T23:59:59.999Z at the latest: the last instant ISO 8601's
        // four-digit years write. Stacked long durations (1,000 years, ten times over) went past it.
        Migration(3, "entitlements end by the year 9999", """
            SELECT 1; -- its functions are in SQL/, applied at every start
            """),
        // Test mode and live mode are two worlds (SPEC §4.7): an endpoint belongs to the mode of the
        // key that made it and gets only the events of that mode's coupons; its deliveries are its
        // own. Endpoints made before were all live. From now on every insert names its mode.
        Migration(4, "webhook endpoints have a mode", """
            ALTER TABLE webhook_endpoints ADD COLUMN mode text NOT NULL DEFAULT 'live' CHECK (mode IN ('live', 'test'));
            ALTER TABLE webhook_endpoints ALTER COLUMN mode DROP DEFAULT;
            """),
        // The start of the last answer's body, at most 1 KiB (WebhookDeliverer.logExcerpt).
        Migration(5, "a delivery keeps the start of the last answer", """
            ALTER TABLE webhook_deliveries ADD COLUMN last_response text;
            """),
        // `store_round` takes its round as one typed value (a JSON array of `GrantLedger.RoundItem`)
        // instead of twelve positional arrays; the old signature goes, its successor is in SQL/.
        Migration(6, "store_round takes one typed value", """
            DROP FUNCTION IF EXISTS store_round(uuid[], uuid[], text[], text[], boolean[], text[], int[], int[], int[], int[], text[], float8[]);
            """),
        // App Store offers and their custom codes (docs/stores.md, "Grants and Apple's APIs"): one task
        // per (coupon, store, plan, action), so a command coupons' outbox sends again is stored once.
        // Each id Apple gives is recorded as it is learned, before the next call; `lease_token` is
        // the claim's, so an instance whose lease ran out cannot record over the one that took over.
        Migration(7, "store tasks", """
            CREATE TABLE store_tasks (
                id uuid PRIMARY KEY,
                coupon_id uuid NOT NULL,
                store text NOT NULL,
                product_id text NOT NULL,
                action text NOT NULL CHECK (action IN ('provision', 'switchOff')),
                command text NOT NULL,
                subscription_id text,
                offer_name text NOT NULL,
                -- the coupon's code, the custom code (upper case): Apple takes one once per app
                code text NOT NULL,
                offer_id text,
                custom_code_id text,
                code_created_at timestamptz,
                code_switched_off boolean NOT NULL DEFAULT false,
                offer_switched_off boolean NOT NULL DEFAULT false,
                status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'reporting', 'done', 'failed')),
                report text CHECK (report IN ('waitingForApple', 'failed')),
                attempts int NOT NULL DEFAULT 0,
                next_attempt_at timestamptz NOT NULL DEFAULT now(),
                lease_token uuid,
                last_error text,
                created_at timestamptz NOT NULL DEFAULT now(),
                finished_at timestamptz,
                UNIQUE (coupon_id, store, product_id, action)
            );
            CREATE INDEX store_tasks_due ON store_tasks (next_attempt_at) WHERE status IN ('pending', 'reporting');
            CREATE INDEX store_tasks_subscription ON store_tasks (subscription_id) WHERE action = 'provision';
            CREATE INDEX store_tasks_code ON store_tasks (code) WHERE action = 'provision';
            """),
        // An offer is switched off and back on as often as coupons asks (coupons migration 13), each
        // switch a task of its own with coupons' count (`generation`), run in that order.
        Migration(8, "store switches in order", """
            ALTER TABLE store_tasks ADD COLUMN generation int NOT NULL DEFAULT 0;
            ALTER TABLE store_tasks DROP CONSTRAINT store_tasks_action_check;
            ALTER TABLE store_tasks ADD CONSTRAINT store_tasks_action_check CHECK (action IN ('provision', 'switchOff', 'switchOn'));
            ALTER TABLE store_tasks DROP CONSTRAINT store_tasks_coupon_id_store_product_id_action_key;
            ALTER TABLE store_tasks ADD CONSTRAINT store_tasks_offer_action_generation UNIQUE (coupon_id, store, product_id, action, generation);
            -- a switch's PATCH of the code, and of the offer, is done
            ALTER TABLE store_tasks RENAME COLUMN code_switched_off TO code_switched;
            ALTER TABLE store_tasks RENAME COLUMN offer_switched_off TO offer_switched;
            CREATE INDEX store_tasks_switches ON store_tasks (coupon_id, store, product_id, generation) WHERE action <> 'provision';
            """),
        // Issue 22 §1. An account that adopts its CloudKit record name moves its grants to it:
        // `holder_moves` maps the id it left to the one it took (a command still naming the old id
        // is stored under the new one), and `transfers` grants each moved period again, with the
        // same end, at the provider under the new id. `store_round` answers the id it stored.
        Migration(9, "holders that move", """
            CREATE TABLE holder_moves (
                from_app_user_id text PRIMARY KEY,
                to_app_user_id text NOT NULL,
                account_id uuid NOT NULL,
                moved_at timestamptz NOT NULL DEFAULT now()
            );
            CREATE INDEX holder_moves_to ON holder_moves (to_app_user_id);
            CREATE INDEX grants_account ON grants (account_id, app_user_id);
            CREATE TABLE transfers (
                redemption_id uuid NOT NULL REFERENCES grants(redemption_id),
                app_user_id text NOT NULL,
                entitlement_id text NOT NULL,
                provider text NOT NULL,
                end_time timestamptz NOT NULL,
                status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed', 'cancelled')),
                attempts int NOT NULL DEFAULT 0,
                next_attempt_at timestamptz NOT NULL DEFAULT now(),
                last_error text,
                created_at timestamptz NOT NULL DEFAULT now(),
                settled_at timestamptz,
                PRIMARY KEY (redemption_id, app_user_id)
            );
            CREATE INDEX transfers_due ON transfers (next_attempt_at) WHERE status = 'pending';
            DROP FUNCTION IF EXISTS store_round(json);
            """),
        // Issue 25 §3: webhook secrets are sealed under REDEEM_SECRET_KEY (SecretKeyring), stored
        // as base64, with the id of the key beside them. NULL: a secret stored before, still
        // plain, which the service seals at its next start.
        Migration(10, "sealed webhook secrets", """
            ALTER TABLE webhook_endpoints ADD COLUMN secret_key_id text;
            """),
        // Issue 23: every operator change is recorded in the transaction that makes it.
        AuditTable.migration(11),
        Migration(12, "store tasks for Google Play base plans", """
            -- A Google Play offer is made per base plan; the App Store's tasks have none ('').
            ALTER TABLE store_tasks ADD COLUMN base_plan_id text NOT NULL DEFAULT '';
            ALTER TABLE store_tasks DROP CONSTRAINT store_tasks_offer_action_generation;
            ALTER TABLE store_tasks ADD CONSTRAINT store_tasks_offer_action_generation UNIQUE (coupon_id, store, product_id, base_plan_id, action, generation);
            ALTER TABLE store_tasks DROP CONSTRAINT store_tasks_report_check;
            ALTER TABLE store_tasks ADD CONSTRAINT store_tasks_report_check CHECK (report IN ('waitingForApple', 'waitingForGoogle', 'failed'));
            """),
        Migration(13, "no index of grants by account", """
            -- A grant's updates change its status and next attempt, so none is a HOT update and each
            -- writes every index of the table again: this one cost three index entries per completion
            -- (about 400 bytes of WAL) for a holder move, which is rare and finds its rows through
            -- grants_holder (app_user_id first) just as well.
            DROP INDEX grants_account;
            """),
    ]
}
