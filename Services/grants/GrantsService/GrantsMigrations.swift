import Shared

enum GrantsMigrations {
    static let all: [Migration] = [
        Migration(1, "grants", """
            CREATE TABLE grants (
                redemption_id uuid PRIMARY KEY,
                app_user_id text NOT NULL,
                entitlement_id text NOT NULL,
                end_time timestamptz NOT NULL,
                created_at timestamptz NOT NULL DEFAULT now()
            );
            """),
    ]
}
