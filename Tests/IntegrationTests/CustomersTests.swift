import Core
import Foundation
import TestSupport
import XCTest

/// `GET /v1/customers/{appUserId}` and `GET /v1/customers?email=` (docs/api.md): an operator reads
/// one end user's account, its redemptions of the key's mode's coupons and its entitlements as
/// `GET /v1/me/entitlements` answers them to the account itself.
final class CustomersTests: StackTestCase {
    nonisolated(unsafe) static var stack: Stack!

    override class func startSuite() throws { stack = try Stack() }
    override class func stopSuite() { stack?.stop() }

    var client: HTTPClient { Self.stack.client }
    var live: String { Self.stack.adminKey }

    /// The answer as this suite reads it.
    struct Customer: Decodable {
        struct SignIns: Decodable, Equatable {
            let email: Bool
            let apple: Bool
            let cloudkit: Bool
        }
        let id: String
        let appUserId: String
        let email: String?
        let emailVerified: Bool
        let createdAt: String
        let signIns: SignIns
        let redemptions: ListBody<RedemptionBody>
        let entitlements: EntitlementsBody
    }

    func key(_ mode: String, role: String) async throws -> String {
        let r = try await client.json(
            "POST", "/v1/api-keys", ["name": "customers \(mode) \(role)", "role": role, "mode": mode], token: live)
        XCTAssertEqual(r.status, 201, r.text)
        return try XCTUnwrap(try r.decode(APIKeyBody.self).key)
    }

    func coupon(_ code: String, entitlement: String, token: String) async throws {
        let r = try await client.json(
            "POST", "/v1/coupons",
            [
                "code": code, "kind": "freePeriod", "entitlementId": entitlement,
                "duration": ["unit": "month", "count": 1]
            ],
            token: token)
        XCTAssertEqual(r.status, 201, r.text)
    }

    /// Redeems on the web and waits (long poll) until the redemption completes.
    func redeem(_ code: String, token: String) async throws -> RedemptionBody {
        let r = try await client.json("POST", "/v1/redemptions", ["code": code, "platform": "web"], token: token)
        XCTAssertEqual(r.status, 201, r.text)
        let id = try r.decode(RedemptionBody.self).redemptionId
        let done = try await client.get("/v1/redemptions/\(id)?wait=20", token: token)
        XCTAssertEqual(done.status, 200, done.text)
        let redemption = try done.decode(RedemptionBody.self)
        XCTAssertEqual(redemption.status, "completed", done.text)
        return redemption
    }

    func customer(_ path: String, _ token: String) async throws -> Customer {
        let r = try await client.get(path, token: token)
        XCTAssertEqual(r.status, 200, r.text)
        return try r.decode(Customer.self)
    }

