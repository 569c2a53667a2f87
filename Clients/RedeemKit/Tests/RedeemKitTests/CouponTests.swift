import Foundation
import RedeemKit
import Testing

/// Validate, redeem and the long-poll await over a stubbed gateway.
@Suite struct CouponTests {
    @Test func aGuestIsNotIdentifiedWithoutARequest() async throws {
        let server = StubServer { _ in .json(500, Fixture.error("internal", "must not be called")) }
        let client = server.client()
        let check = try await client.validateCoupon("SPRING-25")
        #expect(check.valid == false)
        #expect(check.reason == .notIdentified)
        #expect(check.error?.localizedDescription == "Sign in to redeem a coupon.")
        let outcome = try await client.redeemCoupon("SPRING-25")
        #expect(outcome.refusal?.reason == .notIdentified)
        #expect(throws: CouponError.self) { try outcome.get() }
        #expect(try await client.isEntitled(to: "pro") == false)
        #expect(server.requests.isEmpty)
    }

    @Test func aRefusalIsAValueNotAThrow() async throws {
        let server = StubServer { r in
            switch r.path {
            case "/v1/coupons/validate": .json(200, #"{"valid":false,"reason":"expired","eligibleProductIds":[]}"#)
            default: .json(422, Fixture.error("exhausted", "This coupon has been used up."), headers: ["X-Request-Id": "req-7"])
            }
        }
        let client = server.client(store: try Fixture.signedInStore(expiresIn: 600))
        let check = try await client.validateCoupon("OLD-1")
        #expect(check.valid == false)
        #expect(check.reason == .expired)
        #expect(check.error?.localizedDescription == "This coupon has expired.")
        #expect(server.requests("POST", "/v1/coupons/validate").first?.json["platform"] as? String == "ios")
        #expect(server.requests("POST", "/v1/coupons/validate").first?.json["environment"] as? String == "production")
        #expect(server.requests("POST", "/v1/coupons/validate").first?.json.keys.contains("productId") == false)
        _ = try await client.validateCoupon("OLD-1", productId: "pro.yearly")
        #expect(server.requests("POST", "/v1/coupons/validate").last?.json["productId"] as? String == "pro.yearly")
        let outcome = try await client.redeemCoupon("FULL-1", productId: "pro.monthly")
        #expect(outcome == .refused(CouponError(.exhausted)))
        #expect(outcome.refusal?.requestId == "req-7")
        #expect(outcome.refusal?.serverMessage == "This coupon has been used up.")
        #expect(server.requests("POST", "/v1/redemptions").first?.json["productId"] as? String == "pro.monthly")
    }

    /// An app of a deployment that serves several names its app on every call; the default app's
    /// client names none.
    @Test func anAppIdIsSentAsRedeemApp() async throws {
        let app = "6F1C0000-0000-0000-0000-000000000002"
        let server = StubServer { r in
            switch r.path {
            case "/v1/coupons/validate": .json(200, #"{"valid":false,"reason":"expired","eligibleProductIds":[]}"#)
            default: .json(422, Fixture.error("notFound", "No such coupon."))
            }
        }
        let named = server.client(store: try Fixture.signedInStore(expiresIn: 600), appId: app)
        _ = try await named.validateCoupon("SUMMER")
        _ = try await named.redeemCoupon("SUMMER")
        #expect(server.requests.count == 2)
        #expect(server.requests.allSatisfy { $0.app == app })
        let plain = server.client(store: try Fixture.signedInStore(expiresIn: 600))
        _ = try await plain.validateCoupon("SUMMER")
        #expect(server.requests.last?.app == nil)
    }

    /// A free period redeemed in an iOS app (App Review 3.1.1): refused with the redeem page,
    /// from today's server (no URL) as from the next.
    @Test func webOnlyCarriesTheRedeemPage() async throws {
        let page = "https://redeem.example.com/redeem?code=FREEYEAR"
        let server = StubServer { r in
            r.json["code"] as? String == "OLD"
                ? .json(422, Fixture.error("webOnly", "Redeem this coupon on the web."))
                : .json(422, #"{"error":{"code":"webOnly","message":"Redeem this coupon on the web.","#
                    + #""redeemUrl":"\#(page)"}}"#)
        }
        let client = server.client(store: try Fixture.signedInStore(expiresIn: 600))
        let refusal = try #require(try await client.redeemCoupon("FREEYEAR").refusal)
        #expect(refusal.reason == .webOnly && refusal.redeemUrl == URL(string: page))
        #expect(refusal.serverMessage == "Redeem this coupon on the web.")
        let error = await #expect(throws: CouponError.self) { try await client.redeemCoupon("FREEYEAR").get() }
        #expect(error?.redeemUrl == URL(string: page))
        let old = try #require(try await client.redeemCoupon("OLD").refusal)
        #expect(old.reason == .webOnly && old.redeemUrl == nil)
    }

    @Test func aMistakeThatIsNotARefusalIsThrown() async throws {
        let server = StubServer { _ in .json(422, Fixture.error("invalid", "productId is required", field: "productId")) }
        let client = server.client(store: try Fixture.signedInStore(expiresIn: 600))
        let error = await #expect(throws: RedeemError.self) { try await client.redeemCoupon("DISCOUNT-2") }
        #expect(error?.field == "productId")
    }

    @Test func everyReasonHasItsOwnSentence() {
        let sentences = CouponError.Reason.allCases.map { CouponError($0).localizedDescription }
        #expect(Set(sentences).count == CouponError.Reason.allCases.count)
        #expect(sentences.allSatisfy { !$0.isEmpty && $0.hasSuffix(".") })
        #expect(CouponError(.unknown, serverMessage: "A new reason.").localizedDescription == "A new reason.")
    }

    /// The relaunch: one client redeems and is gone; a new one over the same store finds the
    /// pending id and awaits it through a dropped connection.
    @Test func aPendingRedemptionIsAwaitedAfterARelaunch() async throws {
        let id = UUID()
        let polls = Counter()
        let server = StubServer { r in
            switch (r.method, r.path) {
            case ("POST", "/v1/redemptions"): return .json(201, Fixture.redemption(id, status: "granting"))
            case ("GET", "/v1/redemptions/\(id.uuidString.lowercased())"):
                switch polls.next() {
                case 1: return .drop
                case 2: return .json(200, Fixture.redemption(id, status: "granting"))
                default: return .json(200, Fixture.redemption(id, status: "completed", entitlement: true))
                }
            case ("GET", "/v1/me/entitlements"): return .json(200, Fixture.entitlements)
            default: return .json(404, Fixture.error("routeNotFound", "no such route"))
            }
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("redeemkit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let first = server.client(store: try FileTokenStore(directory: directory))
        // Sign in through the file store, as an app would.
        let signedIn = try Fixture.signedInStore(expiresIn: 600)
        try FileTokenStore(directory: directory).setData(try signedIn.data(forKey: "redeemkit.session"), forKey: "redeemkit.session")
        let outcome = try await first.redeemCoupon("SPRING-25")
        #expect(outcome.redemption?.redemptionId == id)
        if case .redeemed(_, let isNew) = outcome { #expect(isNew) }
        #expect(try await first.pendingRedemptions() == [id])

        let relaunched = server.client(store: try FileTokenStore(directory: directory))
        let updates = relaunched.entitlementUpdates
        #expect(try await relaunched.pendingRedemptions() == [id])
        let completion = try await relaunched.awaitCouponCompletion(redemptionId: id, timeout: 20)
        guard case .completed(let entitlements, let redemption) = completion else {
            Issue.record("expected completed, got \(completion)")
            return
        }
        #expect(redemption.entitlement?.entitlementId == "pro")
        #expect(entitlements.map(\.entitlementId) == ["pro"])
        #expect(try await relaunched.pendingRedemptions() == [])
        #expect(try await relaunched.isEntitled(to: "pro"))
        var iterator = updates.makeAsyncIterator()
        #expect(await iterator.next()?.first?.entitlementId == "pro")
        let gets = server.requests("GET", "/v1/redemptions/\(id.uuidString.lowercased())")
        #expect(gets.count == 3)
        #expect(gets.allSatisfy { Int($0.query["wait"] ?? "") ?? 0 > 0 && Int($0.query["wait"] ?? "") ?? 99 <= 30 })
    }

    @Test func anUnsettledRedemptionTimesOutAndStaysPending() async throws {
        let id = UUID()
        // A long poll as the gateway's: the answer comes after `wait` seconds, unsettled.
        let server = StubServer { r in
            r.method == "POST" ? .json(201, Fixture.redemption(id, status: "reserved"))
                : .delayed(Double(r.query["wait"] ?? "0") ?? 0, .json(200, Fixture.redemption(id, status: "reserved")))
        }
        let client = server.client(store: try Fixture.signedInStore(expiresIn: 600))
        _ = try await client.redeemCoupon("DISCOUNT-1", productId: "pro.monthly")
        #expect(try await client.awaitCouponCompletion(redemptionId: id, timeout: 2.5) == .timedOut)
        #expect(try await client.pendingRedemptions() == [id])
        let polls = server.requests("GET", "/v1/redemptions/\(id.uuidString.lowercased())")
        #expect(polls.first?.query["wait"] == "2", "the whole time left, in seconds")
        #expect(polls.count <= 3, "no tight loop: \(polls.count) polls")
    }

    @Test func aFailedGrantEndsTheAwaitAsFailed() async throws {
        let id = UUID()
        let server = StubServer { _ in
            .json(200, #"{"redemptionId":"\#(id.uuidString.lowercased())","code":"X-1","status":"failed","platform":"web","sandbox":true,"reservedAt":"2026-05-01T12:00:00.000Z","failureReason":"provider said no"}"#)
        }
        let client = server.client(store: try Fixture.signedInStore(expiresIn: 600))
        guard case .failed(let r) = try await client.awaitCouponCompletion(redemptionId: id, timeout: 5) else {
            Issue.record("expected failed")
            return
        }
        #expect(r.failureReason == "provider said no")
    }

    @Test func sandboxEntitlementsCountOnlyInSandbox() async throws {
        let server = StubServer { _ in
            .json(200, #"{"data":[{"entitlementId":"pro","expiresAt":"2099-01-01T00:00:00.000Z","sandbox":true,"source":"redeem"},{"entitlementId":"old","expiresAt":"2001-01-01T00:00:00.000Z","sandbox":false,"source":"redeem"}]}"#)
        }
        let production = server.client(store: try Fixture.signedInStore(expiresIn: 600))
        #expect(try await production.isEntitled(to: "pro") == false)
        #expect(try await production.isEntitled(to: "old") == false, "expired")
        let sandbox = server.client(store: try Fixture.signedInStore(expiresIn: 600), environment: .sandbox)
        #expect(try await sandbox.isEntitled(to: "pro"))
    }

    @Test func storePurchasesPostTheDocumentedBodies() async throws {
        let id = UUID()
        let server = StubServer { _ in .json(200, Fixture.redemption(id, status: "completed", entitlement: true)) }
        let client = server.client(store: try Fixture.signedInStore(expiresIn: 600))
        _ = try await client.completeAppStorePurchase(redemptionId: id, signedTransaction: "eyJ.signed.jws")
        _ = try await client.completeAppStorePurchase(redemptionId: id, transactionId: "2000000123")
        _ = try await client.completePlayPurchase(redemptionId: id, purchaseToken: "play-token")
        let posts = server.requests("POST", "/v1/redemptions/\(id.uuidString.lowercased())/purchase").map { $0.json as NSDictionary }
        #expect(posts == [["signedTransaction": "eyJ.signed.jws"], ["transactionId": "2000000123"], ["purchaseToken": "play-token"]])
    }
}
