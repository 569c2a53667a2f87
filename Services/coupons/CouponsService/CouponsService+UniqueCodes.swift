import Bus
import Core
import Database
import Foundation

/// Unique codes: made by the thousand in one transaction, their CSV taken once; and the one-time
/// addresses of a coupon's redemptions CSV.
extension CouponsService {
    func addUniqueCodeRoutes(to r: inout BusRouter) {
        r.on(Coupons.CreateCodes.self) { [self] req, context in try await createCodes(req, context) }
        r.on(Coupons.TakeCodes.self) { [self] req, _ in
            let keyring = self.keyring
            return try await pool.transaction { try UniqueCodeStore.take($0, req, keyring: keyring) }
        }
        r.on(Coupons.ExportRedemptions.self) { [self] req, _ in
            try await pool.transaction { try RedemptionExportStore.make($0, req, now: Date()) }
        }
        r.on(Coupons.TakeRedemptionExport.self) { [self] req, _ in
            try await pool.withConnection { try RedemptionExportStore.take($0, token: req.token) }
        }
    }

    func createCodes(_ req: Coupons.CreateCodes, _ context: BusContext) async throws -> Coupons.CreateCodes.Response {
        let (count, prefix) = try UniqueCodeStore.checked(req.input)
        let keyring = self.keyring
        // Two codes alike, here or with an earlier creation, is a unique violation: the whole
        // creation is made again with new codes (it never happens in practice: 75 random bits).
        for attempt in 1...3 {
            let batch = UniqueCodeStore.Batch(count: count, prefix: prefix)
            do {
                return try await pool.transaction { tx in
                    let mode = Mode.of(req.mode)
                    guard
                        let coupon = try CouponStore.findDefinition(
                            tx, code: req.code, mode: mode,
                            app: DefaultApp.of(req.app))
                    else {
                        throw CouponStore.notFound
                    }
                    let id = try coupon.decode("id", as: UUID.self)
                    let code = try coupon.decode("code", as: String.self)
                    let made = try UniqueCodeStore.insert(tx, coupon: id, batch: batch, keyring: keyring, now: Date())
                    struct Made: Encodable {
                        let count: Int
                        let prefix: String?
                    }
                    try Self.audit(
                        tx, req.actor, .couponCreateCodes, code, before: nil, after: Made(count: count, prefix: prefix),
                        context, mode, app: req.app)
                    return .init(
                        code: code, count: count, prefix: prefix, downloadToken: made.token, expiresAt: made.expiresAt)
                }
            } catch let e as PGError where e.isUniqueViolation && attempt < 3 {
                logger.warning("two unique codes alike; making them again", ["coupons.attempt": attempt])
            }
        }
        throw ServiceError.internal
    }
}
