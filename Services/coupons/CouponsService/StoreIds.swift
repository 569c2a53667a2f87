import Core
import Cryptography
import Foundation

/// The names and ids coupons derives instead of storing a secret or asking the store
/// (docs/stores.md, "Data"): the same inputs always give the same value, so a restarted
/// provisioning finds its offer by name, a repeated command has the same outbox key, and the app
/// and Apple's later notification agree on an account's token.
enum StoreIds {
    /// The offer's reference name in the store for (coupon, store, plan): `redeem-` and 24 hex
    /// digits of a SHA-256, 31 characters. A transaction's `offerIdentifier` carries it back.
    static func offerName(coupon: UUID, store: Store, productId: String) -> String {
        let digest = Crypto.sha256(Array("redeem.offerName|\(coupon.lowercasedString)|\(store.rawValue)|\(productId)".utf8))
        return "redeem-" + digest.hex.prefix(24)
    }

    /// A coupon's Google Play offer id, the same on each of its base plans (Google wants it unique
    /// per base plan), so validate names one offer for the app to find: Google's form, lower-case
    /// letters, digits and `-` starting with a letter, at most 63 characters. `c-`, the coupon's
    /// code (lower case, `_` as `-`, at most 40 characters), `-`, and 8 hex digits of a SHA-256 of
    /// the coupon id: readable in the Play Console, stable, and different for the same code in test
    /// and live mode.
    static func playOfferId(coupon: UUID, code: String) -> String {
        let readable = String(code.lowercased().map { $0 == "_" ? "-" : $0 }.filter { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }.prefix(40))
        let digest = Crypto.sha256(Array("redeem.playOfferId|\(coupon.lowercasedString)".utf8))
        return "c-" + readable + "-" + digest.hex.prefix(8)
    }

    /// The `obfuscatedAccountId` of an account for Google Play's billing flow: 64 hex digits of
    /// SHA-256("redeem.obfuscatedAccountId" ‖ the account id's 16 bytes), at Google's limit of 64
    /// characters and no personal data. Derived, so the purchase Google reports names the account.
    static func obfuscatedAccountId(account: UUID) -> String {
        var bytes = Array("redeem.obfuscatedAccountId".utf8)
        withUnsafeBytes(of: account.uuid) { bytes.append(contentsOf: $0) }
        return Crypto.sha256(bytes).hex
    }

    /// The outbox key of a store command (`StoreProvisionCommand.commandId`): one per (command type,
    /// coupon, store, plan, Google Play base plan), and per switch of the offer (`generation`,
    /// above 0 for a switch), so writing the same command twice leaves one row.
    static func command(_ type: String, coupon: UUID, store: Store, productId: String, basePlanId: String? = nil, generation: Int = 0) -> UUID {
        let plan = basePlanId.map { "|\($0)" } ?? ""  // App Store keys stay as they were
        let switched = generation > 0 ? "|\(generation)" : ""
        return version8(Crypto.sha256(Array("redeem.storeCommand|\(type)|\(coupon.lowercasedString)|\(store.rawValue)|\(productId)\(plan)\(switched)".utf8)))
    }

    /// The `appAccountToken` of an account: `UUID(SHA-256("redeem.appAccountToken" ‖ the account
    /// id's 16 bytes))`, version 8. Not a secret (anyone who knows the account id can make it): it
    /// only lets Apple's notification name the account whose reservation it completes.
    static func appAccountToken(account: UUID) -> UUID {
        var bytes = Array("redeem.appAccountToken".utf8)
        withUnsafeBytes(of: account.uuid) { bytes.append(contentsOf: $0) }
        return version8(Crypto.sha256(bytes))
    }

    /// The first 16 bytes of `digest` as a version 8 (RFC 9562, custom) UUID.
    static func version8(_ digest: [UInt8]) -> UUID {
        var b = Array(digest.prefix(16))
        b[6] = (b[6] & 0x0F) | 0x80
        b[8] = (b[8] & 0x3F) | 0x80
        return UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
    }
}
