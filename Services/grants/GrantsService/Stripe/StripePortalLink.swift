import Core
import Cryptography
import Foundation

/// The link `GET /v1/me` answers as `managementUrl` for an account with a Stripe customer
/// (docs/stripe.md): `<key id>.<base64url>` of the account's id and the link's end, sealed
/// (AES-256-GCM) under `REDEEM_SECRET_KEY`, so it can neither be read nor made without the key and
/// needs no row. Following it makes a billing-portal session there and then: Stripe's portal
/// sessions are short-lived and meant to be made when the customer asks, never in advance.
enum StripePortalLink {
    /// How long a link may be followed after `GET /v1/me` answered it.
    static let lifetime: TimeInterval = 3600
    static let context = "grants.stripe-portal-link"

    static func make(account: UUID, keyring: SecretKeyring, now: Date) -> String {
        let end = UInt64(max(0, now.addingTimeInterval(lifetime).timeIntervalSince1970))
        let plain = withUnsafeBytes(of: account.uuid) { Array($0) } + withUnsafeBytes(of: end.bigEndian) { Array($0) }
        let sealed = keyring.seal(plain, context: context)
        return sealed.keyId + "." + Base64URL.encode(sealed.sealed)
    }

    /// The account a link names, or nil when it is not one this keyring sealed, or it has ended.
    static func open(_ link: String, keyring: SecretKeyring, now: Date) -> UUID? {
        let parts = link.split(separator: ".", omittingEmptySubsequences: false)
        guard link.count <= 200, parts.count == 2, !parts[0].isEmpty, let sealed = Base64URL.decode(parts[1]),
            let plain = try? keyring.open(sealed, keyId: String(parts[0]), context: context), plain.count == 24
        else { return nil }
        let end = plain[16..<24].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard Double(end) > now.timeIntervalSince1970 else { return nil }
        let b = Array(plain[0..<16])
        return UUID(
            uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])
        )
    }
}
