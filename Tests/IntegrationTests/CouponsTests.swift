import Bus
import Core
import Database
import Foundation
import Runtime
import TestSupport
import XCTest

/// Coupons, validate and redeem through the gateway: the operator API with every rule and store limit,
/// validate and redeem with every reason, purchases, releases, races and the CSV export.
final class CouponsTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!
    nonisolated(unsafe) static var minter: TokenMinter!

    override class func startSuite() throws {
        stack = try Stack(environment: ["REDEEM_RESERVATION_TTL": "2", "REDEEM_RESERVATION_SWEEP_MS": "200"])
        minter = try stack.minter()
    }

    override class func stopSuite() {
        stack?.stop()
    }

    var client: HTTPClient { Self.stack.client }
    var admin: String { Self.stack.adminKey }

    static func code(_ prefix: String = "C") -> String { prefix + "-" + UUID().uuidString.prefix(8).uppercased() }
    static var inAMonth: String { Timestamp.iso8601(Date().addingTimeInterval(30 * 86400)) }

    @discardableResult
    func create(_ fields: [String: Any], token: String? = nil, query: String = "") async throws -> HTTPClient.Response {
        try await client.json("POST", "/v1/coupons" + query, fields, token: token ?? admin)
    }

    func freePeriod(_ extra: [String: Any] = [:]) async throws -> String {
        let code = Self.code("FREE")
        var body: [String: Any] = [
            "code": code.lowercased(), "kind": "freePeriod", "duration": ["unit": "month", "count": 1]
        ]
        for (k, v) in extra { body[k] = v }
        let r = try await create(body)
        XCTAssertEqual(r.status, 201, r.text)
        return code
    }

    func user() throws -> TokenMinter.User { try Self.minter.user() }

    func redeem(
        _ code: String, _ u: TokenMinter.User, platform: String = "web", extra: [String: Any] = [:]
    ) async throws -> HTTPClient.Response {
        var body: [String: Any] = ["code": code, "platform": platform]
        for (k, v) in extra { body[k] = v }
        return try await client.json("POST", "/v1/redemptions", body, token: u.token)
    }

    func validate(_ code: String, _ u: TokenMinter.User, platform: String? = nil) async throws -> [String: Any] {
        var body: [String: Any] = ["code": code]
        if let platform { body["platform"] = platform }
        let r = try await client.json("POST", "/v1/coupons/validate", body, token: u.token)
        XCTAssertEqual(r.status, 200, r.text)
        return try r.json()
    }

    func coupon(_ code: String) async throws -> [String: Any] {
        let r = try await client.get("/v1/coupons/\(code)", token: admin)
        XCTAssertEqual(r.status, 200, r.text)
        return try r.json()
    }

    // MARK: - Operator API

    func testCreateGetDryRunAndCodesMatchWithoutCase() async throws {
        let code = try await freePeriod(["maxRedemptions": 5])
        let got = try await coupon(code.lowercased())
        XCTAssertEqual(got["code"] as? String, code, "stored upper-case")
        XCTAssertEqual(got["entitlementId"] as? String, "all", "default entitlement")
        XCTAssertEqual(got["remaining"] as? Int, 5)
        XCTAssertEqual(got["mode"] as? String, "live")
        XCTAssertEqual((got["storeLimits"] as? [Any])?.count, 0)
        XCTAssertEqual(got["platforms"] as? [String], ["android", "ios", "web"])
        let dup = try await create([
            "code": code.lowercased(), "kind": "freePeriod", "duration": ["unit": "day", "count": 7]
        ])
        XCTAssertEqual(dup.status, 409)
        XCTAssertEqual(dup.errorCode, "codeInUse")
        let dryCode = Self.code("DRY")
        let dry = try await create(
            [
                "code": dryCode, "kind": "percentOff", "percentOff": 20, "productIds": ["pro.monthly"],
                "duration": ["unit": "month", "count": 1], "periodCount": 3, "platforms": ["ios"],
                "maxRedemptions": 100, "expiresAt": Self.inAMonth
            ], query: "?dryRun=true")
        XCTAssertEqual(dry.status, 200, dry.text)
        XCTAssertEqual((try dry.json()["storeLimits"] as? [[String: Any]])?.first?["value"] as? Int, 25_000)
        let notSaved = try await client.get("/v1/coupons/\(dryCode)", token: admin)
        XCTAssertEqual(notSaved.status, 404)
        let readonly = try await client.json(
            "POST", "/v1/api-keys", ["name": "ro", "role": "readonly", "mode": "live"], token: admin)
        let roKey = try XCTUnwrap(try readonly.json()["key"] as? String)
        let forbidden = try await create(
            ["code": Self.code(), "kind": "freePeriod", "duration": ["unit": "day", "count": 1]], token: roKey)
        XCTAssertEqual(forbidden.status, 403)
        let roGet = try await client.get("/v1/coupons/\(code)", token: roKey)
        XCTAssertEqual(roGet.status, 200, "readonly keys read coupons")
        let userGet = try await client.get("/v1/coupons/\(code)", token: try user().token)
        XCTAssertEqual(userGet.status, 403)
    }

    func testNameAndMetadataAreKeptChangedExportedAndChecked() async throws {
        let code = try await freePeriod(["name": "Spring sale", "metadata": ["campaign": "spring", "owner": "growth"]])
        var got = try await coupon(code)
        XCTAssertEqual(got["name"] as? String, "Spring sale")
        XCTAssertEqual(got["metadata"] as? [String: String], ["campaign": "spring", "owner": "growth"])
        let plain = try await coupon(try await freePeriod())
        XCTAssertTrue(plain["name"] is NSNull, "an unnamed coupon says so")
        XCTAssertEqual(plain["metadata"] as? [String: String], [:])

        // A change merges metadata, an empty value removing its key; null removes.
        let merged = try await client.json(
            "PATCH", "/v1/coupons/\(code)", ["name": "Spring sale 2", "metadata": ["region": "eu", "owner": ""]], token: admin)
        XCTAssertEqual(merged.status, 200, merged.text)
        got = try merged.json()
        XCTAssertEqual(got["name"] as? String, "Spring sale 2")
        XCTAssertEqual(got["metadata"] as? [String: String], ["campaign": "spring", "region": "eu"])
        let reread = try await coupon(code)
        XCTAssertEqual(reread["metadata"] as? [String: String], ["campaign": "spring", "region": "eu"])

        // The CSV export names the coupon and its metadata on each row.
        let u = try user()
        let redeemed = try await redeem(code, u)
        XCTAssertEqual(redeemed.status, 201, redeemed.text)
        let csv = try await client.send(
            "GET", "/v1/coupons/\(code)/redemptions",
            headers: ["Authorization": "Bearer \(admin)", "Accept": "text/csv"])
        let lines = csv.text.split(separator: "\r\n").map(String.init)
        XCTAssertTrue(lines.first?.hasSuffix(",couponName,couponMetadata") == true, csv.text)
        XCTAssertEqual(lines.count, 2)
        let cells = #",Spring sale 2,"{""campaign"":""spring"",""region"":""eu""}""#
        XCTAssertTrue(lines.last?.hasSuffix(cells) == true, csv.text)

        // Bad ones are 422 naming the field, and change nothing.
        let many = Dictionary(uniqueKeysWithValues: (0...50).map { ("k\($0)", "v") })
        let bad: [(String, [String: Any], String)] = [
            ("long name", ["name": String(repeating: "n", count: 41)], "name"),
            ("empty name", ["name": ""], "name"),
            ("51 keys", ["metadata": many], "metadata"),
            ("long key", ["metadata": [String(repeating: "k", count: 41): "v"]], "metadata"),
            ("bracket key", ["metadata": ["a[b]": "v"]], "metadata"),
            ("long value", ["metadata": ["note": String(repeating: "v", count: 501)]], "metadata.note"),
            ("number value", ["metadata": ["count": 3]], "metadata.count"),
            ("not an object", ["metadata": ["a", "b"]], "metadata"),
        ]
        for (what, fields, field) in bad {
            var body: [String: Any] = [
                "code": Self.code("BAD"), "kind": "freePeriod", "duration": ["unit": "month", "count": 1]
            ]
            for (k, v) in fields { body[k] = v }
            let r = try await create(body)
            XCTAssertEqual(r.status, 422, "\(what): \(r.text)")
            XCTAssertEqual(r.errorField, field, what)
            let none = try await client.get("/v1/coupons/\(body["code"] as! String)", token: admin)
            XCTAssertEqual(none.status, 404, what)
            let change = try await client.json("PATCH", "/v1/coupons/\(code)", fields, token: admin)
            XCTAssertEqual(change.status, 422, "\(what): \(change.text)")
            XCTAssertEqual(change.errorField, field, what)
        }
        let fill = Dictionary(uniqueKeysWithValues: (0..<49).map { ("k\($0)", "v") })
        let full = try await client.json("PATCH", "/v1/coupons/\(code)", ["metadata": fill], token: admin)
        XCTAssertEqual(full.status, 422, "49 more keys than the 2 it has: \(full.text)")
        XCTAssertEqual(full.errorField, "metadata")
        let unchanged = try await coupon(code)
        XCTAssertEqual(unchanged["metadata"] as? [String: String], ["campaign": "spring", "region": "eu"])

        let removed = try await client.send(
            "PATCH", "/v1/coupons/\(code)", body: Data(#"{"name":null,"metadata":null}"#.utf8),
            headers: ["Authorization": "Bearer \(admin)", "Content-Type": "application/json"])
        XCTAssertEqual(removed.status, 200, removed.text)
        got = try removed.json()
        XCTAssertTrue(got["name"] is NSNull)
        XCTAssertEqual(got["metadata"] as? [String: String], [:])

        // The OpenAPI schema describes both, in and out.
        let document = try await client.get("/openapi.json").json()
        let schemas = try XCTUnwrap((document["components"] as? [String: Any])?["schemas"] as? [String: [String: Any]])
        for schema in ["Coupon", "CouponInput", "CouponPatch"] {
            let properties = schemas[schema]?["properties"] as? [String: Any]
            XCTAssertNotNil(properties?["name"], schema)
            XCTAssertNotNil(properties?["metadata"], schema)
        }
    }

    func testEveryFieldRuleIs422NamingTheField() async throws {
        let base: [String: Any] = [
            "kind": "percentOff", "percentOff": 10, "productIds": ["p1"], "duration": ["unit": "month", "count": 1],
            "periodCount": 1, "platforms": ["android"]
        ]
        let cases: [(String, [String: Any], String)] = [
            ("short code", ["code": "AB"], "code"),
            ("long code", ["code": String(repeating: "A", count: 65)], "code"),
            ("bad charset", ["code": "SPRING 25"], "code"),
            ("unicode", ["code": "ÉTÉ-25"], "code"),
            ("unknown kind", ["kind": "bogo"], "kind"),
            ("percent 0", ["percentOff": 0], "percentOff"),
            ("percent 101", ["percentOff": 101], "percentOff"),
            ("percent fraction", ["percentOff": 12.5], "percentOff"),
            ("amount on percent", ["amountOff": ["amount": "1.00", "currency": "EUR"]], "amountOff"),
            ("no products", ["productIds": []], "productIds"),
            ("no duration", ["duration": NSNull()], "duration"),
            ("bad unit", ["duration": ["unit": "fortnight", "count": 1]], "duration.unit"),
            ("zero count", ["duration": ["unit": "day", "count": 0]], "duration.count"),
            ("fractional count", ["duration": ["unit": "day", "count": 1.5]], "duration.count"),
            ("no periods", ["periodCount": 0], "periodCount"),
            ("unknown platform", ["platforms": ["windows"]], "platforms"),
            ("expired", ["expiresAt": Timestamp.iso8601(Date().addingTimeInterval(-60))], "expiresAt"),
            (
                "before start",
                ["startsAt": Self.inAMonth, "expiresAt": Timestamp.iso8601(Date().addingTimeInterval(86400))],
                "expiresAt"
            ),
            ("bad time", ["expiresAt": "next tuesday"], "expiresAt"),
            ("zero cap", ["maxRedemptions": 0], "maxRedemptions"),
            ("cap past the largest", ["maxRedemptions": Coupons.largestCap + 1], "maxRedemptions"),
            ("cap past the column", ["maxRedemptions": 2_305_843_009_213_693_951], "maxRedemptions")
        ]
        for (name, change, field) in cases {
            var body = base
            body["code"] = Self.code()
            for (k, v) in change { if v is NSNull { body[k] = nil } else { body[k] = v } }
            let r = try await create(body)
            XCTAssertEqual(r.status, 422, "\(name): \(r.text)")
            XCTAssertEqual(r.errorField, field, name)
        }
        // Numbers past every Swift type are valid JSON, so 422 naming the field, not 400.
        for (raw, field) in [
            (#""maxRedemptions":1e400"#, "maxRedemptions"),
            (#""maxRedemptions":\#(String(repeating: "9", count: 5000))"#, "maxRedemptions")
        ] {
            let body = #"{"code":"\#(Self.code())","kind":"freePeriod","duration":{"unit":"day","count":1},\#(raw)}"#
            let r = try await client.send(
                "POST", "/v1/coupons", body: Data(body.utf8),
                headers: ["Content-Type": "application/json", "Authorization": "Bearer \(admin)"])
            XCTAssertEqual(r.status, 422, r.text)
            XCTAssertEqual(r.errorField, field)
        }
        let money: [(String, [String: Any], String)] = [
            ("negative", ["amount": "-1.00", "currency": "EUR"], "amountOff.amount"),
            ("three decimals", ["amount": "1.999", "currency": "EUR"], "amountOff.amount"),
            ("not a number", ["amount": "1,50", "currency": "EUR"], "amountOff.amount"),
            ("zero", ["amount": "0.00", "currency": "EUR"], "amountOff.amount"),
            ("currency", ["amount": "1.50", "currency": "euro"], "amountOff.currency")
        ]
        for (name, m, field) in money {
            let r = try await create([
                "code": Self.code(), "kind": "amountOff", "amountOff": m, "productIds": ["p1"],
                "duration": ["unit": "month", "count": 1], "periodCount": 1, "platforms": ["web"]
            ])
            XCTAssertEqual(r.status, 422, name)
            XCTAssertEqual(r.errorField, field, name)
        }
        let ok = try await create([
            "code": Self.code(), "kind": "amountOff", "amountOff": ["amount": "4.9", "currency": "EUR"],
            "productIds": ["p1"],
            "duration": ["unit": "month", "count": 1], "periodCount": 1, "platforms": ["web"]
        ])
        XCTAssertEqual(ok.status, 201, ok.text)
        struct AmountOff: Decodable { let amountOff: MoneyBody }
        XCTAssertEqual(try ok.decode(AmountOff.self).amountOff.amount, "4.90")
    }

    func testStoreLimitsForIOSDiscounts() async throws {
        let product = "pro.yearly." + UUID().uuidString.prefix(6)
        func ios(_ extra: [String: Any]) -> [String: Any] {
            var b: [String: Any] = [
                "code": Self.code("IOS"), "kind": "percentOff", "percentOff": 50, "productIds": [product],
                "duration": ["unit": "year", "count": 1], "periodCount": 1, "platforms": ["ios", "web"],
                "maxRedemptions": 1000, "expiresAt": Self.inAMonth
            ]
            for (k, v) in extra { if v is NSNull { b[k] = nil } else { b[k] = v } }
            return b
        }
        let sevenMonths = Timestamp.iso8601(
            Calendar(identifier: .gregorian).date(byAdding: .month, value: 7, to: Date())!)
        for (change, field) in [
            (["maxRedemptions": NSNull()] as [String: Any], "maxRedemptions"),
            (["maxRedemptions": 25_001], "maxRedemptions"),
            (["expiresAt": NSNull()], "expiresAt"), (["expiresAt": sevenMonths], "expiresAt")
        ] {
            let r = try await create(ios(change))
            XCTAssertEqual(r.status, 422, r.text)
            XCTAssertEqual(r.errorCode, "storeLimit")
            XCTAssertEqual(r.errorField, field)
        }
        var codes: [String] = []
        for _ in 0..<10 {
            let b = ios([:])
            let r = try await create(b)
            XCTAssertEqual(r.status, 201, r.text)
            codes.append(b["code"] as! String)
        }
        let eleventh = try await create(ios([:]))
        XCTAssertEqual(eleventh.status, 422)
        XCTAssertEqual(eleventh.errorCode, "storeLimit")
        XCTAssertEqual(eleventh.errorField, "productIds")
        XCTAssertTrue(eleventh.text.contains("10"), "the message names the limit")
        // Limits apply on change too; android-only or freePeriod coupons have none.
        let raise = try await client.json("PATCH", "/v1/coupons/\(codes[0])", ["maxRedemptions": 30_000], token: admin)
        XCTAssertEqual(raise.errorCode, "storeLimit")
        let android = try await create(
            ios(["platforms": ["android"], "maxRedemptions": NSNull(), "expiresAt": NSNull()]))
        XCTAssertEqual(android.status, 201, android.text)
        XCTAssertEqual((try android.json()["storeLimits"] as? [Any])?.count, 0)
        // Deactivating one frees a place.
        let del = try await client.send(
            "DELETE", "/v1/coupons/\(codes[0])", headers: ["Authorization": "Bearer \(admin)"])
        XCTAssertEqual(del.status, 204)
        let now11 = try await create(ios([:]))
        XCTAssertEqual(now11.status, 201)
    }

    func testListIsNewestFirstWithCursorsAndQueryRules() async throws {
        var made: [String] = []
        for _ in 0..<5 { made.append(try await freePeriod()) }
        var seen: [String] = []
        var cursor: String?
        repeat {
            let r = try await client.get("/v1/coupons?limit=2" + (cursor.map { "&cursor=\($0)" } ?? ""), token: admin)
            XCTAssertEqual(r.status, 200, r.text)
            let o = try r.json()
            seen += (o["data"] as? [[String: Any]] ?? []).compactMap { $0["code"] as? String }
            cursor = o["nextCursor"] as? String
        } while cursor != nil
        let mine = seen.filter { made.contains($0) }
        XCTAssertEqual(mine, made.reversed(), "newest first, each once")
        XCTAssertEqual(Set(seen).count, seen.count)
        for bad in ["limit=0", "limit=101", "limit=ten", "active=maybe", "cursor=garbage"] {
            let r = try await client.get("/v1/coupons?\(bad)", token: admin)
            XCTAssertEqual(r.status, 422, bad)
        }
        let inactive = try await client.get("/v1/coupons?active=false&limit=100", token: admin)
        XCTAssertTrue(
            (try inactive.json()["data"] as? [[String: Any]] ?? []).allSatisfy { $0["active"] as? Bool == false })
    }

    // MARK: - Validate and redeem

    func testEveryRefusalReasonForValidateAndRedeem() async throws {
        let u = try user()
        func expect(_ code: String, _ reason: String, platform: String = "web", line: UInt = #line) async throws {
            let v = try await validate(code, u, platform: platform)
            XCTAssertEqual(v["valid"] as? Bool, false, line: line)
            XCTAssertEqual(v["reason"] as? String, reason, "validate", line: line)
            let r = try await redeem(code, u, platform: platform)
            XCTAssertEqual(r.status, 422, line: line)
            XCTAssertEqual(r.errorCode, reason, "redeem", line: line)
        }
        try await expect("NO-SUCH-CODE", "notFound")
        let inactive = try await freePeriod()
        _ = try await client.send("DELETE", "/v1/coupons/\(inactive)", headers: ["Authorization": "Bearer \(admin)"])
        try await expect(inactive, "inactive")
        try await expect(try await freePeriod(["startsAt": Self.inAMonth]), "notStarted")
        let soon = try await freePeriod(["expiresAt": Timestamp.iso8601(Date().addingTimeInterval(1.5))])
        try await Task.sleep(for: .seconds(2))  // time passing past the expiry is the point
        try await expect(soon, "expired")
        try await expect(try await freePeriod(["platforms": ["ios"]]), "notEligible", platform: "android")
        let capped = try await freePeriod(["maxRedemptions": 1])
        let a1 = try await redeem(capped, try user()).status
        XCTAssertEqual(a1, 201)
        try await expect(capped, "exhausted")
        // New customers only: an account with a completed redemption is not new.
        let newOnly = try await freePeriod(["newCustomersOnly": true])
        let veteran = try user()
        let first = try await freePeriod()
        let done = try await redeem(first, veteran)
        let id = try XCTUnwrap(try done.json()["redemptionId"] as? String)
        let db = try PGConnection(url: try Self.stack.adminDatabaseURL())
        try db.query("UPDATE coupons.redemptions SET status = 'completed' WHERE id = $1", [UUID(uuidString: id)!])
        let v = try await validate(newOnly, veteran)
        XCTAssertEqual(v["reason"] as? String, "notEligible")
        let r = try await redeem(newOnly, veteran)
        XCTAssertEqual(r.errorCode, "notEligible")
        let fresh = try await validate(newOnly, try user())
        XCTAssertEqual(fresh["valid"] as? Bool, true)
        // alreadyRedeemed (validate), and the same redemption again from redeem.
        let again = try await validate(first, veteran)
        XCTAssertEqual(again["reason"] as? String, "alreadyRedeemed")
        let repeatRedeem = try await redeem(first, veteran)
        XCTAssertEqual(repeatRedeem.status, 200)
        XCTAssertEqual(try repeatRedeem.json()["redemptionId"] as? String, id)
        // Several reasons: the first in the documented order wins (inactive before expired).
        let both = try await freePeriod([
            "expiresAt": Timestamp.iso8601(Date().addingTimeInterval(1.2)), "platforms": ["ios"]
        ])
        _ = try await client.send("DELETE", "/v1/coupons/\(both)", headers: ["Authorization": "Bearer \(admin)"])
        try await Task.sleep(for: .seconds(1.5))  // past its expiry: time passing is the point
        try await expect(both, "inactive", platform: "android")
        let guest = try await client.json("POST", "/v1/coupons/validate", ["code": first])
        XCTAssertEqual(guest.status, 401)
        XCTAssertEqual(guest.errorCode, "notIdentified")
    }

    /// App Review 3.1.1: a free period Redeem grants is refused inside an iOS app with `webOnly`
    /// and the redeem page for the code, on validate and on redeem, and nothing is reserved; the
    /// same code redeems on the web, and inside the app once the operator allows it.
    func testAFreePeriodIsWebOnlyInsideAnIOSAppUnlessAllowed() async throws {
        let code = try await freePeriod()
        let u = try user()
        let v = try await validate(code, u, platform: "ios")
        XCTAssertEqual(v["valid"] as? Bool, false)
        XCTAssertEqual(v["reason"] as? String, "webOnly")
        let page = try XCTUnwrap(v["redeemUrl"] as? String, "\(v)")
        XCTAssertEqual(page, "http://\(Self.stack.gateway.host!):\(Self.stack.gateway.port!)/redeem?code=\(code)")
        let refused = try await redeem(code.lowercased(), u, platform: "ios")
        XCTAssertEqual(refused.status, 422, refused.text)
        XCTAssertEqual(refused.errorCode, "webOnly")
        let error = try XCTUnwrap(try refused.json()["error"] as? [String: Any])
        XCTAssertEqual(error["redeemUrl"] as? String, page, refused.text)
        let reserved = try await coupon(code)["reservedCount"] as? Int
        XCTAssertEqual(reserved, 0)
        // The page opens with the code filled in, and the web redeems it.
        let opened = try await client.get("/redeem?code=\(code)")
        XCTAssertEqual(opened.status, 200)
        let web = try await redeem(code, u, platform: "web")
        XCTAssertEqual(web.status, 201, web.text)

        let allowed = try await freePeriod(["allowInApp": true])
        let allowedFlag = try await coupon(allowed)["allowInApp"] as? Bool
        XCTAssertEqual(allowedFlag, true)
        let webOnlyFlag = try await coupon(code)["allowInApp"] as? Bool
        XCTAssertEqual(webOnlyFlag, false)
        let inAppValid = try await validate(allowed, u, platform: "ios")["valid"] as? Bool
        XCTAssertEqual(inAppValid, true)
        let inApp = try await redeem(allowed, u, platform: "ios")
        XCTAssertEqual(inApp.status, 201, inApp.text)
        // Only a free period can be allowed in the app: a discount there is an App Store offer code.
        let discount = try await create([
            "code": Self.code(), "kind": "percentOff", "percentOff": 20, "duration": ["unit": "month", "count": 1],
            "periodCount": 1, "productIds": ["pro.monthly"], "platforms": ["web"], "allowInApp": true
        ])
        XCTAssertEqual(discount.status, 422, discount.text)
        XCTAssertEqual(discount.errorField, "allowInApp")
    }

    func testRedeemAnswersTheSameRedemptionAndSandboxNeverCounts() async throws {
        let code = try await freePeriod(["maxRedemptions": 2, "productIds": []])
        let u = try user()
        let first = try await redeem(code, u)
        XCTAssertEqual(first.status, 201, first.text)
        let o = try first.json()
        XCTAssertEqual(o["status"] as? String, "granting")
        XCTAssertEqual(o["sandbox"] as? Bool, false)
        let second = try await redeem(code, u)
        XCTAssertEqual(second.status, 200)
        XCTAssertEqual(try second.json()["redemptionId"] as? String, o["redemptionId"] as? String)
        let sandbox = try await redeem(code, u, extra: ["environment": "sandbox"])
        XCTAssertEqual(sandbox.status, 201, "sandbox is separate from the live use")
        XCTAssertEqual(try sandbox.json()["sandbox"] as? Bool, true)
        for _ in 0..<3 {
            let s = try await redeem(code, try user(), extra: ["environment": "sandbox"])
            XCTAssertEqual(s.status, 201)
        }
        let c = try await coupon(code)
        XCTAssertEqual(c["remaining"] as? Int, 1, "only the live redemption counts")
        XCTAssertEqual(
            (c["reservedCount"] as? Int ?? 0) + (c["redeemedCount"] as? Int ?? 0), 1, "granting or already completed")
        let badEnv = try await redeem(code, u, extra: ["environment": "staging"])
        XCTAssertEqual(badEnv.errorField, "environment")
        let badPlatform = try await redeem(code, u, platform: "windows")
        XCTAssertEqual(badPlatform.errorField, "platform")
        // Owner and operators may read it; anyone else gets 404.
        let id = try XCTUnwrap(o["redemptionId"] as? String)
        let mine = try await client.get("/v1/redemptions/\(id)", token: u.token)
        XCTAssertEqual(mine.status, 200)
        let other = try await client.get("/v1/redemptions/\(id)", token: try user().token)
        XCTAssertEqual(other.status, 404)
        let op = try await client.get("/v1/redemptions/\(id)", token: admin)
        XCTAssertEqual(op.status, 200)
        let badWait = try await client.get("/v1/redemptions/\(id)?wait=soon", token: u.token)
        XCTAssertEqual(badWait.errorField, "wait")
        let list = try await client.get("/v1/me/redemptions", token: u.token)
        XCTAssertEqual((try list.json()["data"] as? [Any])?.count, 2)
    }

    func testTestModeCouponsAlwaysRedeemAsSandbox() async throws {
        let key = try await client.json(
            "POST", "/v1/api-keys", ["name": "test admin", "role": "admin", "mode": "test"], token: admin)
        let testKey = try XCTUnwrap(try key.json()["key"] as? String)
        let code = Self.code("TEST")
        let made = try await create(
            ["code": code, "kind": "freePeriod", "duration": ["unit": "week", "count": 1], "maxRedemptions": 1],
            token: testKey)
        XCTAssertEqual(try made.json()["mode"] as? String, "test")
        for _ in 0..<3 {
            let r = try await redeem(code, try user())
            XCTAssertEqual(r.status, 201)
            XCTAssertEqual(try r.json()["sandbox"] as? Bool, true)
        }
    }

    func testDiscountsNeedAProductConfirmOncePerTransactionAndExpire() async throws {
        let code = Self.code("DISC")
        let r = try await create([
            "code": code, "kind": "percentOff", "percentOff": 30, "productIds": ["pro.monthly", "pro.yearly"],
            "duration": ["unit": "month", "count": 1], "periodCount": 3, "platforms": ["android", "web"],
            "maxRedemptions": 10
        ])
        XCTAssertEqual(r.status, 201, r.text)
        let u = try user()
        let noProduct = try await redeem(code, u)
        XCTAssertEqual(noProduct.status, 422)
        XCTAssertEqual(noProduct.errorField, "productId")
        let wrongProduct = try await redeem(code, u, extra: ["productId": "other"])
        XCTAssertEqual(wrongProduct.errorCode, "notEligible")
        let reserved = try await redeem(code, u, extra: ["productId": "pro.yearly"])
        XCTAssertEqual(reserved.status, 201)
        XCTAssertEqual(try reserved.json()["status"] as? String, "reserved")
        let id = try XCTUnwrap(try reserved.json()["redemptionId"] as? String)
        let a2 =
            try await client.json(
                "POST", "/v1/api-keys", ["name": "bridge", "role": "support", "mode": "live"], token: admin
            ).json()["key"] as? String
        let support = try XCTUnwrap(a2)
        let txn = "GPA." + UUID().uuidString
        let paid = try await client.json(
            "POST", "/v1/redemptions/\(id)/purchase",
            ["pricePaid": ["amount": "34.99", "currency": "USD"], "storeTransactionId": txn], token: support)
        XCTAssertEqual(paid.status, 200, paid.text)
        XCTAssertEqual(try paid.json()["status"] as? String, "completed")
        XCTAssertEqual(try paid.decode(RedemptionBody.self).pricePaid?.amount, "34.99")
        let repeated = try await client.json(
            "POST", "/v1/redemptions/\(id)/purchase",
            ["pricePaid": ["amount": "34.99", "currency": "USD"], "storeTransactionId": txn], token: support)
        XCTAssertEqual(repeated.status, 200, "idempotent per storeTransactionId")
        let another = try await redeem(code, try user(), extra: ["productId": "pro.monthly"])
        let anotherId = try XCTUnwrap(try another.json()["redemptionId"] as? String)
        let reused = try await client.json(
            "POST", "/v1/redemptions/\(anotherId)/purchase",
            ["pricePaid": ["amount": "1.00", "currency": "USD"], "storeTransactionId": txn], token: support)
        XCTAssertEqual(reused.status, 409)
        XCTAssertEqual(reused.errorCode, "transactionInUse")
        let a3 =
            try await client.json(
                "POST", "/v1/api-keys", ["name": "ro", "role": "readonly", "mode": "live"], token: admin
            ).json()["key"] as? String
        let readonlyKey = try XCTUnwrap(a3)
        let ro = try await client.json(
            "POST", "/v1/redemptions/\(anotherId)/purchase",
            ["pricePaid": ["amount": "1.00", "currency": "USD"], "storeTransactionId": "x"], token: readonlyKey)
        XCTAssertEqual(ro.status, 403)
        // Not confirmed within the TTL (2 s here): released, and the use is given back.
        let a4 = try await coupon(code)["remaining"] as? Int
        XCTAssertEqual(a4, 8)
        let released = try await Self.stack.eventually(8) {
            try await self.client.get("/v1/redemptions/\(anotherId)", token: self.admin).json()["status"] as? String
                == "released"
        }
        XCTAssertTrue(released)
        let a5 = try await coupon(code)["remaining"] as? Int
        XCTAssertEqual(a5, 9)
        let late = try await client.json(
            "POST", "/v1/redemptions/\(anotherId)/purchase",
            ["pricePaid": ["amount": "1.00", "currency": "USD"], "storeTransactionId": "late-1"], token: support)
        XCTAssertEqual(late.errorCode, "invalidState")
        let free = try await freePeriod()
        let a6 = try await redeem(free, try user()).json()["redemptionId"] as? String
        let freeRedemption = try XCTUnwrap(a6)
        let notDiscount = try await client.json(
            "POST", "/v1/redemptions/\(freeRedemption)/purchase",
            ["pricePaid": ["amount": "1.00", "currency": "USD"], "storeTransactionId": "f-1"], token: support)
        XCTAssertEqual(notDiscount.errorCode, "invalidState")
    }

    func testPatchCannotLowerTheCapBelowUsesMade() async throws {
        let code = try await freePeriod(["maxRedemptions": 5])
        for _ in 0..<3 { _ = try await redeem(code, try user()) }
        let low = try await client.json("PATCH", "/v1/coupons/\(code)", ["maxRedemptions": 2], token: admin)
        XCTAssertEqual(low.status, 422)
        XCTAssertEqual(low.errorField, "maxRedemptions")
        let ok = try await client.json("PATCH", "/v1/coupons/\(code)", ["maxRedemptions": 3], token: admin)
        XCTAssertEqual(ok.status, 200)
        XCTAssertEqual(try ok.json()["remaining"] as? Int, 0)
        // A cap past what the column holds is the caller's mistake (422), as on create, not a 500.
        for tooLarge in [Coupons.largestCap + 1, Int(Int32.max) + 1, 2_305_843_009_213_693_951] {
            let r = try await client.json("PATCH", "/v1/coupons/\(code)", ["maxRedemptions": tooLarge], token: admin)
            XCTAssertEqual(r.status, 422, "\(tooLarge): \(r.text)")
            XCTAssertEqual(r.errorField, "maxRedemptions")
        }
        let largest = try await client.json(
            "PATCH", "/v1/coupons/\(code)", ["maxRedemptions": Coupons.largestCap], token: admin)
        XCTAssertEqual(try largest.json()["maxRedemptions"] as? Int, Coupons.largestCap, largest.text)
        let missing = try await client.json("PATCH", "/v1/coupons/NOPE-NOPE", ["active": false], token: admin)
        XCTAssertEqual(missing.status, 404)
    }

    func testPatchWithNullRemovesTheCapOrTheEndButNotWhereTheStoreNeedsThem() async throws {
        let expires = Timestamp.iso8601(Date().addingTimeInterval(30 * 86_400))
        let code = try await freePeriod(["maxRedemptions": 5, "expiresAt": expires])
        let kept = try await client.json("PATCH", "/v1/coupons/\(code)", ["active": true], token: admin).json()
        XCTAssertEqual(kept["maxRedemptions"] as? Int, 5, "a field left out stays")
        let removed = try await client.json(
            "PATCH", "/v1/coupons/\(code)", ["maxRedemptions": NSNull(), "expiresAt": NSNull()], token: admin)
        XCTAssertEqual(removed.status, 200, removed.text)
        let view = try removed.json()
        XCTAssertNil(view["maxRedemptions"] as? Int)
        XCTAssertNil(view["expiresAt"] as? String)
        XCTAssertNil(view["remaining"] as? Int, "no cap, nothing to count down")
        let nullActive = try await client.json("PATCH", "/v1/coupons/\(code)", ["active": NSNull()], token: admin)
        XCTAssertEqual(nullActive.status, 422)
        XCTAssertEqual(nullActive.errorField, "active")
        // An iOS discount must keep both (store limits).
        let ios = try await client.json(
            "POST", "/v1/coupons",
            [
                "code": "IOSNULL-" + UUID().uuidString.prefix(6).uppercased(), "kind": "percentOff", "percentOff": 20,
                "productIds": ["pro-null"], "duration": ["unit": "month", "count": 1], "periodCount": 1,
                "platforms": ["ios"], "maxRedemptions": 100, "expiresAt": expires
            ], token: admin)
        XCTAssertEqual(ios.status, 201, ios.text)
        let iosCode = try XCTUnwrap(try ios.json()["code"] as? String)
        let refused = try await client.json(
            "PATCH", "/v1/coupons/\(iosCode)", ["maxRedemptions": NSNull()], token: admin)
        XCTAssertEqual(refused.errorCode, "storeLimit")
        let after = try await client.get("/v1/coupons/\(iosCode)", token: admin).json()
        XCTAssertEqual(after["maxRedemptions"] as? Int, 100, "nothing changed")
    }

    // MARK: - Races

    func race(
        _ code: String, users: [TokenMinter.User], via client: HTTPClient
    ) async throws -> [(Int, String?, String?)] {
        try await withThrowingTaskGroup(of: (Int, String?, String?).self) { group in
            for u in users {
                group.addTask {
                    let r = try await client.json(
                        "POST", "/v1/redemptions", ["code": code, "platform": "web"], token: u.token)
                    return (r.status, r.errorCode, (try? r.json())?["redemptionId"] as? String)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    func testFiveHundredAccountsRacingForACapOfOneHundred() async throws {
        let code = try await freePeriod(["maxRedemptions": 100])
        let users = try (0..<500).map { _ in try user() }
        let results = try await race(code, users: users, via: client)
        XCTAssertEqual(results.filter { $0.0 == 201 }.count, 100)
        XCTAssertEqual(results.filter { $0.1 == "exhausted" }.count, 400)
        let c = try await coupon(code)
        XCTAssertEqual(c["remaining"] as? Int, 0)
        XCTAssertEqual((c["reservedCount"] as? Int ?? 0) + (c["redeemedCount"] as? Int ?? 0), 100)
    }

    func testTwoThousandRedeemersOfACapOfOneThousandThroughTheCoalescedPath() async throws {
        let code = try await freePeriod(["maxRedemptions": 1000])
        let users = try (0..<2000).map { _ in try user() }
        let results = try await race(code, users: users, via: client)
        XCTAssertEqual(results.filter { $0.0 == 201 }.count, 1000)
        XCTAssertEqual(results.filter { $0.1 == "exhausted" }.count, 1000)
        XCTAssertEqual(Set(results.compactMap(\.2)).count, 1000, "a distinct redemption per winner")
        let db = try PGConnection(url: try Self.stack.adminDatabaseURL())
        let count = try db.query("SELECT count(*) AS n FROM coupons.redemptions WHERE code = $1", [code]).first!.decode(
            "n", as: Int.self)
        XCTAssertEqual(count, 1000)
        // Requests really were committed together.
        let (reservations, batches) = try await batchSizes("redeem_reservation_batch_size")
        XCTAssertGreaterThan(reservations / max(batches, 1), 1.5, "\(reservations) requests in \(batches) batches")
    }

    /// (requests, batches) so far of a batch-size histogram of the coupons service.
    func batchSizes(_ histogram: String) async throws -> (Double, Double) {
        let port = try Self.stack.wiring()["REDEEM_COUPONS_HTTP_PORT"]!
        let metrics = try await HTTPClient(base: URL(string: "http://127.0.0.1:\(port)")!).get("/metrics").text
        func value(_ name: String) -> Double {
            metrics.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap {
                Double($0.split(separator: " ").last!)
            } ?? 0
        }
        return (value(histogram + "_sum"), value(histogram + "_count"))
    }

    /// Concurrent validations of a code share one query (read coalescing); each account still gets
    /// its own answer: holders of a redemption `alreadyRedeemed`, veterans `notEligible` for a
    /// new-customers coupon, everyone else valid.
    func testConcurrentValidationsShareQueriesAndEachAccountKeepsItsAnswer() async throws {
        let open = try await freePeriod(), newOnly = try await freePeriod(["newCustomersOnly": true])
        let holders = try (0..<10).map { _ in try user() }, others = try (0..<10).map { _ in try user() }
        let db = try PGConnection(url: try Self.stack.adminDatabaseURL())
        for u in holders {
            let r = try await redeem(open, u)
            XCTAssertEqual(r.status, 201, r.text)
            let id = try XCTUnwrap(UUID(uuidString: try XCTUnwrap(try r.json()["redemptionId"] as? String)))
            try db.query("UPDATE coupons.redemptions SET status = 'completed' WHERE id = $1", [id])
        }
        let (before, batchesBefore) = try await batchSizes("redeem_validation_batch_size")
        let answers = try await withThrowingTaskGroup(of: (Bool, String, String?).self) { group in
            for _ in 0..<4 {
                for (holder, u) in holders.map({ (true, $0) }) + others.map({ (false, $0) }) {
                    for code in [open, newOnly] {
                        group.addTask { [client] in
                            let r = try await client.json(
                                "POST", "/v1/coupons/validate", ["code": code, "platform": "web"], token: u.token)
                            XCTAssertEqual(r.status, 200, r.text)
                            let v = try r.json()
                            return (holder, code, (v["valid"] as? Bool) == true ? nil : (v["reason"] as? String ?? "?"))
                        }
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        XCTAssertEqual(answers.count, 160)
        for (holder, code, reason) in answers {
            let expected = holder ? (code == open ? "alreadyRedeemed" : "notEligible") : nil
            XCTAssertEqual(reason, expected, "holder \(holder), \(code == open ? "open" : "new customers only")")
        }
        let (after, batchesAfter) = try await batchSizes("redeem_validation_batch_size")
        XCTAssertEqual(after - before, 160, "every validation went through the coalescer")
        // Without coalescing there is one query per validation.
        XCTAssertLessThan(
            batchesAfter - batchesBefore, after - before,
            "\(after - before) validations in \(batchesAfter - batchesBefore) queries")
    }

    /// The gateway sends one code's validations together; any caller may mix codes in one
    /// message, and each answer comes back in its item's place.
    func testValidationsOfSeveralCodesInOneMessageAnswerInOrder() async throws {
        let open = try await freePeriod(), newOnly = try await freePeriod(["newCustomersOnly": true])
        let holder = try user(), other = try user()
        let r = try await redeem(open, holder)
        XCTAssertEqual(r.status, 201, r.text)
        let id = try XCTUnwrap(UUID(uuidString: try XCTUnwrap(try r.json()["redemptionId"] as? String)))
        try PGConnection(url: try Self.stack.adminDatabaseURL()).query(
            "UPDATE coupons.redemptions SET status = 'completed' WHERE id = $1", [id])
        let bus = try Self.stack.busNode()
        defer { bus.stop() }
        let coupons = try BusClient(
            bus: bus, service: "coupons", connect: [try Self.stack.wiring()["REDEEM_COUPONS_BUS"]!])
        defer { coupons.stop() }
        let asked: [(TokenMinter.User, String, RefusalReason?)] = [
            (holder, open, .alreadyRedeemed), (other, open, nil), (holder, newOnly, .notEligible),
            (other, "NO-SUCH-CODE", .notFound), (other, newOnly.lowercased(), nil), (holder, open, .alreadyRedeemed)
        ]
        let results = await coupons.requestBatch(
            asked.map { Coupons.Validate(accountId: $0.0.accountId, code: $0.1, platform: .web) },
            as: Coupons.ValidateMany.self)
        XCTAssertEqual(try results.map { try $0.get().reason }, asked.map(\.2))
        XCTAssertEqual(try results.map { try $0.get().answer.decoded().valid }, asked.map { $0.2 == nil })
    }

    /// Reservations in one message fail or succeed each on its own, in their items' places.
    func testReservationsInOneMessageAnswerEachInItsPlace() async throws {
        let free = try await freePeriod(), discount = Self.code("DISC")
        let made = try await create([
            "code": discount, "kind": "percentOff", "percentOff": 30, "productIds": ["pro.monthly", "pro.yearly"],
            "duration": ["unit": "month", "count": 1], "periodCount": 3, "platforms": ["web"]
        ])
        XCTAssertEqual(made.status, 201, made.text)
        let a = try user(), b = try user(), c = try user()
        func ask(_ u: TokenMinter.User, _ code: String) -> Coupons.Redeem {
            Coupons.Redeem(
                accountId: u.accountId, appUserId: u.appUserId, code: code, productId: nil, platform: .web,
                sandbox: false)
        }
        let bus = try Self.stack.busNode()
        defer { bus.stop() }
        let coupons = try BusClient(
            bus: bus, service: "coupons", connect: [try Self.stack.wiring()["REDEEM_COUPONS_BUS"]!])
        defer { coupons.stop() }
        // (A platform the contract does not know can no longer be put in a message: `Platform` is closed.)
        let results = await coupons.requestBatch(
            [
                ask(a, free), ask(b, discount), ask(c, "NO-SUCH-CODE"),
                ask(a, free.lowercased()), ask(c, free)
            ], as: Coupons.RedeemMany.self)
        XCTAssertEqual(results.count, 5)
        let first = try results[0].get(), twin = try results[3].get(), third = try results[4].get()
        XCTAssertTrue(first.created)
        XCTAssertFalse(twin.created, "the same account and coupon twice in one message: one redemption")
        XCTAssertEqual(try twin.redemption?.decoded().redemptionId, try first.redemption?.decoded().redemptionId)
        XCTAssertTrue(third.created)
        XCTAssertThrowsError(try results[1].get()) { XCTAssertEqual(($0 as? ServiceError)?.field, "productId") }
        XCTAssertEqual(try results[2].get().refusal, .notFound)
    }

    /// A single `coupons.redeem` (what a gateway sends while coupons refuses batches, or an earlier
    /// gateway) goes the way a batch does, as a batch of one: the same answers, and the grant is
    /// made.
    func testASingleReservationMessageIsABatchOfOne() async throws {
        let free = try await freePeriod(["maxRedemptions": 1]), discount = Self.code("DISC")
        let made = try await create([
            "code": discount, "kind": "percentOff", "percentOff": 30, "productIds": ["pro.monthly", "pro.yearly"],
            "duration": ["unit": "month", "count": 1], "periodCount": 3, "platforms": ["web"]
        ])
        XCTAssertEqual(made.status, 201, made.text)
        let a = try user(), b = try user()
        func ask(_ u: TokenMinter.User, _ code: String) -> Coupons.Redeem {
            Coupons.Redeem(
                accountId: u.accountId, appUserId: u.appUserId, code: code, productId: nil, platform: .web,
                sandbox: false)
        }
        let bus = try Self.stack.busNode()
        defer { bus.stop() }
        let coupons = try BusClient(
            bus: bus, service: "coupons", connect: [try Self.stack.wiring()["REDEEM_COUPONS_BUS"]!])
        defer { coupons.stop() }
        let first = try await coupons.request(ask(a, free))
        XCTAssertTrue(first.created)
        let id = try XCTUnwrap(try first.redemption?.decoded().redemptionId)
        let again = try await coupons.request(ask(a, free.lowercased()))
        XCTAssertFalse(again.created)
        XCTAssertEqual(try again.redemption?.decoded().redemptionId, id)
        let exhausted = try await coupons.request(ask(b, free)),
            unknown = try await coupons.request(ask(b, "NO-SUCH-CODE"))
        XCTAssertEqual(exhausted.refusal, .exhausted)
        XCTAssertEqual(unknown.refusal, .notFound)
        do {
            _ = try await coupons.request(ask(b, discount))
            XCTFail("a discount of several products needs one named")
        } catch let e as ServiceError {
            XCTAssertEqual(e.field, "productId")
        }
        let done = try await client.get("/v1/redemptions/\(id.uuidString.lowercased())?wait=10", token: a.token).json()
        XCTAssertEqual(done["status"] as? String, "completed", "\(done)")
    }

    func testOneAccountFiringFiftyRedeemsGetsOneRedemption() async throws {
        let code = try await freePeriod(["maxRedemptions": 10])
        let u = try user()
        let results = try await race(code, users: Array(repeating: u, count: 50), via: client)
        XCTAssertEqual(results.filter { $0.0 == 201 }.count, 1, "\(results.map(\.0))")
        XCTAssertEqual(results.filter { $0.0 == 200 }.count, 49)
        XCTAssertEqual(Set(results.compactMap(\.2)).count, 1, "every answer names the same redemption")
        let a7 = try await coupon(code)["remaining"] as? Int
        XCTAssertEqual(a7, 9)
    }

    /// An uncapped coupon's batches plan without the coupon's lock: the account's other requests,
    /// in the other lane's batch, meet its use on the one-use index and are answered it.
    func testOneAccountFiringFiftyRedeemsOfAnUncappedCouponGetsOneRedemption() async throws {
        let code = try await freePeriod([:])
        let u = try user()
        let results = try await race(code, users: Array(repeating: u, count: 50), via: client)
        XCTAssertEqual(results.filter { $0.0 == 201 }.count, 1, "\(results.map(\.0))")
        XCTAssertEqual(results.filter { $0.0 == 200 }.count, 49)
        XCTAssertEqual(Set(results.compactMap(\.2)).count, 1, "every answer names the same redemption")
    }

    func testTheRacesHoldWithTwoCouponsInstances() async throws {
        let wiring = try Self.stack.wiring()
        let secondBus = "tcp://127.0.0.1:\(try Project.freePort())"
        try Self.stack.startService(
            "coupons",
            overrides: [
                "REDEEM_COUPONS_BUS_BIND": secondBus, "REDEEM_COUPONS_HTTP_PORT": String(try Project.freePort())
            ])
        let port = try Project.freePort(), ops = try Project.freePort()
        try Self.stack.startService(
            "gateway",
            overrides: [
                "REDEEM_HTTP_PORT": String(port), "REDEEM_GATEWAY_HTTP_PORT": String(ops),
                "REDEEM_COUPONS_BUS": wiring["REDEEM_COUPONS_BUS"]! + "," + secondBus
            ])
        let gateway = HTTPClient(base: URL(string: "http://127.0.0.1:\(port)")!, maxConnections: 128)
        let gatewayOps = HTTPClient(base: URL(string: "http://127.0.0.1:\(ops)")!)
        let ready = try await Self.stack.eventually(20) { try await gatewayOps.get("/backends").status == 200 }
        XCTAssertTrue(ready)
        let code = try await freePeriod(["maxRedemptions": 100])
        let results = try await race(code, users: try (0..<300).map { _ in try user() }, via: gateway)
        XCTAssertEqual(results.filter { $0.0 == 201 }.count, 100)
        XCTAssertEqual(results.filter { $0.1 == "exhausted" }.count, 200)
        let single = try await freePeriod(["maxRedemptions": 10])
        let u = try user()
        let same = try await race(single, users: Array(repeating: u, count: 50), via: gateway)
        XCTAssertEqual(Set(same.compactMap(\.2)).count, 1)
        XCTAssertEqual(same.filter { $0.0 == 201 }.count, 1)
        // Without a cap, each instance's batches plan without the coupon's lock.
        let open = try await freePeriod([:])
        let v = try user()
        let twins = try await race(open, users: Array(repeating: v, count: 50), via: gateway)
        XCTAssertEqual(Set(twins.compactMap(\.2)).count, 1, "\(twins.map(\.0))")
        XCTAssertEqual(twins.filter { $0.0 == 201 }.count, 1)
        XCTAssertEqual(twins.filter { $0.0 == 200 }.count, 49)
        let many = try await race(open, users: try (0..<200).map { _ in try user() }, via: gateway)
        XCTAssertEqual(many.filter { $0.0 == 201 }.count, 200)
        // Both instances took part (their logs name the redemptions they made).
        let db = try PGConnection(url: try Self.stack.adminDatabaseURL())
        let used = try db.query("SELECT used_count FROM coupons.coupons WHERE code = $1", [code]).first!.decode(
            "used_count", as: Int.self)
        XCTAssertEqual(used, 100)
        let openUsed = try db.query("SELECT used_count FROM coupons.coupons WHERE code = $1", [open]).first!.decode(
            "used_count", as: Int.self)
        XCTAssertEqual(openUsed, 201, "one use for the account that raced itself, one for each of the others")
    }

    // MARK: - Export

    func testACouponCreatedDeactivatedRefusesAndCodesAreTrimmed() async throws {
        let code = "OFF-" + UUID().uuidString.prefix(8).uppercased()
        let body: [String: Any] = [
            "code": code, "kind": "freePeriod", "duration": ["unit": "day", "count": 1], "active": false
        ]
        let created = try await client.json("POST", "/v1/coupons", body, token: admin)
        XCTAssertEqual(created.status, 201, created.text)
        XCTAssertEqual(try created.json()["active"] as? Bool, false)
        var wrong = body
        wrong["code"] = code + "-B"
        wrong["active"] = "no"
        let refused = try await client.json("POST", "/v1/coupons", wrong, token: admin)
        XCTAssertEqual(refused.status, 422, refused.text)
        XCTAssertEqual(refused.errorField, "active")
        let u = try Self.minter.user()
        for typed in [code, " \(code.lowercased())\n"] {
            let v = try await client.json("POST", "/v1/coupons/validate", ["code": typed], token: u.token)
            XCTAssertEqual(
                try v.json()["reason"] as? String, "inactive",
                "\(typed.debugDescription): white space and case do not matter")
        }
    }

    func testImpossibleTimesAndNulCharactersAre422AndNothingIsStored() async throws {
        let code = "BAD-" + UUID().uuidString.prefix(8).uppercased()
        let base: [String: Any] = ["code": code, "kind": "freePeriod", "duration": ["unit": "day", "count": 1]]
        for (field, value) in [
            ("expiresAt", "2027-02-30T00:00:00Z"), ("expiresAt", "294277-01-01T00:00:00Z"),
            ("startsAt", "2027-01-01T25:00:00Z")
        ] {
            var body = base
            body[field] = value
            for path in ["/v1/coupons", "/v1/coupons?dryRun=true"] {
                let r = try await client.json("POST", path, body, token: admin)
                XCTAssertEqual(r.status, 422, "\(path) \(field)=\(value): \(r.text)")
                XCTAssertEqual(r.errorField, field)
            }
        }
        var nul = base
        nul["productIds"] = ["p1\u{0}zz"]
        let r = try await client.json("POST", "/v1/coupons", nul, token: admin)
        XCTAssertEqual(r.status, 422, r.text)
        XCTAssertEqual(r.errorField, "productIds[0]")
        let stored = try await client.get("/v1/coupons/\(code)", token: admin)
        XCTAssertEqual(stored.status, 404, "nothing was created")
    }

    func testCSVExportStreamsTenThousandRowsThatParseBack() async throws {
        let code = try await freePeriod()
        // Rows whose values need quoting or neutralising, made through the API…
        let tricky = [("=HYPERLINK(\"x\")", "a,b"), ("+1", "quote\"d"), ("-2", "line\nbreak"), ("@me", "plain")]
        for (app, product) in tricky {
            let u = try Self.minter.user(appUserId: app)
            let r = try await redeem(code, u, extra: ["productId": product])
            XCTAssertEqual(r.status, 201, r.text)
        }
        // …and 10,000 more written straight into the schema (setup, not the behaviour under test).
        let db = try PGConnection(url: try Self.stack.adminDatabaseURL())
        try db.query(
            """
            INSERT INTO coupons.redemptions (id, coupon_id, code, account_id, app_user_id, platform, product_id, sandbox, status, reserved_at)
            SELECT gen_random_uuid(), c.id, c.code, gen_random_uuid(), 'user-' || g, 'ios', NULL, g % 7 = 0, 'completed',
                   now() - (g || ' milliseconds')::interval
            FROM coupons.coupons c, generate_series(1, 10000) g WHERE c.code = $1
            """, [code])
        let resp = try await client.send(
            "GET", "/v1/coupons/\(code)/redemptions",
            headers: ["Authorization": "Bearer \(admin)", "Accept": "text/csv"])
        XCTAssertEqual(resp.status, 200)
        XCTAssertEqual(resp.header("Content-Type"), "text/csv; charset=utf-8")
        XCTAssertNil(resp.header("Content-Length"), "streamed in chunks, not buffered whole")
        // Parsed with Python's csv module, an independent RFC 4180 reader.
        let dir = try Project.temporaryDirectory("csv")
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("export.csv")
        try resp.body.write(to: file)
        let json = try Subprocess.run(
            "/usr/bin/python3",
            [
                "-c",
                """
                import csv, json, sys
                with open(sys.argv[1], newline='') as f:
                    rows = list(csv.DictReader(f))
                print(json.dumps({"count": len(rows), "columns": list(rows[0].keys()), "apps": [r["appUserId"] for r in rows],
                                  "products": [r["productId"] for r in rows], "sandbox": sorted(set(r["sandbox"] for r in rows)),
                                  "ids": [r["redemptionId"] for r in rows]}))
                """, file.path
            ])
        struct Parsed: Decodable {
            let count: Int
            let columns, apps, products, sandbox, ids: [String]
        }
        let parsed = try JSONDecoder().decode(Parsed.self, from: Data(json.utf8))
        XCTAssertEqual(parsed.count, 10_004)
        XCTAssertEqual(
            parsed.columns,
            [
                "redemptionId", "code", "accountId", "appUserId", "platform", "productId", "pricePaid",
                "currency", "status", "sandbox", "reservedAt", "completedAt", "uniqueCodeLast4", "couponName",
                "couponMetadata"
            ])
        let apps = parsed.apps, products = parsed.products
        for (app, product) in tricky {
            XCTAssertTrue(apps.contains("'" + app), "formula-like \(app) neutralised")
            XCTAssertTrue(products.contains(product), "\(product.debugDescription) round-trips")
        }
        XCTAssertEqual(parsed.sandbox, ["false", "true"])
        // The same rows as the JSON pages, with ids written the same way (joinable as text).
        var jsonIds: [String] = []
        var cursor: String?
        repeat {
            let page = try await client.get(
                "/v1/coupons/\(code)/redemptions?limit=100" + (cursor.map { "&cursor=\($0)" } ?? ""), token: admin
            )
            .decode(ListBody<RedemptionBody>.self)
            jsonIds += page.data.map(\.redemptionId)
            cursor = page.nextCursor
        } while cursor != nil
        XCTAssertEqual(jsonIds.count, 10_004)
        XCTAssertEqual(Set(jsonIds), Set(parsed.ids))
        let unknown = try await client.send(
            "GET", "/v1/coupons/NOPE-NOPE/redemptions",
            headers: ["Authorization": "Bearer \(admin)", "Accept": "text/csv"])
        XCTAssertEqual(unknown.status, 404)
    }
}
