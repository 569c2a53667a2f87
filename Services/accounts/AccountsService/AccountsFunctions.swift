import Database

/// The accounts schema's functions, each in a file of its own in `SQL/`, applied at every start
/// after the migrations (`Migrator`): the Idempotency-Key's claim, answer, release and pruning,
/// whose steps must happen under one row lock, and an operator's lookup of end users' accounts.
enum AccountsFunctions {
    static let all: [SQLFunction] = [
        // The previous release's `members.role`, kept for its pods during a rolling upgrade only.
        SQLFunction(file: "member_default_role.sql", PackageResources.member_default_role_sql),
        SQLFunction(file: "idempotency_begin.sql", PackageResources.idempotency_begin_sql),
        SQLFunction(file: "idempotency_finish.sql", PackageResources.idempotency_finish_sql),
        SQLFunction(file: "idempotency_release.sql", PackageResources.idempotency_release_sql),
        SQLFunction(file: "idempotency_prune.sql", PackageResources.idempotency_prune_sql),
        SQLFunction(file: "find_customers.sql", PackageResources.find_customers_sql),
    ]
}
