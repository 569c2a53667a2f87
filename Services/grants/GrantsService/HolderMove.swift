import Core
import Database
import Foundation

/// An account's move from a fresh `appUserId` to its CloudKit record name, in the ledger
/// (docs/api.md, "One account on every platform"). Each account has a lock of its own in the advisory-lock class `moveLockClass`: storing a
/// command takes it shared (`GrantLedger.store`), a move takes it alone, so a command is stored
/// either wholly before a move (and moved with the rest) or wholly after it (and stored under the
/// new id by `store_round`). Nothing is stored under an id the account has left.
extension GrantLedger {
    /// The advisory-lock class of accounts' move locks (the two-key form, apart from the holders'
    /// one-key locks).
    static let moveLockClass = 22

    /// What a move did: whether it was new (an earlier call had not made it), and the transfers it
    /// queued.
    struct Moved: Equatable {
        var new: Bool
        var transfers: Int
    }

    /// Moves `account`'s grants from `from` to `to`: every row follows; each that is not failed
    /// and ends in the future, at a provider that is called (not the local ledger), is queued to be
    /// granted again under `to` with the same end (`transfers`: a pending one is called once its
    /// grant succeeded, so a call for `from` under way now is followed, not lost). A repeat changes
    /// nothing. The `account.appUserIdChanged` webhook is queued with the first.
    static func move(_ tx: PGConnection, account: UUID, from: String, to: String) throws -> Moved {
        try tx.query("SELECT pg_advisory_xact_lock(\(moveLockClass), hashtext($1))", [account.lowercasedString])
        let new = try tx.query("""
            INSERT INTO grants.holder_moves (from_app_user_id, to_app_user_id, account_id) VALUES ($1, $2, $3)
            ON CONFLICT (from_app_user_id) DO NOTHING RETURNING from_app_user_id
            """, [from, to, account]).first != nil
        // An id that moved to `from` earlier moves on with it: one hop maps any of them.
        try tx.query("UPDATE grants.holder_moves SET to_app_user_id = $2 WHERE to_app_user_id = $1 AND account_id = $3", [from, to, account])
        let queued = try tx.query("""
            WITH moved AS (
                UPDATE grants.grants SET app_user_id = $3 WHERE account_id = $1 AND app_user_id = $2
                RETURNING redemption_id, entitlement_id, provider, end_time, status
            )
            INSERT INTO grants.transfers (redemption_id, app_user_id, entitlement_id, provider, end_time)
            SELECT redemption_id, $3, entitlement_id, provider, end_time FROM moved
            WHERE status <> 'failed' AND end_time > now() AND provider NOT IN ('local', 'local-sandbox')
            ON CONFLICT DO NOTHING RETURNING redemption_id
            """, [account, from, to]).rows.count
        if new {
            try Webhooks.enqueue(tx, type: .appUserIdChanged, redemption: account,
                                 data: AppUserIdChangedData(accountId: account, appUserId: to, previousAppUserId: from), mode: .live,
                                 app: DefaultApp.id)
        }
        return Moved(new: new, transfers: queued)
    }

    /// The id a holder goes by now: the one its account moved to, or itself.
    static func currentHolder(_ c: PGConnection, _ appUserId: String) throws -> String {
        try c.query("SELECT to_app_user_id FROM grants.holder_moves WHERE from_app_user_id = $1", [appUserId]).first?
            .decode("to_app_user_id", as: String.self) ?? appUserId
    }
}
