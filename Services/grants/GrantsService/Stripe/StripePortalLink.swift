import Core
import Cryptography
import Foundation

/// The link `GET /v1/me` answers as `managementUrl` for an account with a Stripe customer
/// (docs/stripe.md): `<key id>.<base64url>` of the account's id and the link's end, sealed
/// (AES-256-GCM) under `REDEEM_SECRET_KEY` (with the app's id too for another app than the
/// default one, whose customers are in its own Stripe account), so it can neither be read nor made without the key and
/// needs no row. Following it makes a billing-portal session there and then: Stripe's portal
/// sessions are short-lived and meant to be made when the customer asks, never in advance.
enum StripePortalLink {
    /// How long a link may be followed after `GET /v1/me` answered it.
    static let lifetime: TimeInterval = 3600
    static let context = "grants.stripe-portal-link"

    static func make(account: UUID, app: UUID = DefaultApp.id, keyring: SecretKeyring, now: Date) -> String {
        let end = UInt64(max(0, now.addingTimeInterval(lifetime).timeIntervalSince1970))
        let other = app == DefaultApp.id ? [] : withUnsafeBytes(of: app.uuid) { Array($0) }
        let plain =
            withUnsafeBytes(of: account.uuid) { Array($0) } + other + withUnsafeBytes(of: end.bigEndian) { Array($0) }
        let sealed = keyring.seal(plain, context: context)
        return sealed.keyId + "." + Base64URL.encode(sealed.sealed)
    }

    /// The account and app a link names, or nil when it is not one this keyring sealed, or it has ended.
    static func open(_ link: String, keyring: SecretKeyring, now: Date) -> (account: UUID, app: UUID)? {
        let parts = link.split(separator: ".", omittingEmptySubsequences: false)
        guard link.count <= 240, parts.count == 2, !parts[0].isEmpty, let sealed = Base64URL.decode(parts[1]),
            let plain = try? keyring.open(sealed, keyId: String(parts[0]), context: context),
            plain.count == 24 || plain.count == 40
        else { return nil }
        let end = plain[(plain.count - 8)...].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard Double(end) > now.timeIntervalSince1970 else { return nil }
        let account = uuid(Array(plain[0..<16]))
        return (account, plain.count == 40 ? uuid(Array(plain[16..<32])) : DefaultApp.id)
    }

    private static func uuid(_ b: [UInt8]) -> UUID {
        UUID(
            uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])
        )
    }
}
