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
    nonisolated(unsafe) static var receiver: WebhookReceiver!

    override class func startSuite() throws {
        revenueCat = try FakeRevenueCat()
        receiver = try WebhookReceiver()
        stack = try Stack(environment: [
            "REDEEM_ENTITLEMENT_PROVIDER": "revenuecat", "REDEEM_REVENUECAT_URL": revenueCat.url.absoluteString,
            "REDEEM_REVENUECAT_KEY": "sk_rc_link", "REDEEM_GRANT_MAX_RETRY_SECONDS": "1", "REDEEM_WEBHOOK_RETRY_SCHEDULE": "1,1,1",
            "REDEEM_WEBHOOK_ALLOW_PRIVATE": "1",
        ])
    }

    override class func stopSuite() {
        stack?.stop()
        let done = DispatchSemaphore(value: 0)
        Task { await revenueCat?.stop(); await receiver?.stop(); done.signal() }
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
        let o = try r.json(), a = o["account"] as! [String: Any], s = o["session"] as! [String: Any]
        return User(id: a["id"] as! String, appUserId: a["appUserId"] as! String, access: s["accessToken"] as! String, refresh: s["refreshToken"] as! String)
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
        return try XCTUnwrap(try r.json()["redemptionId"] as? String)
    }

    func completed(_ id: String, _ u: User) async throws {
        let r = try await client.get("/v1/redemptions/\(id)?wait=20", token: u.access)
        XCTAssertEqual(try r.json()["status"] as? String, "completed", r.text)
    }

    func link(_ record: String, _ u: User) async throws -> HTTPClient.Response {
        try await client.json("POST", "/v1/me/cloudkit", ["recordName": record], token: u.access)
    }

    func entitlements(_ token: String) async throws -> [String: Any] {
        let r = try await client.get("/v1/me/entitlements", token: token)
        XCTAssertEqual(r.status, 200, r.text)
        return try r.json()
    }

    func sql(_ text: String, _ params: [any PGBindable] = []) async throws -> PGResult {
        let database = try Self.stack.adminDatabaseURL()
        nonisolated(unsafe) let p = params
        return try await offThePool { try PGConnection(url: database).query(text, p) }
    }

    static func record() -> String { "_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased() }
    static func ms(_ iso: Any?) -> Int64? { (iso as? String).flatMap(Timestamp.parse).map(Timestamp.milliseconds) }

    // MARK: - Linking adopts the record name

    /// This suite's stack takes record names on the client's word (`REDEEM_CLOUDKIT_TRUST_CLIENT=1`,
    /// the test stacks' default: the proof is RecordNameProofTests'), which accounts warns of at start.
    func test0_trustingTheClientIsWarnedOfAtStart() throws {
        let warning = Self.stack.logs().split(separator: "\n").first { $0.contains("REDEEM_CLOUDKIT_TRUST_CLIENT=1") }
        let line = try XCTUnwrap(warning, "no warning at start")
        XCTAssertTrue(line.contains("\"level\":\"warn\""), String(line))
    }

    func test1_webFirstThenIOSLinkMovesTheIdAndItsGrants() async throws {
        let hook = try await client.json("POST", "/v1/webhooks", ["url": Self.receiver.url.absoluteString, "events": ["account.appUserIdChanged"]],
                                         token: Self.stack.adminKey)
        XCTAssertEqual(hook.status, 201, hook.text)
        let u = try await signUp()
        let redemption = try await redeem(try await freeMonth(entitlement: "pro"), u)
        try await completed(redemption, u)
        let before = try await entitlements(u.access)
        let end = Self.ms((before["data"] as? [[String: Any]])?.first?["expiresAt"])
        XCTAssertNotNil(end, "\(before)")

        let record = Self.record()
        let r = try await link(record, u)
        XCTAssertEqual(r.status, 200, r.text)
        let answer = try r.json()
        XCTAssertEqual(answer["appUserId"] as? String, record)
        XCTAssertEqual(answer["changed"] as? Bool, true)
        XCTAssertEqual(answer["previousAppUserId"] as? String, u.appUserId)
        let me = try await client.get("/v1/me", token: u.access).json()
        XCTAssertEqual(me["appUserId"] as? String, record)

        // The grant follows: the ledger under the record name, and RevenueCat granted again with the same end.
        let rows = try await sql("SELECT app_user_id FROM grants.grants WHERE redemption_id = $1", [UUID(uuidString: redemption)!])
        XCTAssertEqual(try rows.first?.decode("app_user_id", as: String.self), record)
        let granted = try await Self.stack.eventually(10) { Self.revenueCat.grantEnds(record, "pro") == [end!] }
        XCTAssertTrue(granted, "RevenueCat holds \(Self.revenueCat.grantEnds(record, "pro")) for the record name, want \(end!)")
        // A refreshed token carries the new id; an old one still reads the moved entitlement.
        let refreshed = try await client.json("POST", "/v1/sessions/refresh", ["refreshToken": u.refresh])
        let newToken = try XCTUnwrap((try refreshed.json()["session"] as? [String: Any])?["accessToken"] as? String)
        for token in [u.access, newToken] {
            let e = try await entitlements(token)
            let pro = (e["data"] as? [[String: Any]])?.filter { $0["entitlementId"] as? String == "pro" } ?? []
            XCTAssertEqual(pro.count, 1, "\(e)")
            XCTAssertEqual(Self.ms(pro.first?["expiresAt"]), end)
        }
        // Linking again changes nothing, and says why.
        let again = try await link(record, u).json()
        XCTAssertEqual(again["changed"] as? Bool, false)
        XCTAssertEqual(again["keptBecause"] as? String, "alreadyThisId")
        let other = try await link(Self.record(), u).json()
        XCTAssertEqual(other["appUserId"] as? String, record)
        XCTAssertEqual(other["keptBecause"] as? String, "recordNameAlready")
        // The apps hear of it.
        let delivered = try await Self.stack.eventually(10) {
            Self.receiver.received.contains { String(decoding: $0.body, as: UTF8.self).contains(record) }
        }
        XCTAssertTrue(delivered)
        let body = try XCTUnwrap(Self.receiver.received.first { String(decoding: $0.body, as: UTF8.self).contains(record) })
        let o = try XCTUnwrap(try JSONSerialization.jsonObject(with: body.body) as? [String: Any])
        XCTAssertEqual(o["type"] as? String, "account.appUserIdChanged")
        let data = o["data"] as? [String: Any]
        XCTAssertEqual(data?["previousAppUserId"] as? String, u.appUserId)
        XCTAssertEqual((data?["accountId"] as? String)?.lowercased(), u.id.lowercased())
    }

    func test2_androidFirstWithAStorePurchaseKeepsItsId() async throws {
        let u = try await signUp()
        Self.revenueCat.addStorePurchase(u.appUserId, .init(productId: "pro_monthly", store: "play_store", entitlementId: "pro",
                                                              expires: Date().addingTimeInterval(86400 * 20)))
        let r = try await link(Self.record(), u)
        XCTAssertEqual(r.status, 200, r.text)
        let o = try r.json()
        XCTAssertEqual(o["appUserId"] as? String, u.appUserId)
        XCTAssertEqual(o["changed"] as? Bool, false)
        XCTAssertEqual(o["keptBecause"] as? String, "storePurchases")
        XCTAssertNil(o["previousAppUserId"])
        let me = try await client.get("/v1/me", token: u.access).json()
        XCTAssertEqual(me["appUserId"] as? String, u.appUserId)
        XCTAssertEqual(me["managementUrl"] as? String, "https://play.google.com/store/account/subscriptions")
        XCTAssertEqual((me["identities"] as? [[String: Any]])?.filter { $0["type"] as? String == "cloudkit" }.count, 1)
    }

    func test3_aProviderThatCannotBeReadChangesNothingAnd503() async throws {
        let u = try await signUp()
        Self.revenueCat.answerReads(.status(503, body: "down"))
        let record = Self.record()
        let r = try await link(record, u)
        XCTAssertEqual(r.status, 503, r.text)
        let me = try await client.get("/v1/me", token: u.access).json()
        XCTAssertEqual(me["appUserId"] as? String, u.appUserId)
        XCTAssertEqual(me["managementUrl"] as? NSNull, NSNull(), "null, not left out, when the store can't be read")
        Self.revenueCat.answerReads(.created)
        let retried = try await link(record, u).json()
        XCTAssertEqual(retried["changed"] as? Bool, true)
    }

    func test4_twoDevicesLinkingAtOnceChangeTheIdOnce() async throws {
        for _ in 0..<3 {
            let u = try await signUp()
            let names = (0..<4).map { _ in Self.record() }
            let client = self.client
            let answers = try await withThrowingTaskGroup(of: (changed: Bool?, appUserId: String?).self) { group in
                for n in names {
                    group.addTask {
                        let o = try await client.json("POST", "/v1/me/cloudkit", ["recordName": n], token: u.access).json()
                        return (o["changed"] as? Bool, o["appUserId"] as? String)
                    }
                }
                return try await group.reduce(into: [(changed: Bool?, appUserId: String?)]()) { $0.append($1) }
            }
            XCTAssertEqual(answers.filter { $0.changed == true }.count, 1, "\(answers)")
            let ids = Set(answers.compactMap(\.appUserId))
            XCTAssertEqual(ids.count, 1, "every answer names the one id: \(answers)")
            let me = try await client.get("/v1/me", token: u.access).json()
            XCTAssertEqual(me["appUserId"] as? String, ids.first)
            XCTAssertEqual(Set((me["identities"] as? [[String: Any]] ?? []).compactMap { $0["recordName"] as? String }), Set(names))
            let moves = try await sql("SELECT count(*)::int AS n FROM grants.holder_moves WHERE from_app_user_id = $1", [u.appUserId])
            XCTAssertEqual(try moves.first?.decode("n", as: Int.self), 1)
        }
    }

    func test5_aLinkDuringRedemptionsGrantsEachOnceUnderTheNewId() async throws {
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
                    try await Task.sleep(for: .milliseconds(20 * i))
                    let r = try await client.json("POST", "/v1/redemptions", ["code": code, "platform": "web"], token: u.access)
                    return try r.json()["redemptionId"] as? String
                }
            }
            group.addTask {
                try await Task.sleep(for: .milliseconds(100))
                let r = try await client.json("POST", "/v1/me/cloudkit", ["recordName": record], token: u.access)
                XCTAssertEqual(try r.json()["changed"] as? Bool, true, r.text)
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

    func test6_entitlementsMergeTheStoresAndRedeemsWithTheirSources() async throws {
        let u = try await signUp()
        Self.revenueCat.addStorePurchase(u.appUserId, .init(productId: "pro_annual", store: "app_store", entitlementId: "pro",
                                                              expires: Date().addingTimeInterval(86400 * 300)))
        Self.revenueCat.addStorePurchase(u.appUserId, .init(productId: "maps_lifetime", store: "stripe", entitlementId: "maps", expires: nil))
        let redemption = try await redeem(try await freeMonth(entitlement: "extra"), u)
        try await completed(redemption, u)
        let e = try await entitlements(u.access)
        XCTAssertEqual(e["partial"] as? Bool, false)
        let data = e["data"] as? [[String: Any]] ?? []
        let bySource = Dictionary(uniqueKeysWithValues: data.map { (($0["entitlementId"] as? String ?? "") + "/" + ($0["source"] as? String ?? ""), $0) })
        XCTAssertEqual(Set(bySource.keys), ["pro/app_store", "maps/stripe", "extra/revenuecat"], "Redeem's own promotional grant is listed once: \(data)")
        XCTAssertEqual(bySource["maps/stripe"]?["expiresAt"] as? String, "9999-12-31T23:59:59.999Z", "lifetime")
        let me = try await client.get("/v1/me", token: u.access).json()
        XCTAssertEqual(me["managementUrl"] as? String, "https://apps.apple.com/account/subscriptions")
    }

    func test7_revenueCatDownOrSlowAnswersRedeemsOwnGrantsPartialInBoundedTime() async throws {
        let u = try await signUp()
        let redemption = try await redeem(try await freeMonth(entitlement: "pro"), u)
        try await completed(redemption, u)
        for answer in [FakeRevenueCat.Answer.status(500, body: "boom"), .hang(seconds: 8)] {
            Self.revenueCat.answerReads(answer)
            let other = try await signUp()  // nothing cached for this one
            for token in [other.access, u.access] {
                let started = Date()
                let r = try await client.get("/v1/me/entitlements", token: token)
                XCTAssertEqual(r.status, 200, r.text)
                XCTAssertLessThan(Date().timeIntervalSince(started), 5, "bounded wait")
                let o = try r.json()
                XCTAssertEqual(o["partial"] as? Bool, true, "\(answer)")
                XCTAssertEqual((o["data"] as? [[String: Any]])?.count, token == other.access ? 0 : 1, "Redeem's own grant: \(o)")
            }
            let me = try await client.get("/v1/me", token: other.access)
            XCTAssertEqual(me.status, 200)
        }
        Self.revenueCat.answerReads(.created)
    }
}

