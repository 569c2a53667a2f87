import Database

/// Schema `accounts`. Uniqueness that the business depends on is enforced here:
/// one account per email (any case), one owner per appUserId or linked record name (`user_ids`),
/// one account per Apple subject, one live refresh token per session, a verified email only
/// where there is an email, and one row per Idempotency-Key and caller.
enum AccountsMigrations {
    /// Each migration is a file of `Migrations/` (`NNN_<what>.sql`), embedded at build time and
    /// applied in the order of its number (`SchemaFunctionsTests` checks the list against the folder).
    static let all: [Migration] = [
        Migration(file: "001_accounts.sql", PackageResources._01_accounts_sql),
        Migration(file: "002_signing_key_algorithms.sql", PackageResources._02_signing_key_algorithms_sql),
        Migration(file: "003_proven_emails_and_refresh_retries.sql", PackageResources._03_proven_emails_and_refresh_retries_sql),
        Migration(file: "004_appuserid_changes.sql", PackageResources._04_appuserid_changes_sql),
        Migration(file: "005_deleted_accounts.sql", PackageResources._05_deleted_accounts_sql),
        Migration(file: "006_sealed_signing_keys.sql", PackageResources._06_sealed_signing_keys_sql),
        // Every operator change is recorded in the transaction that makes it.
        AuditTable.migration(7),
        Migration(file: "008_members.sql", PackageResources._08_members_sql),
        Migration(file: "009_sign_in_with_apple_on_the_web.sql", PackageResources._09_sign_in_with_apple_on_the_web_sql),
        Migration(file: "010_email_tokens_and_mail_outbox.sql", PackageResources._10_email_tokens_and_mail_outbox_sql),
        Migration(file: "011_member_totp_invites_sign_in_code_binding.sql", PackageResources._11_member_totp_invites_sign_in_code_binding_sql),
        Migration(file: "012_fresh_sign_ins.sql", PackageResources._12_fresh_sign_ins_sql),
        // The audit log is a record: the services' runtime roles may add to it, never change or
        // erase it (docs/security.md, "The database").
        AuditTable.insertOnly(13),
        Migration(file: "014_mail_limits.sql", PackageResources._14_mail_limits_sql),
        Migration(file: "015_member_invite_mail.sql", PackageResources._15_member_invite_mail_sql),
        Migration(file: "016_idempotency_keys.sql", PackageResources._16_idempotency_keys_sql),
        Migration(file: "017_apps.sql", PackageResources._17_apps_sql),
        // Each entry belongs to one app (docs/apps.md).
        AuditTable.perApp(18),
        Migration(file: "019_member_roles_per_app.sql", PackageResources._19_member_roles_per_app_sql),
    ]
}
