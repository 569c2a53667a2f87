import Core
import Cryptography
import Database
import Foundation

/// Unique single-use codes of a coupon, in SQL (migration 20). A code is stored as its SHA-256,
/// as API keys are, with its last four characters; the plain codes leave the service once, in the
/// creation's CSV, which waits sealed under `REDEEM_SECRET_KEY` until one download deletes it.
/// That a code is used at most once is the one-use index of migration 20 on the redemptions.
enum UniqueCodeStore {
    /// How long a CSV waits for its download.
    static let exportLifetime: TimeInterval = 24 * 3600
    static let csvHeader = "code\n"

    /// A unique code as validate and redeem look it up: its row, its coupon, and whether a
    /// redemption holds it now (`holder`: that redemption's account).
    struct Found: Sendable, Equatable {
        var id: Int64
        var couponId: UUID
        var couponCode: String
        var last4: String
        var held: Bool
        var holder: UUID?
    }

    static func hash(_ code: String) -> PGBytes { PGBytes(Data(Crypto.sha256(Array(code.utf8)))) }

    /// The unique code `code` (as `UniqueCode.read` gave it), if one was made for a coupon of
    /// `app`, the app the end user redeems in.
    static func find(_ c: PGConnection, code: String, app: UUID) throws -> Found? {
        guard
            let row = try c.prepared(
                "unique_code_by_hash_in_app",
                """
                SELECT u.id, u.coupon_id, u.last4, c.code AS coupon_code, h.account_id AS holder, h.id IS NOT NULL AS held
                FROM coupons.unique_codes u JOIN coupons.coupons c ON c.id = u.coupon_id
                LEFT JOIN LATERAL (SELECT r.id, r.account_id FROM coupons.redemptions r
                                   WHERE r.unique_code_id = u.id AND r.holds_use LIMIT 1) h ON true
                WHERE u.code_hash = $1 AND c.app_id = $2
                """, [hash(code), app]
            ).first
        else { return nil }
        return Found(
            id: try row.decode("id"), couponId: try row.decode("coupon_id"), couponCode: try row.decode("coupon_code"),
            last4: try row.decode("last4"), held: try row.decode("held"), holder: try row.decodeIfPresent("holder"))
    }

    /// Whether a redemption holds unique code `id` now, read after the coupon's row lock (so it
    /// sees what the batch before took).
    static let holderSQL = "SELECT r.account_id FROM coupons.redemptions r WHERE r.unique_code_id = $1 AND r.holds_use"

    /// The count and prefix, checked: 422 naming the field otherwise.
    static func checked(_ input: CodesInput) throws -> (count: Int, prefix: String?) {
        guard let count = input.count else { throw ServiceError(.invalid, "count is required", field: "count") }
        guard (1...UniqueCode.maxCount).contains(count) else {
            throw ServiceError(.invalid, "count must be 1 to \(UniqueCode.maxCount)", field: "count")
        }
        var prefix: String?
        if let given = input.prefix, !given.isEmpty {
            guard let p = UniqueCode.normalizedPrefix(given) else {
                throw ServiceError(
                    .invalid, "prefix must be 1 to \(UniqueCode.maxPrefixLength) of A-Z and 0-9", field: "prefix")
            }
            prefix = p
        }
        return (count, prefix)
    }

    /// `count` new codes from the CSPRNG (one call for all their random bytes).
    static func make(count: Int, prefix: String?) -> [String] {
        let n = UniqueCode.randomLength
        let random = Crypto.randomBytes(count * n)
        return (0..<count).map { i in UniqueCode.make(prefix: prefix, random: random[(i * n)..<((i + 1) * n)]) }
    }

    /// A creation's codes as written: the CSV's lines, and per code its SHA-256 in hex and its
    /// last four characters. Made on bytes in one pass: 100,000 codes are a few megabytes.
    struct Batch {
        var count = 0
        var csv: [UInt8] = []
        var hashes: [String] = []
        var last4: [String] = []

        init(count: Int, prefix: String?) {
            let n = UniqueCode.randomLength
            let random = Crypto.randomBytes(count * n)
            let prefixBytes = prefix.map { Array($0.utf8) } ?? []
            let length =
                (prefixBytes.isEmpty ? 0 : prefixBytes.count + 1) + UniqueCode.bodyLength + UniqueCode.groups - 1
            csv.reserveCapacity(count * (length + 1))
            hashes.reserveCapacity(count)
            last4.reserveCapacity(count)
            var code: [UInt8] = []
            code.reserveCapacity(length)
            for i in 0..<count {
                code.removeAll(keepingCapacity: true)
                UniqueCode.append(prefix: prefixBytes, random: random[(i * n)..<((i + 1) * n)], to: &code)
                csv.append(contentsOf: code)
                csv.append(UInt8(ascii: "\n"))
                hashes.append(UniqueCodeStore.hex(Crypto.sha256(code)))
                last4.append(String(decoding: code[(code.count - 4)...], as: UTF8.self))
            }
            self.count = count
        }

