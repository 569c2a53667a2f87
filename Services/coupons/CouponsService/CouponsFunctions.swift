import Database

/// The coupons schema's functions, each in a file of its own in `SQL/`, applied at every
/// start after the migrations (`Migrator`).
///
/// Why they are functions: the batch statements keep their plans (a PL/pgSQL function caches
/// them) instead of being planned per batch, and they are planned with sequential scans off. A kept
/// plan does not follow the table's growth: made while the table was small and freshly analyzed,
/// it would read the whole table once per account for as long as the statistics lag behind a flash
/// sale. So each lookup is one index probe per account, whatever the statistics say
/// (`RedemptionPlanTests`).
enum CouponsFunctions {
    static let all: [SQLFunction] = [
        SQLFunction(file: "held_by_account.sql", PackageResources.held_by_account_sql),
        SQLFunction(file: "veterans_by_account_in_app.sql", PackageResources.veterans_by_account_in_app_sql),
        SQLFunction(file: "validate_standing_in_app.sql", PackageResources.validate_standing_in_app_sql),
        // The previous release's forms, for its instances during a rolling upgrade only.
        SQLFunction(file: "validate_standing.sql", PackageResources.validate_standing_sql),
        SQLFunction(file: "veterans_by_account.sql", PackageResources.veterans_by_account_sql),
        SQLFunction(file: "ack_outbox.sql", PackageResources.ack_outbox_sql),
        SQLFunction(file: "complete_many_at.sql", PackageResources.complete_many_at_sql),
        SQLFunction(file: "store_offers_of.sql", PackageResources.store_offers_of_sql),
        SQLFunction(file: "redemption_stats.sql", PackageResources.redemption_stats_sql),
        SQLFunction(file: "count_redemption_changes.sql", PackageResources.count_redemption_changes_sql),
        SQLFunction(file: "fold_redemption_counts.sql", PackageResources.fold_redemption_counts_sql),
    ]
}
