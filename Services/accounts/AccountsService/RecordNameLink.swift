import Core
import Database
import Foundation
import Runtime

/// Linking a CloudKit record name (the appUserId rule). When the account's
/// `appUserId` is still the fresh id it was made with, and the provider shows no store purchase
/// under it, the record name becomes the `appUserId` (where an iOS subscriber's purchases sit) and
/// the grants service moves Redeem's grants to it.
///
/// The provider is asked before the account's row is locked; the change is made only if the row
/// still holds the id that was checked, so of two links at once exactly one changes the id and
/// the other links its record name beside it.
extension AccountsService {
    func linkRecordName(account: UUID, recordName: String) async throws -> Accounts.LinkCloudKit.Response {
        let state = try await pool.withConnection { try AccountStore.linkState($0, account: account, recordName: recordName) }
        if let owner = state.recordNameOwner, owner != account {
            throw ServiceError(.recordNameInUse, "this CloudKit record name belongs to another account", field: "recordName")
        }
        var adoptFrom: String?
        var kept: AppUserIdKept?
        if state.appUserId == recordName {
            kept = .alreadyThisId
        } else if !state.fresh {
            kept = .recordNameAlready
        } else if try await grants.request(Grants.StoreView(appUserId: state.appUserId, fresh: true)).holdsStorePurchase {
            kept = .storePurchases
        } else {
            adoptFrom = state.appUserId
        }
        let (from, otherwise) = (adoptFrom, kept ?? .recordNameAlready)
        let answer = try await pool.transaction { tx in
            try AccountStore.link(tx, account: account, recordName: recordName, adoptFrom: from, otherwise: otherwise)
        }
        if answer.changed, let previous = answer.previousAppUserId {
            runtime.logger.info("appUserId changed to a linked record name", ["account.id": account.lowercasedString])
            await moveHolder(account: account, from: previous, to: answer.appUserId)
        }
        return answer
    }

    /// Tells grants to move the holder, and records that it did. A failure is left to
    /// `relayMoves`, which tries again.
    func moveHolder(account: UUID, from: String, to: String) async {
        do {
            _ = try await grants.request(Grants.MoveHolder(accountId: account, from: from, to: to))
            try await pool.query("UPDATE accounts.app_user_id_changes SET moved_at = now() WHERE account_id = $1 AND previous = $2 AND moved_at IS NULL",
                                 [account, from])
        } catch {
            runtime.logger.warning("grants not told of an appUserId change yet; it is tried again", ["account.id": account.lowercasedString,
                                                                                                   "error": String(describing: error)])
        }
    }

    /// Tells grants of every change it has not confirmed (a link whose move request failed, or an
    /// instance killed in between), every few seconds.
    func relayMoves() async {
        await Periodic(every: .seconds(5)).run {
            do {
                let rows = try await pool.query("""
                    SELECT account_id, previous, current FROM accounts.app_user_id_changes
                    WHERE moved_at IS NULL AND created_at < now() - interval '2 seconds' ORDER BY created_at LIMIT 100
                    """).rows
                for row in rows {
                    await moveHolder(account: try row.decode("account_id"), from: try row.decode("previous"), to: try row.decode("current"))
                }
            } catch {
                runtime.logger.warning("appUserId changes not read; tried again", ["error": String(describing: error)])
            }
        }
    }
}

extension AccountStore {
    /// What a link decides on: the account's `appUserId`, whether it is the fresh id the account
    /// was made with, and who holds the record name already.
    struct LinkState {
        var appUserId: String
        var fresh: Bool
        var recordNameOwner: UUID?
    }

    static func linkState(_ c: PGConnection, account: UUID, recordName: String) throws -> LinkState {
        guard let row = try c.query("""
            SELECT a.app_user_id, (u.kind = 'appUserId') AS fresh, (SELECT account_id FROM accounts.user_ids WHERE value = $2) AS owner
            FROM accounts.accounts a JOIN accounts.user_ids u ON u.value = a.app_user_id WHERE a.id = $1
            """, [account, recordName]).first else {
            throw ServiceError(.notFound, "no such account")
        }
        return LinkState(appUserId: try row.decode("app_user_id"), fresh: try row.decode("fresh"), recordNameOwner: try row.decodeIfPresent("owner"))
    }

    /// Links the record name (the account's row locked), and makes it the `appUserId` when the
    /// row still holds `adoptFrom`, recording the change for grants.
    static func link(_ tx: PGConnection, account: UUID, recordName: String, adoptFrom: String?, otherwise kept: AppUserIdKept) throws -> Accounts.LinkCloudKit.Response {
        guard let row = try tx.query("SELECT app_user_id FROM accounts.accounts WHERE id = $1 FOR UPDATE", [account]).first else {
            throw ServiceError(.notFound, "no such account")
        }
        let current = try row.decode("app_user_id", as: String.self)
        _ = try linkRecordName(tx, account: account, recordName: recordName)
        if let adoptFrom, current == adoptFrom {
            try tx.query("UPDATE accounts.accounts SET app_user_id = $2 WHERE id = $1", [account, recordName])
            try tx.query("INSERT INTO accounts.app_user_id_changes (account_id, previous, current) VALUES ($1, $2, $3)", [account, adoptFrom, recordName])
            return .init(appUserId: recordName, changed: true, previousAppUserId: adoptFrom)
        }
        // Another link changed the id meanwhile: to this record name, or to another one.
        if current == recordName { return .init(appUserId: current, changed: false, keptBecause: .alreadyThisId) }
        return .init(appUserId: current, changed: false, keptBecause: adoptFrom != nil ? .recordNameAlready : kept)
    }
}
