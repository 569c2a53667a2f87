import Core
import Database
import Foundation
import Runtime
import TestSupport
import XCTest

/// One account on every platform (docs/api.md) over HTTP, against a fake RevenueCat: a linked record name becomes the
/// appUserId when the fresh id holds no store purchase, Redeem's grants follow it (at RevenueCat
/// too, with the same end), races grant nothing twice nor to an id the account left, and the
/// entitlements merge the store's view, or answer Redeem's own `partial` when it is down.
final class AccountLinkTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var revenueCat: FakeRevenueCat!

    override class func startSuite() throws {
        revenueCat = try FakeRevenueCat()
        stack = try Stack(environment: [
            "REDEEM_ENTITLEMENT_PROVIDER": "revenuecat", "REDEEM_REVENUECAT_URL": revenueCat.url.absoluteString,
            "REDEEM_REVENUECAT_KEY": "sk_rc_link", "REDEEM_GRANT_MAX_RETRY_SECONDS": "1", "REDEEM_WEBHOOK_RETRY_SCHEDULE": "1,1,1",
            "REDEEM_WEBHOOK_ALLOW_PRIVATE": "1",
        ])
    }

    override class func stopSuite() {
        stack?.stop()
        let done = DispatchSemaphore(value: 0)
        Task {
            await revenueCat?.stop()
            done.signal()
        }
        done.wait()
    }

    override func setUp() async throws {
        Self.revenueCat.answerReads(.created)
        Self.revenueCat.answerAlways(.created)
    }

    var client: HTTPClient { Self.stack.client }

    struct User { var id: String, appUserId: String, access: String, refresh: String }

    func signUp() async throws -> User {
        let r = try await client.json("POST", "/v1/accounts", ["email": "link-\(UUID().uuidString.prefix(8))@example.com", "password": "correct horse battery"])
        XCTAssertEqual(r.status, 201, r.text)
        let o = try r.decode(AccountSessionBody.self)
        return User(
            id: o.account.id, appUserId: try XCTUnwrap(o.account.appUserId), access: o.session.accessToken,
            refresh: try XCTUnwrap(o.session.refreshToken))
    }

    /// What `POST /v1/me/cloudkit` answers.
    struct LinkAnswer: Decodable {
        let appUserId: String
        let changed: Bool
        let previousAppUserId: String?
        let keptBecause: String?
    }

    /// `GET /v1/me`, as far as these tests read it.
    struct Me: Decodable {
        struct Identity: Decodable {
            let type: String
            let recordName: String?
        }
        let appUserId: String
        let managementUrl: String?
        let identities: [Identity]?
        /// The answer names `managementUrl`, as null (not left out).
        let managementUrlIsNull: Bool

        enum CodingKeys: String, CodingKey { case appUserId, managementUrl, identities }
        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            appUserId = try c.decode(String.self, forKey: .appUserId)
            managementUrl = try c.decodeIfPresent(String.self, forKey: .managementUrl)
            identities = try c.decodeIfPresent([Identity].self, forKey: .identities)
            managementUrlIsNull = try c.contains(.managementUrl) && c.decodeNil(forKey: .managementUrl)
        }
    }

    /// The `account.appUserIdChanged` event's data.
    struct Moved: Decodable, Sendable {
        let accountId: String
        let appUserId: String
        let previousAppUserId: String
    }

    func me(_ token: String) async throws -> Me {
        try await client.get("/v1/me", token: token).decode()
    }

    func freeMonth(entitlement: String) async throws -> String {
        let code = "L-" + UUID().uuidString.prefix(8).uppercased()
        let r = try await client.json("POST", "/v1/coupons", ["code": code, "kind": "freePeriod", "duration": ["unit": "month", "count": 1],
                                                              "entitlementId": entitlement], token: Self.stack.adminKey)
        XCTAssertEqual(r.status, 201, r.text)
        return code
    }

    func redeem(_ code: String, _ u: User) async throws -> String {
        let r = try await client.json("POST", "/v1/redemptions", ["code": code, "platform": "web"], token: u.access)
        XCTAssertEqual(r.status, 201, r.text)
        return try r.decode(RedemptionBody.self).redemptionId
    }

    func completed(_ id: String, _ u: User) async throws {
        let r = try await client.get("/v1/redemptions/\(id)?wait=20", token: u.access)
        XCTAssertEqual(try r.decode(RedemptionBody.self).status, "completed", r.text)
    }

    func link(_ record: String, _ u: User) async throws -> HTTPClient.Response {
        try await client.json("POST", "/v1/me/cloudkit", ["recordName": record], token: u.access)
    }

    func entitlements(_ token: String) async throws -> EntitlementsBody {
        let r = try await client.get("/v1/me/entitlements", token: token)
        XCTAssertEqual(r.status, 200, r.text)
        return try r.decode()
    }

    func sql(_ text: String, _ params: [any PGBindable] = []) async throws -> PGResult {
        let database = try Self.stack.adminDatabaseURL()
        nonisolated(unsafe) let p = params
        return try await offThePool { try PGConnection(url: database).query(text, p) }
    }

    static func record() -> String { "_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased() }
    static func ms(_ iso: String?) -> Int64? { iso.flatMap(Timestamp.parse).map(Timestamp.milliseconds) }

    // MARK: - Linking adopts the record name

    /// This suite's stack takes record names on the client's word (`REDEEM_CLOUDKIT_TRUST_CLIENT=1`,
    /// the test stacks' default: the proof is RecordNameProofTests'), which accounts warns of at start.
    func testTrustingTheClientIsWarnedOfAtStart() throws {
        let warning = Self.stack.logs().split(separator: "\n").first { $0.contains("REDEEM_CLOUDKIT_TRUST_CLIENT=1") }
        let line = try XCTUnwrap(warning, "no warning at start")
        XCTAssertTrue(line.contains("\"level\":\"warn\""), String(line))
    }

    func testWebFirstThenIOSLinkMovesTheIdAndItsGrants() async throws {
        let receiver = try WebhookReceiver()
        addTeardownBlock { await receiver.stop() }
        let hook = try await client.json(
            "POST", "/v1/webhooks", ["url": receiver.url.absoluteString, "events": ["account.appUserIdChanged"]],
            token: Self.stack.adminKey)
        XCTAssertEqual(hook.status, 201, hook.text)
        let hookId = try hook.decode(WebhookEndpointBody.self).id, client = self.client, admin = Self.stack.adminKey
        addTeardownBlock {
            _ = try await client.send("DELETE", "/v1/webhooks/\(hookId)", headers: ["Authorization": "Bearer \(admin)"])
        }
        let u = try await signUp()
        let redemption = try await redeem(try await freeMonth(entitlement: "pro"), u)
        try await completed(redemption, u)
        let before = try await entitlements(u.access)
        let end = Self.ms(before.data.first?.expiresAt)
        XCTAssertNotNil(end, "\(before)")

        let record = Self.record()
        let r = try await link(record, u)
        XCTAssertEqual(r.status, 200, r.text)
        let answer = try r.decode(LinkAnswer.self)
        XCTAssertEqual(answer.appUserId, record)
        XCTAssertEqual(answer.changed, true)
        XCTAssertEqual(answer.previousAppUserId, u.appUserId)
        let me = try await me(u.access)
        XCTAssertEqual(me.appUserId, record)

        // The grant follows: the ledger under the record name, and RevenueCat granted again with the same end.
        let rows = try await sql("SELECT app_user_id FROM grants.grants WHERE redemption_id = $1", [UUID(uuidString: redemption)!])
        XCTAssertEqual(try rows.first?.decode("app_user_id", as: String.self), record)
        let granted = try await Self.stack.eventually(10) { Self.revenueCat.grantEnds(record, "pro") == [end!] }
        XCTAssertTrue(granted, "RevenueCat holds \(Self.revenueCat.grantEnds(record, "pro")) for the record name, want \(end!)")
        // A refreshed token carries the new id; an old one still reads the moved entitlement.
        let refreshed = try await client.json("POST", "/v1/sessions/refresh", ["refreshToken": u.refresh])
        let newToken = try refreshed.decode(AccountSessionBody.self).session.accessToken
        for token in [u.access, newToken] {
            let e = try await entitlements(token)
            let pro = e.data.filter { $0.entitlementId == "pro" }
            XCTAssertEqual(pro.count, 1, "\(e)")
            XCTAssertEqual(Self.ms(pro.first?.expiresAt), end)
        }
        // Linking again changes nothing, and says why.
        let again = try await link(record, u).decode(LinkAnswer.self)
        XCTAssertEqual(again.changed, false)
        XCTAssertEqual(again.keptBecause, "alreadyThisId")
        let other = try await link(Self.record(), u).decode(LinkAnswer.self)
        XCTAssertEqual(other.appUserId, record)
        XCTAssertEqual(other.keptBecause, "recordNameAlready")
        // The apps hear of it.
        let delivered = try await Self.stack.eventually(10) {
            receiver.received.contains { String(decoding: $0.body, as: UTF8.self).contains(record) }
        }
        XCTAssertTrue(delivered)
        let body = try XCTUnwrap(receiver.received.first { String(decoding: $0.body, as: UTF8.self).contains(record) })
        let o = try JSONDecoder().decode(WebhookEventBody<Moved>.self, from: body.body)
        XCTAssertEqual(o.type, "account.appUserIdChanged")
        XCTAssertEqual(o.data.previousAppUserId, u.appUserId)
        XCTAssertEqual(o.data.accountId.lowercased(), u.id.lowercased())
    }

    func testAndroidFirstWithAStorePurchaseKeepsItsId() async throws {
        let u = try await signUp()
        Self.revenueCat.addStorePurchase(u.appUserId, .init(productId: "pro_monthly", store: "play_store", entitlementId: "pro",
                                                              expires: Date().addingTimeInterval(86400 * 20)))
        let r = try await link(Self.record(), u)
        XCTAssertEqual(r.status, 200, r.text)
        let o = try r.decode(LinkAnswer.self)
        XCTAssertEqual(o.appUserId, u.appUserId)
        XCTAssertEqual(o.changed, false)
        XCTAssertEqual(o.keptBecause, "storePurchases")
        XCTAssertNil(o.previousAppUserId)
        let me = try await me(u.access)
        XCTAssertEqual(me.appUserId, u.appUserId)
        XCTAssertEqual(me.managementUrl, "https://play.google.com/store/account/subscriptions")
        XCTAssertEqual(me.identities?.filter { $0.type == "cloudkit" }.count, 1)
    }

    func testAProviderThatCannotBeReadChangesNothingAnd503() async throws {
        let u = try await signUp()
        Self.revenueCat.answerReads(.status(503, body: "down"))
        let record = Self.record()
        let r = try await link(record, u)
        XCTAssertEqual(r.status, 503, r.text)
        let me = try await me(u.access)
        XCTAssertEqual(me.appUserId, u.appUserId)
        XCTAssertTrue(me.managementUrlIsNull, "null, not left out, when the store can't be read")
        Self.revenueCat.answerReads(.created)
        let retried = try await link(record, u).decode(LinkAnswer.self)
        XCTAssertEqual(retried.changed, true)
    }

    func testTwoDevicesLinkingAtOnceChangeTheIdOnce() async throws {
        for _ in 0..<3 {
            let u = try await signUp()
            let names = (0..<4).map { _ in Self.record() }
            let client = self.client
            let answers = try await withThrowingTaskGroup(of: (changed: Bool?, appUserId: String?).self) { group in
                for n in names {
                    group.addTask {
                        let o = try await client.json("POST", "/v1/me/cloudkit", ["recordName": n], token: u.access)
                            .decode(LinkAnswer.self)
                        return (o.changed, o.appUserId)
                    }
                }
                return try await group.reduce(into: [(changed: Bool?, appUserId: String?)]()) { $0.append($1) }
            }
            XCTAssertEqual(answers.filter { $0.changed == true }.count, 1, "\(answers)")
            let ids = Set(answers.compactMap(\.appUserId))
            XCTAssertEqual(ids.count, 1, "every answer names the one id: \(answers)")
            let me = try await me(u.access)
            XCTAssertEqual(me.appUserId, ids.first)
            XCTAssertEqual(Set((me.identities ?? []).compactMap(\.recordName)), Set(names))
            let moves = try await sql("SELECT count(*)::int AS n FROM grants.holder_moves WHERE from_app_user_id = $1", [u.appUserId])
            XCTAssertEqual(try moves.first?.decode("n", as: Int.self), 1)
        }
    }

    func testALinkDuringRedemptionsGrantsEachOnceUnderTheNewId() async throws {
        // Slow grants, so some are stored or under way while the link moves the holder.
        let u = try await signUp()
        var codes: [String] = []
        for _ in 0..<12 { codes.append(try await freeMonth(entitlement: "race")) }  // one use per account and coupon
        let record = Self.record()
        let client = self.client
        let redemptions = 12
        let ids = try await withThrowingTaskGroup(of: String?.self) { group in
            for (i, code) in codes.enumerated() {
                group.addTask {
                    // Spread over a quarter second, so that the link lands among them (the point).
                    try await Task.sleep(for: .milliseconds(20 * i))
                    let r = try await client.json("POST", "/v1/redemptions", ["code": code, "platform": "web"], token: u.access)
                    return try? r.decode(RedemptionBody.self).redemptionId
                }
            }
            group.addTask {
                try await Task.sleep(for: .milliseconds(100))  // in the middle of the redemptions
                let r = try await client.json("POST", "/v1/me/cloudkit", ["recordName": record], token: u.access)
                XCTAssertEqual(try r.decode(LinkAnswer.self).changed, true, r.text)
                return nil
            }
            return try await group.reduce(into: [String]()) { if let id = $1 { $0.append(id) } }
        }
        XCTAssertEqual(ids.count, redemptions)
        for id in ids { try await completed(id, u) }
        // Every grant is in the ledger under the record name; none is left under the id the account left.
        let rows = try await sql("SELECT app_user_id, end_time FROM grants.grants WHERE account_id = $1", [UUID(uuidString: u.id)!])
        XCTAssertEqual(rows.rows.count, redemptions)
        XCTAssertEqual(Set(try rows.rows.map { try $0.decode("app_user_id", as: String.self) }), [record])
        let ends = Set(try rows.rows.map { Timestamp.milliseconds(try $0.decode("end_time", as: Date.self)) })
        XCTAssertEqual(ends.count, redemptions, "each coupon extends the last: \(redemptions) distinct periods")
        // RevenueCat holds every period under the record name, each once (a repeat is a duplicate it ignores).
        let all = try await Self.stack.eventually(15) { Self.revenueCat.grantEnds(record, "race") == ends }
        XCTAssertTrue(all, "RevenueCat: \(Self.revenueCat.grantEnds(record, "race").sorted()), ledger: \(ends.sorted())")
        XCTAssertTrue(Self.revenueCat.grantEnds(u.appUserId, "race").isSubset(of: ends), "nothing beyond the ledger went to the old id")
    }

    // MARK: - The store's view of Pro

    func testEntitlementsMergeTheStoresAndRedeemsWithTheirSources() async throws {
        let u = try await signUp()
        Self.revenueCat.addStorePurchase(u.appUserId, .init(productId: "pro_annual", store: "app_store", entitlementId: "pro",
                                                              expires: Date().addingTimeInterval(86400 * 300)))
        Self.revenueCat.addStorePurchase(u.appUserId, .init(productId: "maps_lifetime", store: "stripe", entitlementId: "maps", expires: nil))
        let redemption = try await redeem(try await freeMonth(entitlement: "extra"), u)
        try await completed(redemption, u)
        let e = try await entitlements(u.access)
        XCTAssertEqual(e.partial, false)
        let keys = e.data.map { ($0.entitlementId ?? "") + "/" + ($0.source ?? "") }
        XCTAssertEqual(
            keys.sorted(), ["extra/revenuecat", "maps/stripe", "pro/app_store"],
            "Redeem's own promotional grant is listed once: \(e.data)")
        XCTAssertEqual(e.data.first { $0.source == "stripe" }?.expiresAt, "9999-12-31T23:59:59.999Z", "lifetime")
        let me = try await me(u.access)
        XCTAssertEqual(me.managementUrl, "https://apps.apple.com/account/subscriptions")
    }

    func testRevenueCatDownOrSlowAnswersRedeemsOwnGrantsPartialInBoundedTime() async throws {
        let u = try await signUp()
        let redemption = try await redeem(try await freeMonth(entitlement: "pro"), u)
        try await completed(redemption, u)
        defer { Self.revenueCat.answerReads(.created) }
        for answer in [FakeRevenueCat.Answer.status(500, body: "boom"), .hang(seconds: 8)] {
            Self.revenueCat.answerReads(answer)
            let other = try await signUp()  // nothing cached for this one
            for token in [other.access, u.access] {
                let started = Date()
                let r = try await client.get("/v1/me/entitlements", token: token)
                XCTAssertEqual(r.status, 200, r.text)
                XCTAssertLessThan(Date().timeIntervalSince(started), 5, "bounded wait")
                let o = try r.decode(EntitlementsBody.self)
                XCTAssertEqual(o.partial, true, "\(answer)")
                XCTAssertEqual(o.data.count, token == other.access ? 0 : 1, "Redeem's own grant: \(r.text)")
            }
            let me = try await client.get("/v1/me", token: other.access)
            XCTAssertEqual(me.status, 200)
        }
    }
}