// MARK: - Account life cycle

extension AccountLinkTests {
    func test8_deletingAnAccountEndsItsSessionsFreesItsIdsAndKeepsItsRedemptionsCounted() async throws {
        let email = "gone-\(UUID().uuidString.prefix(8))@example.com"
        let record = Self.record()
        let made = try await client.json("POST", "/v1/accounts", ["email": email, "password": "correct horse battery", "cloudkitRecordName": record])
        XCTAssertEqual(made.status, 201, made.text)
        let o = try made.json(), s = o["session"] as! [String: Any]
        let u = User(id: (o["account"] as! [String: Any])["id"] as! String, appUserId: record, access: s["accessToken"] as! String,
                     refresh: s["refreshToken"] as! String)
        let second = try await client.json("POST", "/v1/sessions", ["email": email, "password": "correct horse battery"])
        let otherAccess = try XCTUnwrap((try second.json()["session"] as? [String: Any])?["accessToken"] as? String)
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
        let rows = try await client.get("/v1/coupons/\(code)/redemptions", token: Self.stack.adminKey).json()
        let row = (rows["data"] as? [[String: Any]])?.first
        XCTAssertEqual((rows["data"] as? [[String: Any]])?.count, 1)
        XCTAssertNil(row?["accountId"] as? String, "\(String(describing: row))")
        XCTAssertNil(row?["appUserId"] as? String)
        let next = try await signUp()
        let refused = try await client.json("POST", "/v1/redemptions", ["code": code, "platform": "web"], token: next.access)
        XCTAssertNotEqual(refused.status, 201, "the cap of 1 still counts the deleted account's use: \(refused.text)")
        // The same person can start again with the same email and record name.
        let again = try await client.json("POST", "/v1/accounts", ["email": email, "password": "another horse battery", "cloudkitRecordName": record])
        XCTAssertEqual(again.status, 201, again.text)
        XCTAssertEqual((try again.json()["account"] as? [String: Any])?["appUserId"] as? String, record)
        XCTAssertNotEqual((try again.json()["account"] as? [String: Any])?["id"] as? String, u.id)
    }

