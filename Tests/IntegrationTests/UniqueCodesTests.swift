import Core
import Cryptography
import Database
import Foundation
import TestSupport
import XCTest

/// Unique single-use codes through the gateway (`POST /v1/coupons/{code}/codes`): made by the
/// hundred thousand, stored hashed, their CSV downloaded once then 410, redeemed wherever a code
/// is, used once under any concurrency, freed by a release, reported by their last four
/// characters, offered over MCP without a code reaching the answer, and kept apart by mode.
final class UniqueCodesTests: StackTestCase {
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
    func user() throws -> TokenMinter.User { try Self.minter.user() }
    func db() throws -> PGConnection { try PGConnection(url: try Self.stack.adminDatabaseURL()) }

    static func code(_ prefix: String = "U") -> String { prefix + "-" + UUID().uuidString.prefix(8).uppercased() }

    /// A coupon made with `key` (the admin key by default); answers its code.
    func coupon(_ extra: [String: Any] = [:], key: String? = nil) async throws -> String {
        let code = Self.code("GIFTS")
        var body: [String: Any] = ["code": code, "kind": "freePeriod", "duration": ["unit": "month", "count": 1]]
        for (k, v) in extra { body[k] = v }
        let r = try await client.json("POST", "/v1/coupons", body, token: key ?? admin)
        XCTAssertEqual(r.status, 201, r.text)
        return code
    }

    struct Made: Decodable {
        let code: String
        let count: Int
        let prefix: String?
        let csvUrl: String
        let downloadUrl: String
        let expiresAt: String
    }

    func makeCodes(_ coupon: String, count: Int, prefix: String? = nil, key: String? = nil) async throws -> Made {
        var body: [String: Any] = ["count": count]
        if let prefix { body["prefix"] = prefix }
        let r = try await client.json("POST", "/v1/coupons/\(coupon)/codes", body, token: key ?? admin)
        XCTAssertEqual(r.status, 201, r.text)
        return try r.decode(Made.self)
    }

