import Shared

enum AccountsMigrations {
    static let all: [Migration] = [
        Migration(1, "accounts", """
            CREATE TABLE accounts (
                id uuid PRIMARY KEY,
                email text,
                app_user_id text NOT NULL,
                created_at timestamptz NOT NULL DEFAULT now()
            );
            CREATE UNIQUE INDEX accounts_email_key ON accounts (lower(email)) WHERE email IS NOT NULL;
            CREATE UNIQUE INDEX accounts_app_user_id_key ON accounts (app_user_id);
            """),
    ]
}
