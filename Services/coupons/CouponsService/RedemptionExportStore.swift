import Core
import Cryptography
import Database
import Foundation

/// One-time download addresses of a coupon's redemptions CSV (migration 22). Only the token's
/// SHA-256 is kept, with the coupon; the CSV itself is made at the download, as the API makes it,
/// so no redemption is copied anywhere.
enum RedemptionExportStore {
    /// How long an address waits for its download.
    static let lifetime: TimeInterval = 24 * 3600

    static let gone = ServiceError(
        .downloadGone, "this download address was used already, or has expired: export the redemptions again")

    /// The coupon's redemption count and a new token for its CSV. The caller's transaction.
    static func make(
        _ tx: PGConnection, _ req: Coupons.ExportRedemptions, now: Date
    ) throws
        -> Coupons.ExportRedemptions.Response
    {
        guard let coupon = try CouponStore.findDefinition(tx, code: req.code, mode: req.mode,
            app: DefaultApp.of(req.app)) else {
            throw CouponStore.notFound
        }
        let id = try coupon.decode("id", as: UUID.self)
        let count =
            try tx.query("SELECT count(*)::int AS n FROM coupons.redemptions WHERE coupon_id = $1", [id]).first?
            .decode("n", as: Int.self) ?? 0
        let token = Crypto.randomToken()
        let expiresAt = now.addingTimeInterval(lifetime)
        try tx.query(
            "INSERT INTO coupons.redemption_exports (token_hash, coupon_id, created_at, expires_at) VALUES ($1, $2, $3, $4)",
            [PGBytes(Data(Crypto.sha256(Array(token.utf8)))), id, now, expiresAt])
        return .init(
            code: try coupon.decode("code", as: String.self), count: count, downloadToken: token, expiresAt: expiresAt)
    }

    /// Takes (deletes and answers) the address of `token`, in one statement: of two downloads at
    /// once, one gets it.
    static func take(_ c: PGConnection, token: String) throws -> Coupons.TakeRedemptionExport.Response {
        guard
            let row = try c.query(
                """
                DELETE FROM coupons.redemption_exports e USING coupons.coupons c
                WHERE e.token_hash = $1 AND c.id = e.coupon_id
                RETURNING c.code, c.mode, c.app_id, e.expires_at > now() AS live
                """, [PGBytes(Data(Crypto.sha256(Array(token.utf8))))]
            ).first, try row.decode("live", as: Bool.self),
            let mode = Mode(rawValue: try row.decode("mode", as: String.self))
        else { throw gone }
        return .init(code: try row.decode("code"), mode: mode, app: try row.decode("app_id"))
    }

    /// Deletes addresses past their download time (the reservation sweeper's round).
    static func forgetExpired(_ c: PGConnection) throws -> Int {
        try c.query("DELETE FROM coupons.redemption_exports WHERE expires_at <= now()").affectedRows
    }
}
