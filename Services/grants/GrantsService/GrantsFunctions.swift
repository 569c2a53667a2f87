import Database

/// The grants schema's functions, each in a file of its own in `SQL/`, applied at every start
/// after the migrations (`Migrator`). They keep the batch statements' plans instead of planning
/// them per batch, planned with sequential scans off: a kept plan does not follow the table's
/// growth, and one made while the table was small would read all of it every batch, for as long as
/// the statistics lag behind a flash sale (`GrantPlanTests`; the reasoning of `CouponsFunctions`).
enum GrantsFunctions {
    static let all: [SQLFunction] = [
        SQLFunction(file: "store_round_columns.sql", PackageResources.store_round_columns_sql),
        SQLFunction(file: "store_round.sql", PackageResources.store_round_sql),
        SQLFunction(file: "settle_succeeded.sql", PackageResources.settle_succeeded_sql),
        SQLFunction(file: "claim_stripe_customer.sql", PackageResources.claim_stripe_customer_sql),
        SQLFunction(file: "record_stripe_customer.sql", PackageResources.record_stripe_customer_sql),
        SQLFunction(file: "release_stripe_customer.sql", PackageResources.release_stripe_customer_sql),
        SQLFunction(file: "claim_stripe_app_customer.sql", PackageResources.claim_stripe_app_customer_sql),
        SQLFunction(file: "record_stripe_app_customer.sql", PackageResources.record_stripe_app_customer_sql),
        SQLFunction(file: "release_stripe_app_customer.sql", PackageResources.release_stripe_app_customer_sql),
    ]
}
