import Foundation
import RedeemKit
import Testing

/// The system's URL opener and offer-code sheet, faked: what was opened, and whether it opens.
final class FakeOfferCodePage: OfferCodePage, @unchecked Sendable {
    // `log` is touched only under `lock`.
    private let lock = NSLock()
    private var log: [String] = []
    let opens: Bool

    init(opens: Bool = true) { self.opens = opens }

    func open(_ url: URL) async -> Bool {
        record("open \(url.absoluteString)")
        return opens
    }

    func presentSheet() async throws { record("sheet") }

    private func record(_ line: String) {
        lock.lock()
        log.append(line)
        lock.unlock()
    }

    var shown: [String] {
        lock.lock()
        defer { lock.unlock() }
        return log
    }
}

/// The App Store hand-off: the offer-code page with the plan's code, the sheet only as a fallback,
/// the whole flow through the listener, and giving a use back.
@Suite struct StoreHandoffTests {
    static let id = UUID()
    static let page = "https://apps.apple.com/redeem?ctx=offercodes&id=123&code=HALF"

    static func redemption() throws -> Redemption {
        try ModelDecodingTests.decode(Redemption.self, Fixture.discount(id))
    }

    static func check(urls: [String: String]?) throws -> CouponValidation {
        let pages =
            urls.map { u in
                #","redemptionUrls":{"# + u.map { #""\#($0.key)":"\#($0.value)""# }.joined(separator: ",") + "}"
            } ?? ""
        return try ModelDecodingTests.decode(
            CouponValidation.self,
            #"""
            {"valid":true,"eligibleProductIds":["pro.monthly","pro.yearly"],"appStore":{"redemptionUrl":"\#(page)"\#(pages)}}
            """#)
    }

    @Test func theChosenPlansPageIsOpenedWithItsCode() async throws {
        let fake = FakeOfferCodePage()
        let client = StubServer { _ in .empty(500) }.client(offerCodePage: fake)
        let plan = Self.page + "-2"
        let check = try Self.check(urls: ["pro.yearly": Self.page, "pro.monthly": plan])
        let shown = try await client.presentOfferCode(for: try Self.redemption(), check: check)
        #expect(shown == .page(URL(string: plan)!))
        #expect(fake.shown == ["open \(plan)"])
    }

    @Test func withoutAPageOfThePlanTheRedemptionsPageIsOpened() async throws {
        let fake = FakeOfferCodePage()
        let client = StubServer { _ in .empty(500) }.client(offerCodePage: fake)
        // Today's server: validate names one page, for the coupon's code.
        #expect(
            try await client.presentOfferCode(for: try Self.redemption(), check: try Self.check(urls: nil))
                == .page(URL(string: Self.page)!))
        #expect(try await client.presentOfferCode(for: try Self.redemption()) == .page(URL(string: Self.page)!))
        #expect(fake.shown == ["open \(Self.page)", "open \(Self.page)"])
    }

    @Test func theSheetIsOnlyTheFallback() async throws {
        let closed = FakeOfferCodePage(opens: false)
        let client = StubServer { _ in .empty(500) }.client(offerCodePage: closed)
        #expect(try await client.presentOfferCode(for: try Self.redemption()) == .sheet)
        #expect(closed.shown == ["open \(Self.page)", "sheet"])

        let fake = FakeOfferCodePage()
        let noPage = try ModelDecodingTests.decode(Redemption.self, Fixture.redemption(Self.id, status: "reserved"))
        #expect(
            try await StubServer { _ in .empty(500) }.client(offerCodePage: fake).presentOfferCode(for: noPage)
                == .sheet)
        #expect(fake.shown == ["sheet"])

        let error = await #expect(throws: RedeemError.self) {
            try await StubServer { _ in .empty(500) }.client().presentOfferCode(for: try Self.redemption())
        }
        #expect(error?.kind == .unsupported)
    }

    /// Open the page, let the listener post what StoreKit hands over, and await the completion.
    @Test func redeemOfferCodeRunsTheWholeHandOff() async throws {
        let store = FakeTransactions()
        let purchase = "/v1/redemptions/\(Self.id.uuidString.lowercased())/purchase"
        let server = StubServer { r in
            switch (r.method, r.path) {
            case ("GET", "/v1/me/redemptions"): .json(200, Fixture.page([Fixture.discount(Self.id)]))
            case ("POST", purchase):
                // The purchase is posted only after the page was opened.
                .json(200, Fixture.discount(Self.id, status: "completed"))
            case ("GET", "/v1/redemptions/\(Self.id.uuidString.lowercased())"):
                .delayed(0.05, .json(200, Fixture.discount(Self.id, status: "completed")))
            case ("GET", "/v1/me/entitlements"): .json(200, Fixture.entitlements)
            default: .json(404, Fixture.error("routeNotFound", "no such route"))
            }
        }
        let fake = FakeOfferCodePage()
        let client = server.client(
            store: try Fixture.signedInStore(expiresIn: 600), transactions: store, offerCodePage: fake)
        store.deliver("t1")
        let completion = try await client.redeemOfferCode(try Self.redemption(), timeout: 10)
        guard case .completed(let entitlements, let done) = completion else {
            Issue.record("\(completion)")
            return
        }
        #expect(done.redemptionId == Self.id && entitlements.map(\.entitlementId) == ["pro"])
        #expect(fake.shown == ["open \(Self.page)"])
        #expect(try await Self.eventually { store.finishes("t1") == 1 })
        await client.stop()
    }

    @Test func aUseIsGivenBackWhenTheStoreAccountOwnsThePlan() async throws {
        let release = "/v1/redemptions/\(Self.id.uuidString.lowercased())/release"
        let server = StubServer { r in
            switch (r.method, r.path) {
            case ("POST", "/v1/redemptions"): .json(201, Fixture.discount(Self.id))
            case ("POST", release): .json(200, Fixture.discount(Self.id, status: "released"))
            default: .json(404, Fixture.error("routeNotFound", "no such route"))
            }
        }
        let client = server.client(store: try Fixture.signedInStore(expiresIn: 600))
        _ = try await client.redeemCoupon("HALF", productId: "pro.monthly")
        #expect(try await client.pendingRedemptions() == [Self.id])
        let released = try await client.release(Self.id, reason: .alreadyOwned)
        #expect(released.status == .released)
        #expect(server.requests("POST", release).first?.json["reason"] as? String == "alreadyOwned")
        #expect(try await client.pendingRedemptions() == [])
    }

    /// Waits (at most 5 s) for `condition`, checking every 10 ms.
    static func eventually(_ condition: () -> Bool) async throws -> Bool {
        for _ in 0..<500 {
            if condition() { return true }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        return condition()
    }
}