        /// The codes, as the CSV holds them (tests).
        var codes: [String] { csv.split(separator: UInt8(ascii: "\n")).map { String(decoding: $0, as: UTF8.self) } }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// Lower-case hex, by table: `String(format:)` per byte would cost seconds for 100,000 hashes.
    static func hex(_ bytes: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(hexDigits[Int(b >> 4)])
            out.append(hexDigits[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// What a sealed CSV is bound to: its row.
    static func context(_ export: UUID) -> String { "coupons.code_exports/" + export.lowercasedString }

    /// Writes the codes of `batch` for `coupon` (hashes and last four characters, one statement)
    /// and their CSV, sealed, with the hash of a new one-time token; the coupon then takes only unique codes.
    /// The caller's transaction. A hash that exists already (two codes alike: about one chance in
    /// 10^13 for 100,000) is a unique violation, and the caller makes new codes.
    static func insert(
        _ tx: PGConnection, coupon: UUID, batch: Batch, keyring: SecretKeyring, now: Date
    ) throws -> (token: String, expiresAt: Date) {
        let export = UUID.random()
        try tx.query(
            """
            INSERT INTO coupons.unique_codes (coupon_id, code_hash, last4, export_id)
            SELECT $1, decode(u.h, 'hex'), u.l, $4 FROM unnest($2::text[], $3::text[]) AS u(h, l)
            """, [coupon, PGArray(batch.hashes), PGArray(batch.last4), export])
        try tx.query(
            "UPDATE coupons.coupons SET has_unique_codes = true WHERE id = $1 AND NOT has_unique_codes", [coupon])
        let token = Crypto.randomToken()
        let sealed = keyring.seal(batch.csv, context: context(export))
        let expiresAt = now.addingTimeInterval(exportLifetime)
        try tx.query(
            """
            INSERT INTO coupons.code_exports (id, coupon_id, count, sealed_csv, key_id, token_hash, expires_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7)
            """,
            [
                export, coupon, batch.count, Data(sealed.sealed).base64EncodedString(), sealed.keyId,
                PGBytes(Data(Crypto.sha256(Array(token.utf8)))), expiresAt
            ])
        return (token, expiresAt)
    }

    static let gone = ServiceError(
        .downloadGone, "these codes were downloaded already, or their download expired: make new codes")

    /// Takes (deletes and answers) every CSV of the coupon `code` in `mode` not yet downloaded, or
    /// the one of `token`, in one statement: of two takes at once, one gets the rows.
    static func take(
        _ c: PGConnection, _ req: Coupons.TakeCodes, keyring: SecretKeyring
    ) throws
        -> Coupons.TakeCodes.Response
    {
        let rows: [PGRow]
        let returning =
            "RETURNING e.id, e.count, e.sealed_csv, e.key_id, e.expires_at > now() AS live, e.created_at, c.code AS coupon_code"
        if let token = req.token {
            rows = try c.query(
                """
                DELETE FROM coupons.code_exports e USING coupons.coupons c
                WHERE e.token_hash = $1 AND c.id = e.coupon_id \(returning)
                """, [PGBytes(Data(Crypto.sha256(Array(token.utf8))))]
            ).rows
        } else {
            guard let code = req.code,
                let coupon = try CouponStore.findDefinition(c, code: code, mode: Mode.of(req.mode),
                    app: DefaultApp.of(req.app))
            else { throw CouponStore.notFound }
            rows = try c.query(
                """
                DELETE FROM coupons.code_exports e USING coupons.coupons c
                WHERE e.coupon_id = $1 AND c.id = e.coupon_id \(returning)
                """, [try coupon.decode("id", as: UUID.self)]
            ).rows
        }
        var parts: [(Date, String, Int)] = []
        var couponCode = req.code.map(Coupons.normalizeCode) ?? ""
        for row in rows where try row.decode("live", as: Bool.self) {
            let id = try row.decode("id", as: UUID.self)
            guard let sealed = Data(base64Encoded: try row.decode("sealed_csv", as: String.self)) else {
                throw SecretKeyring.Failure.altered(context(id))
            }
            let plain = try keyring.open(Array(sealed), keyId: try row.decode("key_id"), context: context(id))
            let createdAt = try row.decode("created_at", as: Date.self)
            let count = try row.decode("count", as: Int.self)
            parts.append((createdAt, String(decoding: plain, as: UTF8.self), count))
            couponCode = try row.decode("coupon_code")
        }
        guard !parts.isEmpty else { throw gone }
        parts.sort { $0.0 < $1.0 }
        return .init(
            code: couponCode, count: parts.reduce(0) { $0 + $1.2 }, csv: csvHeader + parts.map(\.1).joined())
    }

    /// Deletes CSVs past their download time (the reservation sweeper's round).
    static func forgetExpired(_ c: PGConnection) throws -> Int {
        try c.query("DELETE FROM coupons.code_exports WHERE expires_at <= now()").affectedRows
    }
}
