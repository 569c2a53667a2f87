import Core
import Database
import Runtime

/// Schema `coupons`. The cap and the one-use-per-account rule are constraints: `used_count` can
/// never pass `max_redemptions` (CHECK), an account holds at most one active redemption of a
/// coupon per environment (partial unique index), and a code names one coupon per mode (unique).
enum CouponsMigrations {
    /// Each migration is a file of `Migrations/` (`NNN_<what>.sql`), embedded at build time and
    /// applied in the order of its number (`SchemaFunctionsTests` checks the list against the folder).
    static let all: [Migration] = [
        Migration(file: "001_coupons.sql", PackageResources._01_coupons_sql),
        Migration(file: "002_one_use_index_by_account.sql", PackageResources._02_one_use_index_by_account_sql),
        Migration(
            file: "003_outbox_rows_leave_on_acknowledgement.sql",
            PackageResources._03_outbox_rows_leave_on_acknowledgement_sql),
        Migration(
            file: "004_store_transaction_index_without_nulls.sql",
            PackageResources._04_store_transaction_index_without_nulls_sql),
        Migration(file: "005_outbox_keyed_by_redemption.sql", PackageResources._05_outbox_keyed_by_redemption_sql),
        Migration(file: "006_completion_is_a_hot_update.sql", PackageResources._06_completion_is_a_hot_update_sql),
        Migration(
            file: "007_batch_lookups_keep_their_plans.sql", PackageResources._07_batch_lookups_keep_their_plans_sql),
        Migration(
            file: "008_completion_statements_keep_their_plans.sql",
            PackageResources._08_completion_statements_keep_their_plans_sql),
        Migration(
            file: "009_completions_answer_their_time.sql", PackageResources._09_completions_answer_their_time_sql),
        Migration(file: "010_a_code_once_per_mode.sql", PackageResources._10_a_code_once_per_mode_sql),
        Migration(
            file: "011_drop_the_unused_complete_many.sql", PackageResources._11_drop_the_unused_complete_many_sql),
        Migration(
            file: "012_plans_store_offers_and_store_purchases.sql",
            PackageResources._12_plans_store_offers_and_store_purchases_sql),
        Migration(file: "013_store_offers_switch_back_on.sql", PackageResources._13_store_offers_switch_back_on_sql),
        // Every operator change is recorded in the transaction that makes it.
        AuditTable.migration(14),
        Migration(
            file: "015_google_play_offers_one_per_base_plan.sql",
            PackageResources._15_google_play_offers_one_per_base_plan_sql),
        Migration(
            file: "016_a_deleted_account_s_redemptions_name_nobody.sql",
            PackageResources._16_a_deleted_account_s_redemptions_name_nobody_sql),
        // The audit log is a record: the services' runtime roles may add to it, never change or
        // erase it (docs/security.md, "The database").
        AuditTable.insertOnly(17),
        Migration(
            file: "018_free_periods_in_app_by_choice.sql", PackageResources._18_free_periods_in_app_by_choice_sql),
        Migration(
            file: "019_a_custom_code_per_app_store_plan.sql", PackageResources._19_a_custom_code_per_app_store_plan_sql),
        Migration(
            file: "020_stripe_coupons_and_plan_prices.sql", PackageResources._20_stripe_coupons_and_plan_prices_sql),
        Migration(
            file: "021_unique_codes_by_the_thousand.sql", PackageResources._21_unique_codes_by_the_thousand_sql),
        Migration(
            file: "022_one_time_redemption_exports.sql", PackageResources._22_one_time_redemption_exports_sql),
        Migration(
            file: "023_coupon_names_and_metadata.sql", PackageResources._23_coupon_names_and_metadata_sql),
        Migration(
            file: "024_held_uses_looked_up_by_coupon.sql", PackageResources._24_held_uses_looked_up_by_coupon_sql),
        // Each entry belongs to one app (docs/apps.md).
        AuditTable.perApp(25),
        Migration(file: "026_coupons_and_plans_per_app.sql", PackageResources._26_coupons_and_plans_per_app_sql),
        Migration(
            file: "027_redemption_counts_kept_as_they_change.sql",
            PackageResources._27_redemption_counts_kept_as_they_change_sql),
    ]
}
