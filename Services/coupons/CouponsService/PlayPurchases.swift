import Core
import Database
import Foundation

/// What completion by a Google Play purchase adds to `StorePurchases` (docs/stores.md,
/// "Completion on Android"): a purchase chain followed through `linkedPurchaseToken`, and the
/// account named by `obfuscatedExternalAccountId` instead of an `appAccountToken`.
enum PlayPurchases {
    /// The request with its purchase put in its chain: a purchase whose `linkedPurchaseToken` is a
    /// token already recorded (a chain's first, or one that joined it) belongs to that chain, whose
    /// row then remembers this token as its latest, so the next link finds it too. Other stores'
    /// requests are answered as they are.
    static func joiningItsChain(_ tx: PGConnection, _ req: Coupons.StorePurchase) throws -> Coupons.StorePurchase {
        guard req.transaction.store == .playStore, let linked = req.transaction.linkedPurchaseToken else { return req }
        let token = req.transaction.transactionId
        guard let chain = try tx.query("""
            SELECT original_transaction_id FROM coupons.store_purchases
            WHERE store = 'playStore' AND (original_transaction_id = $1 OR transaction_id = $1 OR original_transaction_id = $2)
            ORDER BY original_transaction_id = $2 DESC LIMIT 1
            """, [linked, token]).first?.decode("original_transaction_id", as: String.self) else { return req }
        try tx.query("UPDATE coupons.store_purchases SET transaction_id = $2 WHERE store = 'playStore' AND original_transaction_id = $1",
                     [chain, token])
        var joined = req
        joined.transaction.originalTransactionId = chain
        return joined
    }

    /// The account of a Play purchase no account posted: the one of this coupon's redemptions
    /// whose `StoreIds.obfuscatedAccountId` the purchase carries (a reservation the app made with
    /// it). PostgreSQL computes the same digest, over the coupon's own redemptions only.
    static func account(_ tx: PGConnection, _ t: VerifiedStoreTransaction, coupon: UUID) throws -> StorePurchases.Account? {
        guard let obfuscated = t.obfuscatedAccountId, obfuscated.count == 64 else { return nil }
        guard let row = try tx.query("""
            SELECT account_id, app_user_id FROM coupons.redemptions
            WHERE coupon_id = $1 AND account_id IS NOT NULL
              AND encode(sha256(convert_to('redeem.obfuscatedAccountId', 'UTF8') || uuid_send(account_id)), 'hex') = lower($2)
            ORDER BY status = 'reserved' DESC LIMIT 1
            """, [coupon, obfuscated]).first else { return nil }
        return StorePurchases.Account(id: try row.decode("account_id"), appUserId: try row.decode("app_user_id"))
    }

    /// A Google Play purchase completes only the coupons of the app whose Google Play settings
    /// read it (docs/apps.md): a token of one app's package, read with that app's service
    /// account, never completes another app's redemption, whatever offer id it names (422 on
    /// `purchaseToken`). The simulated store of test mode reads nothing from Google.
    static func checkApp(_ t: VerifiedStoreTransaction, read req: Coupons.StorePurchase, coupon app: UUID) throws {
        guard t.store == .playStore, req.simulated != true else { return }
        guard DefaultApp.of(req.storeApp) == app else {
            throw ServiceError(
                .invalid, "this purchase was made in another app's Google Play package than this coupon's",
                field: "purchaseToken")
        }
    }

    /// A Play purchase the app posts must have been made for the posting account: the billing
    /// flow carried its obfuscated id (422 on `purchaseToken` otherwise).
    static func checkAccount(_ t: VerifiedStoreTransaction, posted account: StorePurchases.Account?) throws {
        guard t.store == .playStore, let account else { return }
        guard t.obfuscatedAccountId?.lowercased() == StoreIds.obfuscatedAccountId(account: account.id) else {
            throw ServiceError(.invalid, "this purchase was not made for this account (its obfuscatedAccountId is another's)", field: "purchaseToken")
        }
    }
}
