import Core
import Database
import Runtime

/// Schema `grants`: the grant ledger (one grant per redemption, by primary key) and webhooks
/// (one delivery per event and endpoint, by a unique constraint).
enum GrantsMigrations {
    /// Each migration is a file of `Migrations/` (`NNN_<what>.sql`), embedded at build time and
    /// applied in the order of its number (`SchemaFunctionsTests` checks the list against the folder).
    static let all: [Migration] = [
        Migration(file: "001_grants.sql", PackageResources._01_grants_sql),
        Migration(file: "002_batch_statements_keep_their_plans.sql", PackageResources._02_batch_statements_keep_their_plans_sql),
        Migration(file: "003_entitlements_end_by_the_year_9999.sql", PackageResources._03_entitlements_end_by_the_year_9999_sql),
        Migration(file: "004_webhook_endpoints_have_a_mode.sql", PackageResources._04_webhook_endpoints_have_a_mode_sql),
        Migration(file: "005_a_delivery_keeps_the_start_of_the_last_answer.sql", PackageResources._05_a_delivery_keeps_the_start_of_the_last_answer_sql),
        Migration(file: "006_store_round_takes_one_typed_value.sql", PackageResources._06_store_round_takes_one_typed_value_sql),
        Migration(file: "007_store_tasks.sql", PackageResources._07_store_tasks_sql),
        Migration(file: "008_store_switches_in_order.sql", PackageResources._08_store_switches_in_order_sql),
        Migration(file: "009_holders_that_move.sql", PackageResources._09_holders_that_move_sql),
        Migration(file: "010_sealed_webhook_secrets.sql", PackageResources._10_sealed_webhook_secrets_sql),
        // Every operator change is recorded in the transaction that makes it.
        AuditTable.migration(11),
        Migration(file: "012_store_tasks_for_google_play_base_plans.sql", PackageResources._12_store_tasks_for_google_play_base_plans_sql),
        Migration(file: "013_no_index_of_grants_by_account.sql", PackageResources._13_no_index_of_grants_by_account_sql),
        Migration(file: "014_store_tasks_of_test_mode.sql", PackageResources._14_store_tasks_of_test_mode_sql),
        // The audit log is a record: the services' runtime roles may add to it, never change or
        // erase it (docs/security.md, "The database").
        AuditTable.insertOnly(15),
        Migration(file: "016_store_tasks_for_stripe.sql", PackageResources._16_store_tasks_for_stripe_sql),
        Migration(file: "017_webhook_secrets_rotate.sql", PackageResources._17_webhook_secrets_rotate_sql),
        Migration(
            file: "018_stripe_customers_and_receipts.sql", PackageResources._18_stripe_customers_and_receipts_sql),
        Migration(file: "019_stripe_customers_are_claimed.sql", PackageResources._19_stripe_customers_are_claimed_sql),
        // Each entry belongs to one app (docs/apps.md).
        AuditTable.perApp(20),
        Migration(file: "021_webhook_endpoints_per_app.sql", PackageResources._21_webhook_endpoints_per_app_sql),
        Migration(file: "022_grants_per_app.sql", PackageResources._22_grants_per_app_sql),
        Migration(file: "023_app_store_settings.sql", PackageResources._23_app_store_settings_sql),
        Migration(file: "024_store_tasks_per_app.sql", PackageResources._24_store_tasks_per_app_sql),
        Migration(file: "025_stripe_per_app.sql", PackageResources._25_stripe_per_app_sql),
    ]
}
