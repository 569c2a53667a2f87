import Cryptography
import Foundation
import Testing

@testable import Core
@testable import GrantsService

/// `GET /v1/me`'s link to the Stripe billing portal (`StripePortalLink`): it names its account for
/// an hour, under the keyring that sealed it, and opens to nothing once altered, ended, or under
/// another key; and the Idempotency-Key of an account's customer is stable per account, mode and
/// app user.
@Suite struct StripePortalLinkTests {
    let account = UUID(uuidString: "6F9619FF-8B86-D011-B42D-00C04FC964FF")!
    let now = Date(timeIntervalSince1970: 1_775_001_600)

    @Test func aLinkNamesItsAccountForAnHour() {
        let keyring = SecretKeyring.random()
        let link = StripePortalLink.make(account: account, keyring: keyring, now: now)
        #expect(StripePortalLink.open(link, keyring: keyring, now: now)?.account == account)
        #expect(StripePortalLink.open(link, keyring: keyring, now: now.addingTimeInterval(3599))?.account == account)
        #expect(StripePortalLink.open(link, keyring: keyring, now: now.addingTimeInterval(3600))?.account == nil)
        #expect(!link.contains(account.lowercasedString) && !link.contains(account.uuidString))
        #expect(link.allSatisfy { $0.isLetter || $0.isNumber || "-_.".contains($0) }, "fits a URL path as it is")
    }

    /// Another app's link names that app too (its customers are in its own Stripe account); the
    /// default app's names the default app.
    @Test func aLinkNamesItsApp() {
        let keyring = SecretKeyring.random()
        let app = UUID(uuidString: "6F1C0000-0000-4000-8000-000000000002")!
        let link = StripePortalLink.make(account: account, app: app, keyring: keyring, now: now)
        #expect(StripePortalLink.open(link, keyring: keyring, now: now)?.account == account)
        #expect(StripePortalLink.open(link, keyring: keyring, now: now)?.app == app)
        #expect(StripePortalLink.open(link, keyring: keyring, now: now.addingTimeInterval(3600)) == nil)
        let own = StripePortalLink.make(account: account, keyring: keyring, now: now)
        #expect(StripePortalLink.open(own, keyring: keyring, now: now)?.app == DefaultApp.id)
    }

    @Test func anAlteredOrForeignLinkOpensToNothing() {
        let keyring = SecretKeyring.random()
        let link = StripePortalLink.make(account: account, keyring: keyring, now: now)
        var altered = Array(link)
        altered[altered.count - 5] = altered[altered.count - 5] == "A" ? "B" : "A"
        #expect(StripePortalLink.open(String(altered), keyring: keyring, now: now)?.account == nil)
        #expect(StripePortalLink.open(link, keyring: SecretKeyring.random(), now: now)?.account == nil)
        for junk in ["", ".", "k1.", ".AAAA", "no-dot", link + ".x", String(repeating: "A", count: 300)] {
            #expect(StripePortalLink.open(junk, keyring: keyring, now: now)?.account == nil, "\(junk)")
        }
        // A link sealed under the previous key opens while that key is kept.
        let rotated = SecretKeyring(current: SecretKeyring.random().current, others: [keyring.current])
        #expect(StripePortalLink.open(link, keyring: rotated, now: now)?.account == account)
    }

    @Test func theCustomersIdempotencyKeyIsStablePerAccountModeAndAppUser() {
        let a = GrantsService.customerIdempotencyKey(account: account, mode: .live, appUserId: "user-1")
        #expect(a == GrantsService.customerIdempotencyKey(account: account, mode: .live, appUserId: "user-1"))
        #expect(a.hasPrefix("redeem-customer-6f9619ff-8b86-d011-b42d-00c04fc964ff-live-"))
        #expect(a != GrantsService.customerIdempotencyKey(account: account, mode: .test, appUserId: "user-1"))
        #expect(a != GrantsService.customerIdempotencyKey(account: account, mode: .live, appUserId: "user-2"))
        #expect(a.count <= 255, "Stripe takes keys of up to 255 characters")
    }
}
