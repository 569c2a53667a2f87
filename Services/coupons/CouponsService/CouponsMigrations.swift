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
    ]
}