    /// The codes of a CSV (after its `code` header).
    static func codes(_ csv: String) -> [String] {
        let lines = csv.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.first, "code")
        return Array(lines.dropFirst())
    }

    /// Makes `count` codes of `coupon` and downloads them with the key.
    func madeAndTaken(_ coupon: String, count: Int, prefix: String? = nil, key: String? = nil) async throws -> [String]
    {
        _ = try await makeCodes(coupon, count: count, prefix: prefix, key: key)
        let csv = try await client.get("/v1/coupons/\(coupon)/codes.csv", token: key ?? admin)
        XCTAssertEqual(csv.status, 200, csv.text)
        return Self.codes(csv.text)
    }

    func redeem(_ code: String, _ u: TokenMinter.User, environment: String? = nil) async throws -> HTTPClient.Response {
        var body: [String: Any] = ["code": code, "platform": "web"]
        if let environment { body["environment"] = environment }
        return try await client.json("POST", "/v1/redemptions", body, token: u.token)
    }

    func validate(_ code: String, _ u: TokenMinter.User) async throws -> [String: Any] {
        let r = try await client.json("POST", "/v1/coupons/validate", ["code": code, "platform": "web"], token: u.token)
        XCTAssertEqual(r.status, 200, r.text)
        return try r.json()
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

    // MARK: - Creation and the CSV

    func testCodesAreMadeUniqueWellFormedAndStoredOnlyAsHashes() async throws {
        let coupon = try await coupon(["maxRedemptions": 1000])
        let made = try await makeCodes(coupon, count: 500, prefix: "gift")
        XCTAssertEqual(made.count, 500)
        XCTAssertEqual(made.prefix, "GIFT")
        XCTAssertTrue(made.csvUrl.hasSuffix("/v1/coupons/\(coupon)/codes.csv"), made.csvUrl)
        XCTAssertTrue(made.downloadUrl.contains("/v1/code-downloads/"), made.downloadUrl)

        // Before the download, the CSV waits sealed: no code in the clear anywhere in the schema.
        let db = try db()
        let sealed = try db.query(
            "SELECT e.sealed_csv FROM coupons.code_exports e JOIN coupons.coupons c ON c.id = e.coupon_id WHERE c.code = $1",
            [coupon]
        ).rows.map { try $0.decode("sealed_csv", as: String.self) }
        XCTAssertEqual(sealed.count, 1)

        let taken = try await client.get("/v1/coupons/\(coupon.lowercased())/codes.csv", token: admin)
        XCTAssertEqual(taken.status, 200, taken.text)
        XCTAssertEqual(taken.header("Content-Type"), "text/csv; charset=utf-8")
        XCTAssertEqual(taken.header("Cache-Control"), "no-store", "no cache keeps the codes")
        let codes = Self.codes(taken.text)
        XCTAssertEqual(codes.count, 500)
        XCTAssertEqual(Set(codes).count, 500, "unique")
        for code in codes {
            XCTAssertTrue(code.hasPrefix("GIFT-"), code)
            XCTAssertEqual(code.count, 24, code)
            XCTAssertEqual(UniqueCode.read(code), .unique(code), code)
        }
        let opened = sealed[0]
        XCTAssertFalse(codes.contains { opened.contains($0) }, "the waiting CSV is sealed")
        XCTAssertFalse(made.downloadUrl.contains(codes[0]))

        // Once, then 410 with a machine code, by either address.
        let again = try await client.get("/v1/coupons/\(coupon)/codes.csv", token: admin)
        XCTAssertEqual(again.status, 410)
        XCTAssertEqual(again.errorCode, "downloadGone")
        let byToken = try await client.get(URL(string: made.downloadUrl)!.path)
        XCTAssertEqual(byToken.status, 410)
        XCTAssertEqual(byToken.errorCode, "downloadGone")

        // Stored: 500 SHA-256 hashes and last four characters; the export is gone; nothing holds a code.
        let rows = try db.query(
            """
            SELECT count(*) AS n, count(DISTINCT u.code_hash) AS hashes FROM coupons.unique_codes u
            JOIN coupons.coupons c ON c.id = u.coupon_id WHERE c.code = $1
            """, [coupon]
        ).first!
        XCTAssertEqual(try rows.decode("n", as: Int.self), 500)
        XCTAssertEqual(try rows.decode("hashes", as: Int.self), 500)
        for code in codes.prefix(20) {
            let hit = try db.query(
                "SELECT last4 FROM coupons.unique_codes WHERE code_hash = $1",
                [PGBytes(Data(Crypto.sha256(Array(code.utf8))))]
            ).first
            XCTAssertEqual(try hit?.decode("last4", as: String.self), String(code.suffix(4)))
        }
        let exports = try db.query(
            "SELECT count(*) AS n FROM coupons.code_exports e JOIN coupons.coupons c ON c.id = e.coupon_id WHERE c.code = $1",
            [coupon]
        ).first!.decode("n", as: Int.self)
        XCTAssertEqual(exports, 0, "deleted at download")
        let dump = try db.query(
            """
            SELECT coalesce(string_agg(t::text, ' '), '') AS all_text FROM (
                SELECT u::text AS t FROM coupons.unique_codes u JOIN coupons.coupons c ON c.id = u.coupon_id WHERE c.code = $1
                UNION ALL SELECT a::text FROM coupons.audit_log a
                UNION ALL SELECT c::text FROM coupons.coupons c WHERE c.code = $1) x
            """, [coupon]
        ).first!.decode("all_text", as: String.self)
        for code in codes { XCTAssertFalse(dump.contains(code), "plain code in the database") }
    }

    func testBadRequestsAreRefusedNamingTheFieldAndWriteNothing() async throws {
        let coupon = try await coupon()
        for (body, field) in [
            (["count": 0] as [String: Any], "count"), (["count": 100_001], "count"), ([:], "count"),
            (["count": 5, "prefix": "GIFT-1"], "prefix"), (["count": 5, "prefix": "ABCDEFGHIJKLM"], "prefix")
        ] {
            let r = try await client.json("POST", "/v1/coupons/\(coupon)/codes", body, token: admin)
            XCTAssertEqual(r.status, 422, "\(body): \(r.text)")
            XCTAssertEqual(r.errorField, field, "\(body)")
        }
        let missing = try await client.json("POST", "/v1/coupons/NO-SUCH-COUPON/codes", ["count": 5], token: admin)
        XCTAssertEqual(missing.status, 404)
        let noCSV = try await client.get("/v1/coupons/\(coupon)/codes.csv", token: admin)
        XCTAssertEqual(noCSV.status, 410, "nothing was made")
        let forgedToken = try await client.get("/v1/code-downloads/" + String(repeating: "A", count: 43))
        XCTAssertEqual(forgedToken.status, 410)
        let readonly = try await client.json(
            "POST", "/v1/api-keys", ["name": "ro", "role": "readonly", "mode": "live"], token: admin)
        let roKey = try XCTUnwrap(try readonly.json()["key"] as? String)
        let forbidden = try await client.json("POST", "/v1/coupons/\(coupon)/codes", ["count": 5], token: roKey)
        XCTAssertEqual(forbidden.status, 403)
        let roCSV = try await client.get("/v1/coupons/\(coupon)/codes.csv", token: roKey)
        XCTAssertEqual(roCSV.status, 403, "codes are an admin's")
        // A coupon's own code may not look like a unique code.
        let lookalike = try await client.json(
            "POST", "/v1/coupons",
            ["code": "ABCD-EFGH-JKLM-NPQR", "kind": "freePeriod", "duration": ["unit": "day", "count": 1]], token: admin
        )
        XCTAssertEqual(lookalike.status, 422)
        XCTAssertEqual(lookalike.errorField, "code")
        let count = try db().query(
            "SELECT count(*) AS n FROM coupons.unique_codes u JOIN coupons.coupons c ON c.id = u.coupon_id WHERE c.code = $1",
            [coupon]
        ).first!.decode("n", as: Int.self)
        XCTAssertEqual(count, 0)
    }

    /// The figure is in the commit and docs/performance.md; the test holds what was made.
    func testOneHundredThousandCodesInOneCreation() async throws {
        let coupon = try await coupon()
        let started = Date()
        let made = try await makeCodes(coupon, count: 100_000, prefix: "BIG")
        let createSeconds = Date().timeIntervalSince(started)
        XCTAssertEqual(made.count, 100_000)
        let downloadStarted = Date()
        let csv = try await client.get(URL(string: made.downloadUrl)!.path)
        let downloadSeconds = Date().timeIntervalSince(downloadStarted)
        XCTAssertEqual(csv.status, 200)
        XCTAssertEqual(csv.header("Content-Disposition"), "attachment; filename=\"codes-\(coupon).csv\"")
        let codes = Self.codes(csv.text)
        XCTAssertEqual(codes.count, 100_000)
        XCTAssertEqual(Set(codes).count, 100_000)
        print(
            "unique codes: 100000 made in \(String(format: "%.2f", createSeconds)) s, CSV of \(csv.body.count) bytes taken in \(String(format: "%.2f", downloadSeconds)) s"
        )
        let n = try db().query(
            "SELECT count(*) AS n FROM coupons.unique_codes u JOIN coupons.coupons c ON c.id = u.coupon_id WHERE c.code = $1",
            [coupon]
        ).first!.decode("n", as: Int.self)
        XCTAssertEqual(n, 100_000, "one transaction wrote them all")
        // The database's share: the same 100,000 rows written by one statement, then rolled back.
        struct Rollback: Error {}
        let sqlStarted = Date()
        do {
            try db().transaction { tx in
                try tx.query(
                    """
                    INSERT INTO coupons.unique_codes (coupon_id, code_hash, last4, export_id)
                    SELECT c.id, sha256(convert_to(g::text || $2, 'UTF8')), 'ABCD', c.id
                    FROM coupons.coupons c, generate_series(1, 100000) g WHERE c.code = $1 AND c.mode = 'live'
                    """, [coupon, UUID().uuidString])
                throw Rollback()
            }
        } catch is Rollback {}
        print(
            "unique codes: the insert of 100000 rows alone takes \(String(format: "%.2f", Date().timeIntervalSince(sqlStarted))) s"
        )
    }

    // MARK: - Validate and redeem

    func testValidateAndRedeemByUniqueCodeOnceEachUnderTheCouponsCap() async throws {
        let coupon = try await coupon(["maxRedemptions": 2])
        let codes = try await madeAndTaken(coupon, count: 3)
        let a = try user(), b = try user(), c = try user(), d = try user()

        let valid = try await validate(codes[0].lowercased(), a)
        XCTAssertEqual(valid["valid"] as? Bool, true, "\(valid)")
        XCTAssertEqual((valid["coupon"] as? [String: Any])?["code"] as? String, coupon)
        let first = try await redeem(" " + codes[0].lowercased(), a)
        XCTAssertEqual(first.status, 201, first.text)
        let redemption = try first.json()
        XCTAssertEqual(redemption["code"] as? String, coupon, "the coupon's code, not the unique one")
        XCTAssertEqual(redemption["uniqueCodeLast4"] as? String, String(codes[0].suffix(4)))
        let id = try XCTUnwrap(redemption["redemptionId"] as? String)
        let retry = try await redeem(codes[0], a)
        XCTAssertEqual(retry.status, 200, "a retry gets the same redemption")
        XCTAssertEqual(try retry.json()["redemptionId"] as? String, id)

        // Used: refused to anyone else, with its own reason.
        let used = try await redeem(codes[0], b)
        XCTAssertEqual(used.status, 422)
        XCTAssertEqual(used.errorCode, "codeUsed")
        let usedValidate = try await validate(codes[0], b)
        XCTAssertEqual(usedValidate["valid"] as? Bool, false)
        XCTAssertEqual(usedValidate["reason"] as? String, "codeUsed")

        // The coupon's cap still holds: two uses, the third code is refused.
        let second = try await redeem(codes[1], b)
        XCTAssertEqual(second.status, 201, second.text)
        let third = try await redeem(codes[2], c)
        XCTAssertEqual(third.status, 422)
        XCTAssertEqual(third.errorCode, "exhausted")
        // The coupon's own code no longer redeems once it has unique codes.
        let shared = try await redeem(coupon, d)
        XCTAssertEqual(shared.errorCode, "notFound")
        let sharedCode = try await validate(coupon, d)
        XCTAssertEqual(sharedCode["reason"] as? String, "notFound")
        // A unique code never made: notFound.
        let never = UniqueCode.make(prefix: nil, random: Crypto.randomBytes(UniqueCode.randomLength))
        let neverMade = try await redeem(never, d)
        XCTAssertEqual(neverMade.errorCode, "notFound")

        // Reports: one redemption, the list and the CSV export name the code by its last four.
        let one = try await client.get("/v1/redemptions/\(id)", token: admin)
        XCTAssertEqual(try one.json()["uniqueCodeLast4"] as? String, String(codes[0].suffix(4)))
        let page = try await client.get("/v1/coupons/\(coupon)/redemptions", token: admin)
        let last4s = Set(
            ((try page.json()["data"] as? [[String: Any]]) ?? []).compactMap { $0["uniqueCodeLast4"] as? String })
        XCTAssertEqual(last4s, [String(codes[0].suffix(4)), String(codes[1].suffix(4))])
        let csv = try await client.send(
            "GET", "/v1/coupons/\(coupon)/redemptions",
            headers: ["Authorization": "Bearer \(admin)", "Accept": "text/csv"])
        let lines = csv.text.split(separator: "\r\n").map(String.init)
        let header = lines[0].split(separator: ",").map(String.init)
        let column = try XCTUnwrap(header.firstIndex(of: "uniqueCodeLast4"), lines[0])
        XCTAssertEqual(header[column - 1], "completedAt")
        XCTAssertEqual(lines.count, 3)
        XCTAssertEqual(
            Set(lines.dropFirst().map { String($0.split(separator: ",", omittingEmptySubsequences: false)[column]) }),
            last4s)
        let mine = try await client.get("/v1/me/redemptions", token: a.token)
        XCTAssertEqual(
            ((try mine.json()["data"] as? [[String: Any]])?.first)?["uniqueCodeLast4"] as? String,
            String(codes[0].suffix(4)))
    }

    /// A code of the unique shape whose check character does not match is refused by the gateway:
    /// no validation or reservation reaches coupons (its batch counters stand still).
    func testAMistypedUniqueCodeIsRefusedWithoutALookup() async throws {
        let coupon = try await coupon()
        let code = try await madeAndTaken(coupon, count: 1)[0]
        var chars = Array(code)
        let i = chars.count - 6
        chars[i] = UniqueCode.alphabet.first { $0 != chars[i] }!
        let typo = String(chars)
        let u = try user()
        let (validations, _) = try await batchSizes("redeem_validation_batch_size")
        let (reservations, _) = try await batchSizes("redeem_reservation_batch_size")
        let v = try await validate(typo, u)
        XCTAssertEqual(v["valid"] as? Bool, false)
        XCTAssertEqual(v["reason"] as? String, "mistyped")
        let r = try await redeem(typo, u)
        XCTAssertEqual(r.status, 422)
        XCTAssertEqual(r.errorCode, "mistyped")
        XCTAssertEqual(try r.decode(ErrorBody.self).error.message, RefusalReason.mistyped.sentence)
        let (validationsAfter, _) = try await batchSizes("redeem_validation_batch_size")
        let (reservationsAfter, _) = try await batchSizes("redeem_reservation_batch_size")
        XCTAssertEqual(validationsAfter, validations, "no validation reached coupons")
        XCTAssertEqual(reservationsAfter, reservations, "no reservation reached coupons")
        let good = try await redeem(code, u)
        XCTAssertEqual(good.status, 201, good.text)
    }

    struct ErrorBody: Decodable {
        struct E: Decodable {
            let code: String
            let message: String
        }
        let error: E
    }

    /// A discount reservation that waits for a purchase that never comes is released, and its
    /// unique code is free again, as its use of the cap is.
    func testAReleasedReservationFreesItsUniqueCode() async throws {
        let coupon = try await coupon([
            "kind": "percentOff", "percentOff": 20, "productIds": ["pro.monthly"], "platforms": ["web"],
            "duration": ["unit": "month", "count": 1], "periodCount": 1, "maxRedemptions": 1
        ])
        let code = try await madeAndTaken(coupon, count: 1)[0]
        let a = try user(), b = try user()
        let held = try await redeem(code, a)
        XCTAssertEqual(held.status, 201, held.text)
        XCTAssertEqual(try held.json()["status"] as? String, "reserved")
        let id = try XCTUnwrap(try held.json()["redemptionId"] as? String)
        let stillHeld = try await redeem(code, b)
        XCTAssertEqual(stillHeld.errorCode, "codeUsed")
        let released = try await Self.stack.eventually(15) {
            try await client.get("/v1/redemptions/\(id)", token: admin).json()["status"] as? String == "released"
        }
        XCTAssertTrue(released, "the reservation expired (TTL 2 s)")
        let again = try await redeem(code, b)
        XCTAssertEqual(again.status, 201, again.text)
        XCTAssertEqual(try again.json()["uniqueCodeLast4"] as? String, String(code.suffix(4)))
    }

    /// 64 accounts redeem one unique code at once: one wins, 63 are refused `codeUsed`, and the
    /// database holds one use of it.
    func testSixtyFourClientsRaceForOneUniqueCode() async throws {
        let coupon = try await coupon(["maxRedemptions": 1000])
        let code = try await madeAndTaken(coupon, count: 1)[0]
        let users = try (0..<64).map { _ in try user() }
        let results = try await withThrowingTaskGroup(of: (Int, String?).self) { group in
            for u in users {
                group.addTask { [client] in
                    let r = try await client.json(
                        "POST", "/v1/redemptions", ["code": code, "platform": "web"], token: u.token)
                    return (r.status, r.errorCode)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        XCTAssertEqual(results.filter { $0.0 == 201 }.count, 1, "\(results)")
        XCTAssertEqual(results.filter { $0.0 == 422 && $0.1 == "codeUsed" }.count, 63, "\(results)")
        let row = try db().query(
            """
            SELECT count(*) FILTER (WHERE r.holds_use) AS held, count(*) AS all_uses, c.used_count
            FROM coupons.coupons c LEFT JOIN coupons.redemptions r ON r.coupon_id = c.id
            WHERE c.code = $1 AND c.mode = 'live' GROUP BY c.used_count
            """, [coupon]
        ).first!
        XCTAssertEqual(try row.decode("held", as: Int.self), 1)
        XCTAssertEqual(try row.decode("all_uses", as: Int.self), 1)
        XCTAssertEqual(try row.decode("used_count", as: Int.self), 1)
    }

    // MARK: - MCP, and the two modes

    /// `create_codes` answers a count and a one-time address; no code is in the tool's answer.
    func testMCPCreateCodesAnswersACountAndAOneTimeAddressNeverACode() async throws {
        let coupon = try await coupon()
        let r = try await client.mcpToolCall(
            "create_codes", ["code": coupon, "count": 25, "prefix": "CLUB"], token: admin, id: 3)
        XCTAssertEqual(r.status, 200, r.text)
        let result = try XCTUnwrap(try r.json()["result"] as? [String: Any], r.text)
        XCTAssertEqual(result["isError"] as? Bool, false, r.text)
        let structured = try XCTUnwrap(result["structuredContent"] as? [String: Any])
        XCTAssertEqual(structured["count"] as? Int, 25)
        let url = try XCTUnwrap(structured["downloadUrl"] as? String)
        // The person opens the address, without a key: the CSV once, then 410.
        let csv = try await client.get(URL(string: url)!.path)
        XCTAssertEqual(csv.status, 200, csv.text)
        let codes = Self.codes(csv.text)
        XCTAssertEqual(codes.count, 25)
        for code in codes { XCTAssertFalse(r.text.contains(code), "a code reached the model's context") }
        let secondDownload = try await client.get(URL(string: url)!.path)
        XCTAssertEqual(secondDownload.status, 410)
        // Neither the codes nor the address's token reach a log.
        let logs = Self.stack.logs()
        XCTAssertTrue(
            logs.contains("code-downloads") && logs.contains("{token}"), "the download is logged by its route")
        XCTAssertFalse(logs.contains(URL(string: url)!.lastPathComponent), "the one-time token is not logged")
        for code in codes { XCTAssertFalse(logs.contains(code), "a code reached the logs") }
        let keyedAfterIt = try await client.get("/v1/coupons/\(coupon)/codes.csv", token: admin)
        XCTAssertEqual(keyedAfterIt.status, 410)
        let list = try await client.send(
            "POST", "/mcp",
            body: try JSONSerialization.data(withJSONObject: ["jsonrpc": "2.0", "id": 4, "method": "tools/list"]),
            headers: [
                "Authorization": "Bearer \(admin)", "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"
            ])
        XCTAssertTrue(list.text.contains("\"create_codes\""), list.text)
    }

    func testTestAndLiveModesKeepTheirCodesApart() async throws {
        let made = try await client.json(
            "POST", "/v1/api-keys", ["name": "test admin", "role": "admin", "mode": "test"], token: admin)
        let testKey = try XCTUnwrap(try made.json()["key"] as? String)
        let live = try await coupon()
        let test = try await coupon(key: testKey)
        // Neither key reaches the other mode's coupon, its codes or their CSV.
        let crossMake = try await client.json("POST", "/v1/coupons/\(live)/codes", ["count": 3], token: testKey)
        XCTAssertEqual(crossMake.status, 404)
        _ = try await makeCodes(live, count: 2)
        _ = try await makeCodes(test, count: 2, key: testKey)
        let testReadsLive = try await client.get("/v1/coupons/\(live)/codes.csv", token: testKey)
        XCTAssertEqual(testReadsLive.status, 404)
        let liveReadsTest = try await client.get("/v1/coupons/\(test)/codes.csv", token: admin)
        XCTAssertEqual(liveReadsTest.status, 404)
        let liveCodes = Self.codes(try await client.get("/v1/coupons/\(live)/codes.csv", token: admin).text)
        let testCodes = Self.codes(try await client.get("/v1/coupons/\(test)/codes.csv", token: testKey).text)
        XCTAssertEqual(liveCodes.count, 2)
        XCTAssertEqual(testCodes.count, 2)
        // A test coupon's code redeems as sandbox, a live one's as production, whatever was asked.
        let u = try user()
        let t = try await redeem(testCodes[0], u)
        XCTAssertEqual(t.status, 201, t.text)
        XCTAssertEqual(try t.json()["sandbox"] as? Bool, true)
        let l = try await redeem(liveCodes[0], u)
        XCTAssertEqual(l.status, 201, l.text)
        XCTAssertEqual(try l.json()["sandbox"] as? Bool, false)
        // Each key sees only its own mode's redemptions.
        let testId = try XCTUnwrap(try t.json()["redemptionId"] as? String)
        let liveReadsTestRedemption = try await client.get("/v1/redemptions/\(testId)", token: admin)
        XCTAssertEqual(liveReadsTestRedemption.status, 404)
        let seen = try await client.get("/v1/redemptions/\(testId)", token: testKey)
        XCTAssertEqual(try seen.json()["uniqueCodeLast4"] as? String, String(testCodes[0].suffix(4)))
    }
}
