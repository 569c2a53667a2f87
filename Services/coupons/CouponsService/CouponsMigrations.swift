import Shared

enum CouponsMigrations {
    static let all: [Migration] = [
        Migration(1, "coupons", """
            CREATE TABLE coupons (
                id uuid PRIMARY KEY,
                code text NOT NULL UNIQUE CHECK (code = upper(code)),
                created_at timestamptz NOT NULL DEFAULT now()
            );
            """),
    ]
}