// MARK: - Account life cycle

extension AccountLinkTests {
    func testDeletingAnAccountEndsItsSessionsFreesItsIdsAndKeepsItsRedemptionsCounted() async throws {
        let email = "gone-\(UUID().uuidString.prefix(8))@example.com"
        let record = Self.record()
        let made = try await client.json("POST", "/v1/accounts", ["email": email, "password": "correct horse battery", "cloudkitRecordName": record])
        XCTAssertEqual(made.status, 201, made.text)
        let o = try made.decode(AccountSessionBody.self)
        let u = User(
            id: o.account.id, appUserId: record, access: o.session.accessToken,
            refresh: try XCTUnwrap(o.session.refreshToken))
        let second = try await client.json(
            "POST", "/v1/sessions", ["email": email, "password": "correct horse battery"])
        let otherAccess = try second.decode(AccountSessionBody.self).session.accessToken
        let code = "D-" + UUID().uuidString.prefix(8).uppercased()
        let coupon = try await client.json("POST", "/v1/coupons", ["code": code, "kind": "freePeriod", "duration": ["unit": "week", "count": 1],
                                                                    "maxRedemptions": 1], token: Self.stack.adminKey)
        XCTAssertEqual(coupon.status, 201, coupon.text)
        try await completed(try await redeem(code, u), u)

        let deleted = try await client.send("DELETE", "/v1/me", headers: ["Authorization": "Bearer \(u.access)"])
        XCTAssertEqual(deleted.status, 204, deleted.text)
        // Every session ends: this one at once, the other by the event; the refresh token and the password too.
        let meAfter = try await client.get("/v1/me", token: u.access)
        XCTAssertEqual(meAfter.status, 401)
        let otherRefused = try await Self.stack.eventually(5) { try await self.client.get("/v1/me", token: otherAccess).status == 401 }
        XCTAssertTrue(otherRefused)
        let refreshAfter = try await client.json("POST", "/v1/sessions/refresh", ["refreshToken": u.refresh])
        XCTAssertEqual(refreshAfter.status, 401)
        let signIn = try await client.json("POST", "/v1/sessions", ["email": email, "password": "correct horse battery"])
        XCTAssertEqual(signIn.status, 401)
        XCTAssertEqual(signIn.errorCode, "invalidCredentials")
        // The redemption stays, anonymised, and still holds the coupon's one use.
        let rows = try await client.get("/v1/coupons/\(code)/redemptions", token: Self.stack.adminKey).decode(
            ListBody<RedemptionBody>.self
        ).data
        let row = rows.first
        XCTAssertEqual(rows.count, 1)
        XCTAssertNil(row?.accountId, "\(String(describing: row))")
        XCTAssertNil(row?.appUserId)
        let next = try await signUp()
        let refused = try await client.json("POST", "/v1/redemptions", ["code": code, "platform": "web"], token: next.access)
        XCTAssertNotEqual(refused.status, 201, "the cap of 1 still counts the deleted account's use: \(refused.text)")
        // The same person can start again with the same email and record name.
        let again = try await client.json("POST", "/v1/accounts", ["email": email, "password": "another horse battery", "cloudkitRecordName": record])
        XCTAssertEqual(again.status, 201, again.text)
        XCTAssertEqual(try again.decode(AccountSessionBody.self).account.appUserId, record)
        XCTAssertNotEqual(try again.decode(AccountSessionBody.self).account.id, u.id)
    }