    /// A reservation still waiting for its purchase when the account is deleted ends (`released`),
    /// its use goes back to the coupon, and no redemption names the account any more.
    func test9_deletingAnAccountEndsItsWaitingReservationsAndNamesItNowhere() async throws {
        let u = try await signUp()
        let code = "W-" + UUID().uuidString.prefix(8).uppercased()
        let coupon = try await client.json("POST", "/v1/coupons", ["code": code, "kind": "percentOff", "percentOff": 20, "productIds": ["pro.monthly"],
                                                                    "duration": ["unit": "month", "count": 1], "periodCount": 1,
                                                                    "platforms": ["web"], "maxRedemptions": 1], token: Self.stack.adminKey)
        XCTAssertEqual(coupon.status, 201, coupon.text)
        let reserved = try await client.json("POST", "/v1/redemptions", ["code": code, "platform": "web"], token: u.access)
        XCTAssertEqual(reserved.status, 201, reserved.text)
        XCTAssertEqual(try reserved.json()["status"] as? String, "reserved")
        let full = try await signUp()
        let refusedWhileHeld = try await client.json("POST", "/v1/redemptions", ["code": code, "platform": "web"], token: full.access)
        XCTAssertEqual(refusedWhileHeld.status, 422, "the reservation holds the one use: \(refusedWhileHeld.text)")

        let deleted = try await client.send("DELETE", "/v1/me", headers: ["Authorization": "Bearer \(u.access)"])
        XCTAssertEqual(deleted.status, 204, deleted.text)
        let rows = try await client.get("/v1/coupons/\(code)/redemptions", token: Self.stack.adminKey).json()
        let row = try XCTUnwrap((rows["data"] as? [[String: Any]])?.first)
        XCTAssertEqual(row["status"] as? String, "released")
        XCTAssertNil(row["accountId"] as? String)
        XCTAssertNil(row["appUserId"] as? String)
        let admin = try PGConnection(url: try Self.stack.adminDatabaseURL())
        let naming = try admin.query("SELECT count(*)::int AS n FROM coupons.redemptions WHERE account_id = $1 OR app_user_id = $2",
                                     [UUID(uuidString: u.id)!, u.appUserId]).first!.decode("n", as: Int.self)
        XCTAssertEqual(naming, 0)
        // The use went back: someone else can take it now.
        let taken = try await client.json("POST", "/v1/redemptions", ["code": code, "platform": "web"], token: full.access)
        XCTAssertEqual(taken.status, 201, taken.text)
    }
}