    func testAnOperatorReadsAnAccountWithItsModesRedemptionsAndItsEntitlements() async throws {
        let tag = UUID().uuidString.prefix(8).uppercased()
        let email = "customer-\(tag.lowercased())@example.com"
        let signedUp = try await client.json(
            "POST", "/v1/accounts", ["email": email, "password": "a long customer passphrase"])
        XCTAssertEqual(signedUp.status, 201, signedUp.text)
        let user = try signedUp.decode(AccountSessionBody.self)
        let appUserId = try XCTUnwrap(user.account.appUserId)
        let token = user.session.accessToken

        let testAdmin = try await key("test", role: "admin")
        let liveCode = "LIVE-\(tag)", testCode = "TEST-\(tag)"
        try await coupon(liveCode, entitlement: "pro", token: live)
        try await coupon(testCode, entitlement: "pro", token: testAdmin)
        let liveRedemption = try await redeem(liveCode, token: token)
        let testRedemption = try await redeem(testCode, token: token)

        let liveReader = try await key("live", role: "readonly"), testReader = try await key("test", role: "readonly")
        let path = "/v1/customers/\(appUserId)"
        // The entitlements are those the account itself reads, once the grants are in the ledger.
        func lines(_ e: EntitlementsBody) -> [String] {
            e.data.map { "\($0.entitlementId ?? "") \($0.expiresAt ?? "") \($0.sandbox ?? false) \($0.source ?? "")" }
                .sorted()
        }
        var seen = try await customer(path, liveReader)
        var own: [String] = []
        let granted = try await Self.stack.eventually(10) {
            seen = try await self.customer(path, liveReader)
            own = lines(
                try (try await self.client.get("/v1/me/entitlements", token: token)).decode(EntitlementsBody.self))
            return seen.entitlements.entry("pro") != nil && lines(seen.entitlements) == own
        }
        XCTAssertTrue(granted, "the entitlements show as the account reads them: \(lines(seen.entitlements)) vs \(own)")
        XCTAssertEqual(seen.entitlements.partial, false)

        // The account: its facts and how it signs in, nothing secret.
        XCTAssertEqual(seen.id, user.account.id)
        XCTAssertEqual(seen.appUserId, appUserId)
        XCTAssertEqual(seen.email, email)
        XCTAssertEqual(seen.emailVerified, false)
        XCTAssertNotNil(Timestamp.parse(seen.createdAt))
        XCTAssertEqual(seen.signIns, .init(email: true, apple: false, cloudkit: false))
        let raw = try await client.get(path, token: liveReader)
        for secret in ["password", "accessToken", "refreshToken", "recordName"] {
            XCTAssertFalse(raw.text.contains(secret), "\(secret) in \(raw.text)")
        }

        // A live key sees the live redemption only, a test key the test one only.
        XCTAssertEqual(seen.redemptions.data.map(\.redemptionId), [liveRedemption.redemptionId])
        XCTAssertEqual(seen.redemptions.data.first?.status, "completed")
        XCTAssertNil(seen.redemptions.nextCursor)
        let asTest = try await customer(path, testReader)
        XCTAssertEqual(asTest.redemptions.data.map(\.redemptionId), [testRedemption.redemptionId])
        XCTAssertEqual(asTest.appUserId, appUserId)
        // Pages: one redemption a page.
        let onePerPage = try await customer(path + "?limit=1", live)
        XCTAssertEqual(onePerPage.redemptions.data.map(\.redemptionId), [liveRedemption.redemptionId])
        XCTAssertNil(onePerPage.redemptions.nextCursor)
        let badLimit = try await client.get(path + "?limit=0", token: live)
        XCTAssertEqual(badLimit.status, 422, badLimit.text)
        XCTAssertEqual(badLimit.errorField, "limit")

        // By email, in any case: a list of the one account.
        let byEmail = try await client.get(
            "/v1/customers?email=" + email.uppercased().addingPercentEncoding(withAllowedCharacters: .alphanumerics)!,
            token: testReader)
        XCTAssertEqual(byEmail.status, 200, byEmail.text)
        let list = try byEmail.decode(ListBody<Customer>.self)
        XCTAssertEqual(list.data.map(\.appUserId), [appUserId])
        XCTAssertEqual(list.data.first?.redemptions.data.map(\.redemptionId), [testRedemption.redemptionId])
        let byId = try await client.get("/v1/customers?appUserId=\(appUserId)", token: liveReader)
        XCTAssertEqual(try byId.decode(ListBody<Customer>.self).data.map(\.appUserId), [appUserId])
        let nobodyByEmail = try await client.get(
            "/v1/customers?email=nobody-\(tag.lowercased())%40example.com", token: live)
        XCTAssertEqual(nobodyByEmail.status, 200, nobodyByEmail.text)
        XCTAssertEqual(try nobodyByEmail.decode(ListBody<Customer>.self).data.count, 0)
        let noFilter = try await client.get("/v1/customers", token: live)
        XCTAssertEqual(noFilter.status, 422, noFilter.text)
        XCTAssertEqual(noFilter.errorField, "email")

        // An unknown account is 404 notFound; an end user's token and no credential are refused.
        let unknown = try await client.get("/v1/customers/nobody-\(tag.lowercased())", token: liveReader)
        XCTAssertEqual(unknown.status, 404, unknown.text)
        XCTAssertEqual(unknown.errorCode, "notFound")
        let asUser = try await client.get(path, token: token)
        XCTAssertEqual(asUser.status, 403, asUser.text)
        XCTAssertEqual(asUser.errorCode, "forbidden")
        let anonymous = try await client.get(path)
        XCTAssertEqual(anonymous.status, 401, anonymous.text)

        // A deleted account is no customer any more.
        let deleted = try await client.send("DELETE", "/v1/me", headers: ["Authorization": "Bearer \(token)"])
        XCTAssertEqual(deleted.status, 204, deleted.text)
        let gone = try await client.get(path, token: live)
        XCTAssertEqual(gone.status, 404, gone.text)
    }
}