    /// A reservation still waiting for its purchase when the account is deleted ends (`released`),
    /// its use goes back to the coupon, and no redemption names the account any more.
    func testDeletingAnAccountEndsItsWaitingReservationsAndNamesItNowhere() async throws {
        let u = try await signUp()
        let code = "W-" + UUID().uuidString.prefix(8).uppercased()
        let coupon = try await client.json("POST", "/v1/coupons", ["code": code, "kind": "percentOff", "percentOff": 20, "productIds": ["pro.monthly"],
                                                                    "duration": ["unit": "month", "count": 1], "periodCount": 1,
                                                                    "platforms": ["web"], "maxRedemptions": 1], token: Self.stack.adminKey)
        XCTAssertEqual(coupon.status, 201, coupon.text)
        let reserved = try await client.json("POST", "/v1/redemptions", ["code": code, "platform": "web"], token: u.access)
        XCTAssertEqual(reserved.status, 201, reserved.text)
        XCTAssertEqual(try reserved.decode(RedemptionBody.self).status, "reserved")
        let full = try await signUp()
        let refusedWhileHeld = try await client.json("POST", "/v1/redemptions", ["code": code, "platform": "web"], token: full.access)
        XCTAssertEqual(refusedWhileHeld.status, 422, "the reservation holds the one use: \(refusedWhileHeld.text)")

        let deleted = try await client.send("DELETE", "/v1/me", headers: ["Authorization": "Bearer \(u.access)"])
        XCTAssertEqual(deleted.status, 204, deleted.text)
        let rows = try await client.get("/v1/coupons/\(code)/redemptions", token: Self.stack.adminKey).decode(
            ListBody<RedemptionBody>.self)
        let row = try XCTUnwrap(rows.data.first)
        XCTAssertEqual(row.status, "released")
        XCTAssertNil(row.accountId)
        XCTAssertNil(row.appUserId)
        let admin = try PGConnection(url: try Self.stack.adminDatabaseURL())
        let naming = try admin.query("SELECT count(*)::int AS n FROM coupons.redemptions WHERE account_id = $1 OR app_user_id = $2",
                                     [UUID(uuidString: u.id)!, u.appUserId]).first!.decode("n", as: Int.self)
        XCTAssertEqual(naming, 0)
        // The use went back: someone else can take it now.
        let taken = try await client.json("POST", "/v1/redemptions", ["code": code, "platform": "web"], token: full.access)
        XCTAssertEqual(taken.status, 201, taken.text)
    }
}
