import Core
import Database
import Runtime

/// Schema `coupons`. The cap and the one-use-per-account rule are constraints: `used_count` can
/// never pass `max_redemptions` (CHECK), an account holds at most one active redemption of a
/// coupon per environment (partial unique index), and a code names one coupon per mode (unique).
enum CouponsMigrations {
    static let all: [Migration] = [
        Migration(1, "coupons", """
            CREATE TABLE coupons (
                id uuid PRIMARY KEY,
                code text NOT NULL UNIQUE CHECK (code ~ '^[A-Z0-9_-]{3,64}$'),
                kind text NOT NULL CHECK (kind IN ('freePeriod', 'percentOff', 'amountOff')),
                percent_off int CHECK (percent_off BETWEEN 1 AND 100),
                amount_off numeric(12, 2) CHECK (amount_off > 0),
                currency text CHECK (currency ~ '^[A-Z]{3}$'),
                duration_unit text NOT NULL CHECK (duration_unit IN ('day', 'week', 'month', 'year')),
                duration_count int NOT NULL CHECK (duration_count >= 1),
                period_count int CHECK (period_count >= 1),
                entitlement_id text,
                product_ids text[] NOT NULL DEFAULT '{}',
                platforms text[] NOT NULL,
                starts_at timestamptz,
                expires_at timestamptz,
                max_redemptions int CHECK (max_redemptions >= 0),
                new_customers_only boolean NOT NULL DEFAULT false,
                active boolean NOT NULL DEFAULT true,
                mode text NOT NULL CHECK (mode IN ('live', 'test')),
                -- live uses held now: reserved, granting or completed (sandbox ones never count)
                used_count int NOT NULL DEFAULT 0 CHECK (used_count >= 0),
                created_at timestamptz NOT NULL DEFAULT now(),
                CHECK (max_redemptions IS NULL OR used_count <= max_redemptions),
                CHECK ((kind = 'percentOff') = (percent_off IS NOT NULL)),
                CHECK ((kind = 'amountOff') = (amount_off IS NOT NULL AND currency IS NOT NULL))
            );
            CREATE INDEX coupons_created ON coupons (created_at DESC, id DESC);

            CREATE TABLE redemptions (
                id uuid PRIMARY KEY,
                coupon_id uuid NOT NULL REFERENCES coupons(id),
                code text NOT NULL,
                account_id uuid NOT NULL,
                app_user_id text NOT NULL,
                platform text NOT NULL CHECK (platform IN ('ios', 'android', 'web')),
                product_id text,
                price_amount numeric(12, 2),
                price_currency text,
                store_transaction_id text UNIQUE,
                sandbox boolean NOT NULL,
                status text NOT NULL CHECK (status IN ('reserved', 'granting', 'completed', 'failed', 'released')),
                reserved_at timestamptz NOT NULL DEFAULT now(),
                reservation_expires_at timestamptz,
                completed_at timestamptz,
                ended_at timestamptz,
                failure_reason text,
                entitlement_id text,
                entitlement_expires_at timestamptz
            );
            -- One use per account per coupon (per environment) while it is held.
            CREATE UNIQUE INDEX redemptions_one_active ON redemptions (coupon_id, account_id, sandbox)
                WHERE status IN ('reserved', 'granting', 'completed');
            CREATE INDEX redemptions_coupon ON redemptions (coupon_id, reserved_at, id);
            CREATE INDEX redemptions_account ON redemptions (account_id, reserved_at DESC);
            CREATE INDEX redemptions_reserved_expiry ON redemptions (reservation_expires_at) WHERE status = 'reserved';

            -- Grant commands, written in the reservation's transaction (transactional outbox).
            CREATE TABLE outbox (
                id bigserial PRIMARY KEY,
                redemption_id uuid NOT NULL REFERENCES redemptions(id),
                type text NOT NULL,
                payload text NOT NULL,
                created_at timestamptz NOT NULL DEFAULT now(),
                attempts int NOT NULL DEFAULT 0,
                next_attempt_at timestamptz NOT NULL DEFAULT now(),
                acked_at timestamptz,
                UNIQUE (redemption_id, type)
            );
            CREATE INDEX outbox_pending ON outbox (next_attempt_at) WHERE acked_at IS NULL;
            """),
        // The one-use index leads with the account, so every lookup of "does this account hold
        // this coupon" (one account or a batch of them) is a descent by account. Led by the coupon,
        // a planner working from statistics that lag behind a burst of inserts read all of a hot
        // coupon's redemptions, or the whole index, once per batch.
        Migration(2, "one-use index by account", """
            CREATE UNIQUE INDEX redemptions_one_active_by_account ON redemptions (account_id, coupon_id, sandbox)
                WHERE status IN ('reserved', 'granting', 'completed');
            DROP INDEX redemptions_one_active;
            ALTER INDEX redemptions_one_active_by_account RENAME TO redemptions_one_active;
            """),
        // Acknowledged outbox rows are deleted at once (they were marked, then pruned an hour later).
        Migration(3, "outbox rows leave on acknowledgement", """
            DELETE FROM outbox WHERE acked_at IS NOT NULL;
            DROP INDEX outbox_pending;
            ALTER TABLE outbox DROP COLUMN acked_at;
            CREATE INDEX outbox_due ON outbox (next_attempt_at);
            """),
        // Only discount purchases carry a store transaction: index those alone, so inserting and
        // completing a free-period redemption maintains one index fewer.
        Migration(4, "store transaction index without nulls", """
            ALTER TABLE redemptions DROP CONSTRAINT redemptions_store_transaction_id_key;
            CREATE UNIQUE INDEX redemptions_store_transaction_id_key ON redemptions (store_transaction_id)
                WHERE store_transaction_id IS NOT NULL;
            """),
        // An outbox row is keyed by its redemption and type, and written in that redemption's own
        // transaction: the serial id (an index and a sequence) and the foreign key (a lookup and a
        // lock on the new redemption, per message) guarded nothing those do not.
        Migration(5, "outbox keyed by redemption", """
            ALTER TABLE outbox DROP CONSTRAINT outbox_redemption_id_fkey;
            ALTER TABLE outbox DROP CONSTRAINT outbox_pkey, DROP COLUMN id;
            ALTER TABLE outbox DROP CONSTRAINT outbox_redemption_id_type_key, ADD PRIMARY KEY (redemption_id, type);
            """),
        // Completing a redemption changes no indexed column, so PostgreSQL updates it in place on
        // its page (a HOT update) instead of adding an entry to every index. The one-use index
        // keys on a stored `holds_use` flag, which stays true from reserved to completed, where it
        // keyed on `status` itself; the expiry index holds only rows that have an expiry, which
        // is cleared when a reservation ends. Pages are filled half, as every redemption is updated
        // once after its insert: the new version of each fits beside it (at 80 %, half did not).
        Migration(6, "completion is a HOT update", """
            ALTER TABLE redemptions ADD COLUMN holds_use boolean NOT NULL
                GENERATED ALWAYS AS (status IN ('reserved', 'granting', 'completed')) STORED;
            CREATE UNIQUE INDEX redemptions_one_use ON redemptions (account_id, coupon_id, sandbox) WHERE holds_use;
            DROP INDEX redemptions_one_active;
            ALTER INDEX redemptions_one_use RENAME TO redemptions_one_active;
            UPDATE redemptions SET reservation_expires_at = NULL WHERE status <> 'reserved' AND reservation_expires_at IS NOT NULL;
            DROP INDEX redemptions_reserved_expiry;
            CREATE INDEX redemptions_reserved_expiry ON redemptions (reservation_expires_at) WHERE reservation_expires_at IS NOT NULL;
            ALTER TABLE redemptions SET (fillfactor = 50);
            """),
        // The lookups of a batch by account (`RedemptionStore.BatchSQL`) are functions, so each
        // connection keeps their plans: planning the statement took more of PostgreSQL's time
        // than running it (0.33 of 0.57 ms). They are planned with sequential scans off, because
        // a kept plan does not follow the table's growth: made while the table was small and
        // freshly analyzed, it would read the whole table once per account for as long as the
        // statistics lag behind a flash sale. So each lookup is one index probe per account,
        // whatever the statistics say (`RedemptionPlanTests`).
        Migration(7, "batch lookups keep their plans", """
            SELECT 1; -- its functions are in SQL/, applied at every start
            """),
        // The same for the statements of each completion batch, by redemption id: its outbox
        // message leaves, and its redemption completes.
        Migration(8, "completion statements keep their plans", """
            SELECT 1; -- its functions are in SQL/, applied at every start
            """),
        // complete_many answering each redemption's completion time (grants puts it in the webhook),
        // kept to the millisecond the wire carries so both round the same value.
        Migration(9, "completions answer their time", """
            SELECT 1; -- its functions are in SQL/, applied at every start
            """),
        // Test mode and live mode are two worlds (SPEC §4.7): a code is unique within its mode, so
        // the same code may exist once in each. Every coupon already has its mode (its creating
        // key's). Messages still in the outbox get their coupon's mode, which grants routes their
        // webhooks by; redemptions take their mode from their coupon and need no column.
        Migration(10, "a code once per mode", """
            ALTER TABLE coupons DROP CONSTRAINT coupons_code_key;
            ALTER TABLE coupons ADD CONSTRAINT coupons_code_mode_key UNIQUE (code, mode);
            UPDATE outbox o SET payload = jsonb_set(o.payload::jsonb, '{body,mode}', to_jsonb(c.mode))::text
            FROM redemptions r JOIN coupons c ON c.id = r.coupon_id
            WHERE r.id = o.redemption_id AND jsonb_typeof(o.payload::jsonb -> 'body') = 'object';
            """),
        // complete_many (migration 8) has had no caller since complete_many_at (migration 9). From
        // here on, functions live in SQL/, one file each, and are applied at every start.
        Migration(11, "drop the unused complete_many", """
            DROP FUNCTION IF EXISTS complete_many(uuid[], text[], timestamptz[]);
            """),
        // Plans, store offers and store purchases (docs/stores.md, "Data"). The invariants are the
        // database's: one plan per product id in each mode; one offer per (coupon, store, plan) and
        // a name no other offer has (a transaction's offerIdentifier finds it); one purchase row per
        // purchase chain, and one chain per redemption (so one coupon.redeemed per chain).
        //
        // The cap: `used_count` still never passes `max_redemptions` (CHECK). A store purchase that
        // arrives once the cap is full is still recorded: its redemption completes without taking a
        // use of the counter, and its purchase row says `over_cap`. The coupon's figures count it
        // (`redeemedCount`, and `overCapCount`).
        //
        // A store purchase no account has claimed yet is a completed redemption without an account
        // (`account_id` NULL), never a reservation. A redemption waiting for the App Store keeps the
        // `app_account_token` it handed the app, to find it when Apple's notification names it.
        // The CHECKs are NOT VALID: every row before this migration has its account.
        Migration(12, "plans, store offers and store purchases", """
            CREATE TABLE plans (
                id uuid NOT NULL UNIQUE,
                mode text NOT NULL CHECK (mode IN ('live', 'test')),
                product_id text NOT NULL CHECK (product_id ~ '^[A-Za-z0-9._-]{1,200}$'),
                name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
                app_store_subscription_id text,
                play_product_id text,
                play_base_plan_ids text[],
                created_at timestamptz NOT NULL DEFAULT now(),
                updated_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (mode, product_id),
                CHECK ((play_product_id IS NULL) = (play_base_plan_ids IS NULL))
            );
            CREATE INDEX plans_created ON plans (mode, created_at DESC, id DESC);

            -- Whether validate and redeem on iOS read the coupon's store offers: a coupon without
            -- any costs them no query.
            ALTER TABLE coupons ADD COLUMN has_store_offers boolean NOT NULL DEFAULT false;

            CREATE TABLE store_offers (
                coupon_id uuid NOT NULL REFERENCES coupons(id),
                store text NOT NULL CHECK (store IN ('appStore')),
                product_id text NOT NULL,
                -- 'ready' is never stored: it is worked out when read (StoreOfferReadiness).
                state text NOT NULL DEFAULT 'creating' CHECK (state IN ('creating', 'waitingForApple', 'failed')),
                offer_name text NOT NULL UNIQUE,
                offer_id text,
                custom_code_id text,
                message text,
                created_at timestamptz NOT NULL DEFAULT now(),
                updated_at timestamptz NOT NULL DEFAULT now(),
                code_created_at timestamptz,
                first_purchase_at timestamptz,
                -- when coupons asked grants to switch the offer off
                switched_off_at timestamptz,
                PRIMARY KEY (coupon_id, store, product_id),
                CHECK (state <> 'waitingForApple' OR code_created_at IS NOT NULL)
            );

            ALTER TABLE redemptions ALTER COLUMN account_id DROP NOT NULL, ALTER COLUMN app_user_id DROP NOT NULL,
                ADD COLUMN app_account_token uuid;
            ALTER TABLE redemptions ADD CONSTRAINT redemptions_account_whole CHECK ((account_id IS NULL) = (app_user_id IS NULL)) NOT VALID;
            ALTER TABLE redemptions ADD CONSTRAINT redemptions_unattributed_completed CHECK (account_id IS NOT NULL OR completed_at IS NOT NULL) NOT VALID;
            -- Only redemptions that go through the App Store have a token: Apple's notification finds
            -- its reservation by it, and a full cap looks for reservations still waiting for Apple.
            CREATE INDEX redemptions_app_account_token ON redemptions (app_account_token, coupon_id) WHERE app_account_token IS NOT NULL;
            CREATE INDEX redemptions_through_app_store ON redemptions (coupon_id) WHERE app_account_token IS NOT NULL;

            CREATE TABLE store_purchases (
                store text NOT NULL CHECK (store IN ('appStore')),
                original_transaction_id text NOT NULL CHECK (length(original_transaction_id) BETWEEN 1 AND 200),
                transaction_id text NOT NULL,
                coupon_id uuid NOT NULL REFERENCES coupons(id),
                redemption_id uuid NOT NULL UNIQUE REFERENCES redemptions(id),
                -- who was matched or posted it (the redemption may still be unattributed)
                account_id uuid,
                app_account_token uuid,
                product_id text NOT NULL,
                store_product_id text NOT NULL,
                offer_name text NOT NULL,
                price_milliunits bigint CHECK (price_milliunits >= 0),
                currency text CHECK (currency ~ '^[A-Z]{3}$'),
                sandbox boolean NOT NULL,
                over_cap boolean NOT NULL DEFAULT false,
                purchase_date timestamptz NOT NULL,
                received_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (store, original_transaction_id),
                CHECK (NOT (over_cap AND sandbox))
            );
            CREATE INDEX store_purchases_coupon ON store_purchases (coupon_id) WHERE over_cap;

            CREATE TABLE store_notifications (
                notification_uuid text PRIMARY KEY CHECK (length(notification_uuid) BETWEEN 1 AND 100),
                received_at timestamptz NOT NULL DEFAULT now()
            );
            CREATE INDEX store_notifications_received ON store_notifications (received_at);

            COMMENT ON COLUMN outbox.redemption_id IS
                'the message''s key: its redemption, or for a store command a key derived from (command, coupon, store, plan)';
            """),
        Migration(13, "store offers switch back on", """
            -- How many times coupons asked grants to switch the offer off or on: each command carries
            -- the count, and grants runs an offer's switches in its order.
            ALTER TABLE store_offers ADD COLUMN switch_generation int NOT NULL DEFAULT 0 CHECK (switch_generation >= 0);
            CREATE INDEX store_offers_switched_off ON store_offers (coupon_id) WHERE switched_off_at IS NOT NULL;
            """),
        // Issue 23: every operator change is recorded in the transaction that makes it.
        AuditTable.migration(14),
        Migration(15, "Google Play offers, one per base plan", """
            -- Whether the coupon has Google Play offers (has_store_offers stays the App Store's): only
            -- such a coupon costs validate and redeem on Android a query of its offers.
            ALTER TABLE coupons ADD COLUMN has_play_offers boolean NOT NULL DEFAULT false;

            -- A Play offer is made on each base plan of a plan; the App Store's rows have none ('').
            ALTER TABLE store_offers ADD COLUMN base_plan_id text NOT NULL DEFAULT '';
            ALTER TABLE store_offers DROP CONSTRAINT store_offers_pkey;
            ALTER TABLE store_offers ADD PRIMARY KEY (coupon_id, store, product_id, base_plan_id);
            ALTER TABLE store_offers DROP CONSTRAINT store_offers_store_check;
            ALTER TABLE store_offers ADD CONSTRAINT store_offers_store_check CHECK (store IN ('appStore', 'playStore'));
            ALTER TABLE store_offers ADD CONSTRAINT store_offers_base_plan CHECK ((store = 'playStore') = (base_plan_id <> ''));
            ALTER TABLE store_offers DROP CONSTRAINT store_offers_state_check;
            ALTER TABLE store_offers ADD CONSTRAINT store_offers_state_check
                CHECK (state IN ('creating', 'waitingForApple', 'waitingForGoogle', 'failed'));
            -- A coupon's Play offer has one id on each of its base plans (Google wants it unique per base
            -- plan); an App Store offer's name stays unique, as Apple's transactions find it by name.
            ALTER TABLE store_offers DROP CONSTRAINT store_offers_offer_name_key;
            CREATE UNIQUE INDEX store_offers_offer_name ON store_offers (offer_name) WHERE store = 'appStore';
            CREATE UNIQUE INDEX store_offers_play_offer ON store_offers (offer_name, product_id, base_plan_id) WHERE store = 'playStore';
            ALTER TABLE store_purchases DROP CONSTRAINT store_purchases_store_check;
            ALTER TABLE store_purchases ADD CONSTRAINT store_purchases_store_check CHECK (store IN ('appStore', 'playStore'));
            -- code_created_at is when Google activated the offer: the settle time counts from there.
            ALTER TABLE store_offers ADD CONSTRAINT store_offers_google_activated CHECK (state <> 'waitingForGoogle' OR code_created_at IS NOT NULL);
            """),
        Migration(16, "a deleted account's redemptions name nobody", """
            -- Deleting an account ends its reservations still waiting for a purchase and then takes its
            -- id off every one of its redemptions (issue 22 section 4). Only a reservation waiting for
            -- its purchase must name its account, which the purchase is attributed to.
            ALTER TABLE redemptions DROP CONSTRAINT redemptions_unattributed_completed;
            ALTER TABLE redemptions ADD CONSTRAINT redemptions_reservation_attributed CHECK (account_id IS NOT NULL OR status <> 'reserved');
            """),
    ]
}
